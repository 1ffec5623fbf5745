"""Where a copy's files live in the checkout: one function per kind of file, relative to the checkout's root.

The templates write these paths (their folder names under ``template_*``), and the probe, the data check, the smoke,
the report, ``hooks.check`` and ``hooks.update`` read them; every module asks here instead of spelling
``examples/<id>/...`` itself, so a path has one home.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

ANSWERS_DIR = ".copier-answers"


def answers_file(model_id: str) -> PurePosixPath:
    """The model's copier answers (its frozen facts and plans beside the user's answers)."""
    return PurePosixPath(ANSWERS_DIR) / f"{model_id}.yml"


def example_dir(model_id: str) -> PurePosixPath:
    """The model's example folder: YAML, launch script, MIGRATION.md, REPORT.md."""
    return PurePosixPath("examples") / model_id


def config_yaml(model_id: str) -> PurePosixPath:
    """The training YAML the trainer reads."""
    return example_dir(model_id) / f"{model_id}_config.yaml"


def launch_script(model_id: str) -> PurePosixPath:
    """The launch script (CANN environment, torchrun on the trainer)."""
    return example_dir(model_id) / f"finetune_{model_id}.sh"


def migration_md(model_id: str) -> PurePosixPath:
    """The migration report copier renders: decisions, plans, data path, memory plan."""
    return example_dir(model_id) / "MIGRATION.md"


def report_md(model_id: str) -> PurePosixPath:
    """What the report stage measured (data parity, the smoke, the system test), written whole by that stage; copier
    never renders it."""
    return example_dir(model_id) / "REPORT.md"


def models_root() -> PurePosixPath:
    """Where MindSpeed-MM's FSDP2 model plugins live (every model's, not only ours)."""
    return PurePosixPath("mindspeed_mm/fsdp/models")


def model_plugin_dir(model_id: str) -> PurePosixPath:
    """The registered model plugin (and, for remote code, its ``remote_code/`` copy)."""
    return models_root() / model_id


def modeling_file(model_id: str) -> PurePosixPath:
    """The model plugin's module (the registered subclass)."""
    return model_plugin_dir(model_id) / f"modeling_{model_id}.py"


def data_plugin_file(model_id: str) -> PurePosixPath:
    """Branch b's template and media plugin."""
    return model_plugin_dir(model_id) / f"data_plugin_{model_id}.py"


def dataset_dir(model_id: str) -> PurePosixPath:
    """Branch c's dataset plugin."""
    return PurePosixPath("mindspeed_mm/fsdp/data/datasets") / model_id


@dataclass(frozen=True)
class StPaths:
    """The model's system test in MindSpeed-MM's ``tests/st`` layout (upstream's names, ``finetune_<id>``)."""

    model_id: str

    @property
    def case(self) -> str:
        return f"finetune_{self.model_id}"

    @property
    def script(self) -> PurePosixPath:
        """The shell script (rendered with the scaffold)."""
        return PurePosixPath("tests/st/shell_scripts") / f"{self.case}.sh"

    @property
    def run_config(self) -> PurePosixPath:
        """The run config (recorded from the smoke)."""
        return PurePosixPath("tests/st/run_configs") / self.case / f"{self.model_id}_config.yaml"

    @property
    def baseline(self) -> PurePosixPath:
        """The baseline ``test_ci_st.py`` compares with (measured by a smoke)."""
        return PurePosixPath("tests/st/baseline_results") / f"{self.case}.json"

    @property
    def provenance(self) -> PurePosixPath:
        """Where and how the baseline was measured (device, dtype, versions), beside it."""
        return PurePosixPath("tests/st/baseline_results") / f"{self.case}.provenance.json"

    def triple(self) -> list[PurePosixPath]:
        return [self.script, self.run_config, self.baseline]


def written(model_id: str, branch: str) -> list[PurePosixPath]:
    """Everything a copy of ``branch`` writes before its smoke, answers file first (what a failed copy tells the
    user to remove): the folders, and the system test's script."""
    return [answers_file(model_id), example_dir(model_id), model_plugin_dir(model_id),
            *([dataset_dir(model_id)] if branch == "c" else []), StPaths(model_id).script]


def claimed(model_id: str) -> list[PurePosixPath]:
    """Every path a copy of ``model_id`` writes on any branch, the report stage's files included: a path here that
    exists in a checkout without the model's answers file is someone else's (the user's, or another model's)."""
    st = StPaths(model_id)
    return [*written(model_id, "c"), st.run_config.parent, st.baseline, st.provenance]

"""``python -m hooks.check`` (issue 12, deliverable 3): the migrated models of a checkout, checked without training.

Tier 1 runs on a fake minimal checkout written here (a few params dataclasses, the registries, ModelHub's
hook call); tier 2 on a copy of the pinned MindSpeed-MM with a model rendered by copier (no smoke).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from hooks import check, dig, env_with_hooks
from hooks.check import leftovers
from hooks.check.findings import Framework
from hooks.check.plugin_code import function_arity
from hooks.check.schema import schema_findings
from hooks.framework import checkout
from hooks.report.smoke import SmokeRecord, result_file
from hooks.smoke.run import work_dir
from tests.model_facts import stand_in_answers_facts

PARAMS = '''
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class RecomputePlanConfig:
    apply_modules: list = field(default_factory=list)


@dataclass
class LossConfig:
    loss_type: str = "default"


@dataclass
class ParallelArguments:
    fully_shard_parallel_size: int = 1
    recompute: bool = False
    recompute_plan: RecomputePlanConfig = field(default_factory=RecomputePlanConfig)


@dataclass
class FeatureArguments:
    recompute_plan: RecomputePlanConfig = field(default_factory=RecomputePlanConfig)
    loss_cfg: LossConfig = field(default_factory=LossConfig)


@dataclass
class CollateParam:
    collator_id: Optional[str] = None
    model_name: Optional[str] = field(default=None, metadata={"help": "Deprecated: use collator_id."})


@dataclass
class DataloaderParam:
    shuffle: bool = True
    collate_param: CollateParam = field(default_factory=CollateParam)


@dataclass
class DatasetParam:
    dataset_type: str = "huggingface"


@dataclass
class DataArguments:
    dataset_param: DatasetParam = field(default_factory=DatasetParam)
    dataloader_param: DataloaderParam = field(default_factory=DataloaderParam)


@dataclass
class ModelArguments:
    model_id: str = ""
    freeze: list = field(default_factory=list)


@dataclass
class TrainingArguments:
    lr: float = 1e-5
    plugin: list = field(default_factory=list)


@dataclass
class Arguments:
    parallel: ParallelArguments = field(default_factory=ParallelArguments)
    model: ModelArguments = field(default_factory=ModelArguments)
    data: DataArguments = field(default_factory=DataArguments)
    training: TrainingArguments = field(default_factory=TrainingArguments)
    features: FeatureArguments = field(default_factory=FeatureArguments)
'''
FRAMEWORK = {
    "mindspeed_mm/fsdp/params/args.py": PARAMS,
    "mindspeed_mm/fsdp/features/recompute.py": 'def apply(args):\n    return getattr(args, "recompute", False)\n',
    str(checkout.TEMPLATE_FILE): '_register_template(name="qwen2vl")\n',
    str(checkout.COLLATOR_FILE): '_register_data_collator("qwen3vl", object)\n',
    str(checkout.MODELHUB_FILE): "def build(cls, a, b, c):\n    cls.overwrite_transformer_config(a, b, c)\n",
    "mindspeed_mm/fsdp/utils/register.py": "class Register:\n    pass\n\n\nmodel_register = Register()\n"
                                           "data_register = Register()\n",
    "mindspeed_mm/fsdp/data/datasets/huggingface/hf.py": '@data_register.register("huggingface")\nclass D:\n'
                                                          "    pass\n",
}
MODELING = '''
import transformers

from mindspeed_mm.fsdp.utils.register import model_register


@model_register.register("m")
class M(transformers.PreTrainedModel):
    _FORWARD_KEYS = frozenset(["input_ids", "labels", "pixel_values"])

    @staticmethod
    def overwrite_transformer_config(transformer_config, model_args, feature_args):
        return transformer_config
'''
CONFIG = {
    "parallel": {"fully_shard_parallel_size": 1},
    "data": {"dataset_param": {"dataset_type": "huggingface", "anything": {"the": "dataset reads it"},
                               "basic_parameters": {"template": "qwen2vl"}},
             "dataloader_param": {"shuffle": True, "collate_param": {"collator_id": "qwen3vl"}}},
    "model": {"model_id": "m", "freeze": []},
    "features": {"recompute": True, "recompute_plan": {"apply_modules": ["model.layers.{*}"]},
                 "loss_cfg": {"loss_type": "default"}},
    "training": {"lr": 1e-5, "plugin": ["mindspeed_mm/fsdp/models/m", "mindspeed_mm/fsdp/data/datasets/huggingface"]},
}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip())


def _fake_checkout(root: Path, model_id: str = "m") -> Path:
    """The framework files ``hooks.check`` reads, and one model migrated into it (branch a)."""
    _write(root, FRAMEWORK)
    answers = {"model_id": model_id, "data_branch": "a", "framework": {"revision": checkout.revision(root)},
               "model_facts": stand_in_answers_facts(forward_params=["input_ids", "labels", "pixel_values"])}
    _write(root, {
        f".copier-answers/{model_id}.yml": yaml.safe_dump(answers),
        f"examples/{model_id}/{model_id}_config.yaml": yaml.safe_dump(CONFIG),
        f"examples/{model_id}/finetune_{model_id}.sh": "#!/bin/bash\ntorchrun trainer.py\n",
        f"examples/{model_id}/MIGRATION.md": "# m\n\n=======\n\nA heading underline is no conflict.\n",
        f"mindspeed_mm/fsdp/models/{model_id}/modeling_{model_id}.py": MODELING,
    })
    _st_files(root, model_id)
    return root


def _st_files(root: Path, model_id: str, device: str = "npu") -> None:
    """The model's system test as a copy records it (``hooks.report.st``), recorded on ``device``."""
    import json

    from hooks.scaffold import StPaths
    from hooks.smoke.baseline import Provenance, device_label, sha256

    paths = StPaths(model_id)
    _write(root, {str(paths.script): "#!/bin/bash\nset -e\n", str(paths.run_config): yaml.safe_dump(CONFIG),
                  str(paths.baseline): json.dumps({"loss": [8.1, 8.0], "time": [], "memo info": [], "warm_up": 2})})
    prov = Provenance(device=device, device_name=f"{device} host", label=device_label(device), ranks=2,
                      param_dtype="bf16", reduce_dtype="fp32", torch="2.7.1", transformers="4.57.1",
                      framework_revision=checkout.revision(root), template_version="0.3.0",
                      run_config_sha256=sha256(root / paths.run_config))
    (root / paths.provenance).write_text(json.dumps(prov.__dict__))


def _run(dest: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = check.main([str(dest)])
    return code, capsys.readouterr().out.splitlines()


def _edit_config(dest: Path, edit) -> None:
    path = dest / "examples/m/m_config.yaml"
    cfg = yaml.safe_load(path.read_text())
    edit(cfg)
    path.write_text(yaml.safe_dump(cfg))


def test_a_sound_model_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _run(_fake_checkout(tmp_path), capsys)
    assert code == 0, lines
    assert lines == [
        "m: info: tests/st/baseline_results/finetune_m.json recorded on npu (npu host, bf16, torch 2.7.1, transformers "
        f"4.57.1, framework {checkout.revision(tmp_path)[:12]}) — fix: nothing to do",
        f"checked 1 migrated model in {tmp_path}: 0 errors, 0 warnings, 1 info"]


def test_a_missing_or_stale_baseline_is_flagged_with_its_device(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35: which device a baseline came from; a CPU one is no NPU baseline; missing or stale is a warning."""
    dest = _fake_checkout(tmp_path)
    _st_files(dest, "m", device="cpu")
    code, lines = _run(dest, capsys)
    assert code == 0 and "m: info: tests/st/baseline_results/finetune_m.json recorded on cpu (cpu host" in lines[0]
    assert "an NPU baseline for MindSpeed-MM's CI: python -m hooks.smoke .copier-answers/m.yml --record-baseline" \
        in lines[0]
    run_config = dest / "tests/st/run_configs/finetune_m/m_config.yaml"
    run_config.write_text(run_config.read_text() + "# edited\n")
    (dest / "mindspeed_mm/fsdp/params/args.py").write_text(textwrap.dedent(PARAMS).lstrip() + "\n")  # a new framework
    code, lines = _run(dest, capsys)
    stale = next(line for line in lines if ": warning: " in line)
    assert code == 0 and "finetune_m.json is stale: recorded for framework" in stale, lines
    assert "tests/st/run_configs/finetune_m/m_config.yaml changed since" in stale
    (dest / "tests/st/baseline_results/finetune_m.json").unlink()
    code, lines = _run(dest, capsys)
    assert code == 0 and lines[0] == (
        "m: warning: system test incomplete: tests/st/baseline_results/finetune_m.json missing — fix: record it in a "
        "MindSpeed-MM checkout: python -m hooks.smoke .copier-answers/m.yml --record-baseline")


def test_no_answers_files_is_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, FRAMEWORK)
    code, lines = _run(tmp_path, capsys)
    assert code == 0 and lines == [f"no migrated models in {tmp_path} (no .copier-answers/*.yml): nothing to check"]


def test_unknown_moved_and_deprecated_keys(tmp_path: Path) -> None:
    """Against the schema: a field at another place, a setting this checkout reads elsewhere (though still a field
    where it is), a typo, a deprecated key; extras the framework reads and the dataset's own dict pass."""
    fw = Framework.read(_fake_checkout(tmp_path))
    assert fw.facts["recompute_in"] == "features" and "recompute" in fw.extras

    def edit(cfg):
        cfg["parallel"]["recompute"] = True  # a ParallelArguments field, but recompute is read from features
        cfg["model"]["loss_cfg"] = {"loss_type": "default"}  # loss_cfg is read from features here
        cfg["training"]["fully_shard_parallel_size"] = 2  # a field of parallel
        cfg["training"]["lrr"] = 1.0  # a typo
        cfg["features"]["recompute_plan"]["use_reentrant"] = True  # not a field of RecomputePlanConfig
        cfg["data"]["dataloader_param"]["collate_param"]["model_name"] = "qwen3vl"  # deprecated
        cfg["tooling"] = {"x": 1}  # no such section

    _edit_config(tmp_path, edit)
    cfg = yaml.safe_load((tmp_path / "examples/m/m_config.yaml").read_text())
    found = {f.what.split(" ")[0]: f for f in schema_findings(cfg, fw)}
    assert set(found) == {"parallel.recompute", "model.loss_cfg", "training.fully_shard_parallel_size",
                          "training.lrr", "features.recompute_plan.use_reentrant",
                          "data.dataloader_param.collate_param.model_name", "tooling.x"}
    moved = found["parallel.recompute"]
    assert moved.level == "error" and "moved" in moved.what and moved.fix.startswith("move it to features.recompute (")
    assert found["model.loss_cfg"].fix.startswith("move it to features.loss_cfg")
    assert found["training.fully_shard_parallel_size"].fix == "move it to parallel.fully_shard_parallel_size"
    assert found["training.lrr"].level == "error" and found["training.lrr"].fix == "rename it to training.lr"
    assert "not a setting" in found["features.recompute_plan.use_reentrant"].what
    assert found["data.dataloader_param.collate_param.model_name"].level == "warning"
    assert found["data.dataloader_param.collate_param.model_name"].fix == "delete it: collator_id is set"


def test_an_older_checkout_reads_recompute_and_the_collator_elsewhere(tmp_path: Path) -> None:
    """Before the features section had recompute_plan, and before collator_id: the scaffold's keys have moved."""
    _fake_checkout(tmp_path)
    params = tmp_path / "mindspeed_mm/fsdp/params/args.py"
    params.write_text(params.read_text()
                      .replace("    recompute_plan: RecomputePlanConfig = field(default_factory=RecomputePlanConfig)\n"
                               "    loss_cfg", "    loss_cfg")
                      .replace("    collator_id: Optional[str] = None\n", "")
                      .replace('metadata={"help": "Deprecated: use collator_id."}', 'metadata={"help": "x"}'))
    fw = Framework.read(tmp_path)
    assert (fw.facts["recompute_in"], fw.facts["collator_key"]) == ("parallel", "model_name")
    found = {f.what.split(" ")[0]: f.fix for f in schema_findings(CONFIG, fw)}
    assert found == {"features.recompute": "move it to parallel.recompute",
                     "features.recompute_plan": "move it to parallel.recompute_plan",
                     "data.dataloader_param.collate_param.collator_id":
                         "rename it to data.dataloader_param.collate_param.model_name"}


def test_broken_model_reports_each_finding_with_a_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = _fake_checkout(tmp_path)

    def edit(cfg):
        cfg["data"]["dataset_param"]["basic_parameters"]["template"] = "qwen9_vl"
        cfg["data"]["dataloader_param"]["collate_param"]["collator_id"] = "nope"
        cfg["data"]["dataset_param"]["dataset_type"] = "mine"
        cfg["training"]["plugin"].append("mindspeed_mm/fsdp/models/gone")

    _edit_config(dest, edit)
    modeling = dest / "mindspeed_mm/fsdp/models/m/modeling_m.py"
    modeling.write_text(modeling.read_text()
                        .replace('"labels", ', "")
                        .replace("model_args, feature_args", "model_args")
                        .replace("import model_register", "import model_register, gone_register")
                        + "\nfrom .helpers import util\n")
    (dest / "mindspeed_mm/fsdp/models/m/helpers.py").write_text("def other():\n    pass\n")
    (dest / "mindspeed_mm/fsdp/models/m/broken.py").write_text("def f(:\n")
    script = dest / "examples/m/finetune_m.sh"
    script.write_text("<<<<<<< before updating\necho a\n=======\necho b\n>>>>>>> after updating\n")
    (dest / "examples/m/m_config.yaml.rej").write_text("@@ -1 +1 @@\n")
    answers = dest / ".copier-answers/m.yml"
    data = yaml.safe_load(answers.read_text())
    data["framework"]["revision"] = "0123456789abcdef0123"
    answers.write_text(yaml.safe_dump(data))

    code, lines = _run(dest, capsys)
    assert code == 1
    text = "\n".join(lines)
    expected = [
        "m: error: chat template 'qwen9_vl' is not registered",
        "m: error: collator 'nope' is not registered",
        "m: error: dataset_type 'mine' is not registered",
        "m: error: training.plugin names mindspeed_mm/fsdp/models/gone, which is not in this checkout",
        "m: error: mindspeed_mm/fsdp/models/m/broken.py:1 does not parse",
        "imports gone_register from mindspeed_mm.fsdp.utils.register, which mindspeed_mm/fsdp/utils/register.py "
        "does not define",
        "imports util from .helpers",
        "M.overwrite_transformer_config takes 2 arguments; this checkout's ModelHub passes 3 — fix: make it "
        "(transformer_config, model_args, feature_args)",
        "m: warning: mindspeed_mm/fsdp/models/m/modeling_m.py:8 M._FORWARD_KEYS drops labels",
        "m: error: examples/m/finetune_m.sh:1 has merge-conflict markers",
        "m: error: examples/m/m_config.yaml.rej: a change that did not apply to examples/m/m_config.yaml",
        "m: info: migrated against 0123456789ab, checkout is sha256:",
    ]
    for piece in expected:
        assert piece in text, piece
    assert all(" — fix: " in line for line in lines[:-1])
    assert "MIGRATION.md" not in text  # a ======= underline alone is no conflict
    assert lines[-1].startswith("checked 1 migrated model") and "(m failing)" in lines[-1]


def test_a_plugin_registration_counts_only_when_its_folder_is_a_plugin(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Branch b registers its template in data_plugin_<id>.py: found when the model's folder is in training.plugin,
    and the fix says to add it when it is not."""
    dest = _fake_checkout(tmp_path)
    (dest / "mindspeed_mm/fsdp/models/m/data_plugin_m.py").write_text(
        "from mindspeed_mm.fsdp.utils.register import model_register\n\n_register_template(name='m', params=None)\n")
    answers = dest / ".copier-answers/m.yml"
    answers.write_text(answers.read_text().replace("data_branch: a", "data_branch: b"))
    _edit_config(dest, lambda cfg: cfg["data"]["dataset_param"]["basic_parameters"].update(template="m"))
    assert _run(dest, capsys)[0] == 0
    _edit_config(dest, lambda cfg: cfg["training"].update(plugin=["mindspeed_mm/fsdp/data/datasets/huggingface"]))
    code, lines = _run(dest, capsys)
    assert code == 1
    assert ("m: error: chat template 'm' is not registered: mindspeed_mm/fsdp/models/m/data_plugin_m.py registers "
            "it, but its folder is not in training.plugin — fix: add mindspeed_mm/fsdp/models/m to training.plugin"
            ) in lines


@pytest.mark.parametrize(("kind", "setting", "registration"), [
    ("dataset", ("data", "dataset_param", "dataset_type"), '@data_register.register("mine")\nclass D:\n    pass\n'),
    ("collator", ("data", "dataloader_param", "collate_param", "collator_id"), '_register_data_collator("mine", 1)\n'),
    ("model", ("model", "model_id"), '@model_register.register("mine")\nclass M:\n    pass\n'),
])
def test_each_registry_names_the_own_file_that_registers_an_unloaded_name(
        tmp_path: Path, kind: str, setting: tuple[str, ...], registration: str) -> None:
    """Every registry of the table: a name registered only by a model file outside training.plugin is one error,
    which names that file and says to add its folder to training.plugin."""
    dest = _fake_checkout(tmp_path)
    (dest / "mindspeed_mm/fsdp/data/datasets/m").mkdir(parents=True)
    (dest / "mindspeed_mm/fsdp/data/datasets/m/own.py").write_text(registration)

    def edit(cfg):
        *parents, key = setting
        dig(cfg, *parents)[key] = "mine"

    _edit_config(dest, edit)
    found = [f for f in check.check(dest)[0] if "tests/st/" not in f.what]  # the baseline's device: an info line
    assert [(f.model, f.level) for f in found] == [("m", "error")], found
    assert "mindspeed_mm/fsdp/data/datasets/m/own.py registers it" in found[0].what
    assert found[0].fix == "add mindspeed_mm/fsdp/data/datasets/m to training.plugin"


@pytest.mark.parametrize(("source", "expected"), [
    ("@staticmethod\ndef f(a, b, c=None): pass", (2, 3)),
    ("@classmethod\ndef f(cls, a, b): pass", (2, 2)),
    ("def f(self, a, *args): pass", (1, None)),
])
def test_hook_arity_leaves_out_self_and_cls(source: str, expected: tuple[int, int | None]) -> None:
    assert function_arity(ast.parse(source).body[0]) == expected


# --- tier 2: a model rendered into a copy of the pinned MindSpeed-MM -----------------------------------------


@pytest.fixture(scope="module")
def migrated(mm_home: Path, tiny_models, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the pinned checkout with one model rendered by copier (no smoke), not to be edited."""
    from tests.copier_run import copy, mm_checkout

    dest = mm_checkout(mm_home, tmp_path_factory.mktemp("check"))
    done = copy(dest, model_id="qv", model_path=tiny_models("qwen2_5_vl"), data_branch="a")
    assert done.returncode == 0, done.stderr[-3000:]
    return dest


def _cli(dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hooks.check", str(dest)], cwd=dest, env=env_with_hooks(),
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.tier2
def test_a_freshly_migrated_model_passes_the_check(migrated: Path) -> None:
    done = _cli(migrated)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": error:" not in done.stdout and "0 errors" in done.stdout.splitlines()[-1]


@pytest.mark.tier2
def test_an_edited_model_fails_the_check_naming_each_problem(migrated: Path, tmp_path: Path) -> None:
    """Recompute under parallel (moved), collate_param.model_name (deprecated), a template the checkout lacks and a
    conflict in the launch script: each reported with its fix, exit 1."""
    dest = tmp_path / "MindSpeed-MM"
    shutil.copytree(migrated, dest, symlinks=True)
    config = dest / "examples/qv/qv_config.yaml"
    cfg = yaml.safe_load(config.read_text())
    cfg["parallel"]["recompute"] = cfg["features"].pop("recompute")
    cfg["data"]["dataloader_param"]["collate_param"]["model_name"] = "qwen3vl"
    cfg["data"]["dataset_param"]["basic_parameters"]["template"] = "qwen9_vl"
    config.write_text(yaml.safe_dump(cfg))
    script = dest / "examples/qv/finetune_qv.sh"
    lines = script.read_text().splitlines(keepends=True)
    lines[4:5] = ["<<<<<<< before updating\n", lines[4], "=======\n", "export NON_MEGATRON=1\n",
                  ">>>>>>> after updating\n"]
    script.write_text("".join(lines))

    done = _cli(dest)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert ("qv: error: parallel.recompute has moved: this MindSpeed-MM reads recompute from features: recompute "
            "stays off — fix: move it to features.recompute") in out
    assert ("qv: warning: data.dataloader_param.collate_param.model_name is deprecated in this MindSpeed-MM — fix: "
            "delete it: collator_id is set") in out
    assert "qv: error: chat template 'qwen9_vl' is not registered" in out and "qwen2vl" in out
    assert "qv: error: examples/qv/finetune_qv.sh:5 has merge-conflict markers" in out
    assert out.count(": error:") == 3, out


def test_smoke_verdicts_become_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``--smoke`` runs ``python -m hooks.smoke <answers> --no-report`` in the checkout; a failure is an error
    carrying the smoke's verdict, hint and log, and a model with errors already is not smoked."""
    dest = _fake_checkout(tmp_path)
    calls = []
    real_run = subprocess.run

    monkeypatch.setenv("MSMM_CACHE", str(tmp_path / "cache"))

    def fake_run(command, **kwargs):  # a test double of the smoke: the record a failed run leaves
        if "hooks.smoke" not in command:
            return real_run(command, **kwargs)  # git, for the checkout's revision
        calls.append((command, kwargs["cwd"]))
        record = result_file(work_dir("m"))
        record.parent.mkdir(parents=True, exist_ok=True)
        SmokeRecord(passed=False, mode="contract", log="/tmp/x.log", hint="read the first traceback in the full log",
                    summary="smoke[contract] FAIL: 1/5 iterations, loss 8.0000 (only 1 of 5 iterations logged)"
                    ).write(record)
        return subprocess.CompletedProcess(command, 1, "", "")

    monkeypatch.setattr(leftovers.subprocess, "run", fake_run)
    assert check.main([str(dest), "--smoke"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert calls == [([sys.executable, "-m", "hooks.smoke", ".copier-answers/m.yml", "--dest", str(dest),
                       "--no-report"], dest)]
    assert lines[0] == ("m: error: smoke failed: smoke[contract] FAIL: 1/5 iterations, loss 8.0000 (only 1 of 5 "
                        "iterations logged) (full log: /tmp/x.log) — fix: read the first traceback in the full log")
    (dest / "examples/m/finetune_m.sh").write_text("<<<<<<< a\n=======\n>>>>>>> b\n")
    assert check.main([str(dest), "--smoke"]) == 1 and len(calls) == 1
    assert "m: info: smoke not run: fix the errors above first" in capsys.readouterr().out


@pytest.mark.tier2
def test_the_smoke_of_a_sound_model_passes(migrated: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "hooks.check", "--smoke", str(migrated)], cwd=tmp_path,
                          env=env_with_hooks(), capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "qv: info: smoke passed: smoke[" in done.stdout

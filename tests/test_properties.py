"""Generated inputs, not a list (issue 40, deliverable 7): for every data set, model folder, path and destination
hypothesis draws, either the copy trains with every medium in the data reaching the trainer, or it stops before
anything is written with a message that names a copier question's field.

The oracle is the project's and the framework's own code, never a re-statement of what we expect:

- *stops*: the exact checks copier's validators run for each answer (``hooks.render.copier_ext``: ``data_json``,
  ``media_root``; ``hooks.render.validators.model_dir_error`` and the probe for ``model_path``), called in-process;
  the message must start with ``<field>: `` and the input folders must be byte-for-byte as they were. A few
  examples go through copier's real CLI into a git checkout, whose ``git status`` must not change.
- *trains*: for data the validators accept, the YAML's ``data`` section rendered by the copy's own partial
  (``partials/config.yaml.jinja``) is handed to MindSpeed-MM's own ``build_mm_dataset`` (its ``load_dataset``,
  converter, ``mm_plugin`` placeholder check, the model's processor) in one worker process for the whole run
  (``tests/property_worker.py``): every record must come out as a row, with each of its images, videos and
  audios as files the trainer opens, and trained labels. For model folders the validators accept, the weights
  must load into the model its config builds with nothing missing, unexpected or mismatched (transformers'
  ``from_pretrained``, as the smoke loads them).

Classes of input (``CLASSES``) are enabled one by one: those whose checks are on this branch run in CI
(``ENABLED``); ``MSMM_PROPERTY_CLASSES=all`` (or a comma list) runs others, e.g. after the branches that add their
checks are merged. CI runs ``CI_EXAMPLES`` examples with a fixed seed (``derandomize``); ``--full-matrix`` runs
``FULL_EXAMPLES``. Every failure found becomes an ``@example`` (or a plain test) below, named after its class.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.property_inputs import (
    FOLDER_DEFECTS,
    KINDS,
    RECORD_FAULTS,
    DataSpec,
    FolderSpec,
    RecordSpec,
    data_specs,
    folder_specs,
    write_data,
    write_folder,
)

CI_EXAMPLES, FULL_EXAMPLES = 200, 1000

# Every class of input the generators draw, and what it covers. The "stop" side of each is the validators'; the
# "trains" side the framework's (see the module docstring).
CLASSES = {
    **{f"media:{kind}": f"records with {kind}s (1 or 2 per record), beside records with other media or none, in one "
                        "data set (JSON or JSONL, 1-5 records, system turns, multi-turn, unicode and whitespace in "
                        "text and file names)" for kind in KINDS},
    "media:untaken": "records with a medium the model does not take (audio on an image model)",
    **{f"record:{fault}": f"records with the '{fault}' fault now and then (tests.property_inputs.RECORD_FAULTS)"
       for fault in RECORD_FAULTS},
    "paths:tilde": "data_json and media_root answered as ~/...",
    "paths:relative": "data_json and media_root answered relative to the directory copier runs in",
    "model_folder": f"tiny model folders with one defect of {', '.join(FOLDER_DEFECTS[1:])}",
}
# The classes whose checks this branch has (CI runs them). The others are found failing here and are enabled as
# the branches that add their checks are merged (see FOUND and docs/tests.md).
ENABLED = frozenset({"media:image", "media:audio", "media:untaken", "record:placeholder_count", "record:media_file"})

DATA_ARCHS = {"qwen2_5_vl": ("image", "video"), "qwen2_5_omni": ("image", "video", "audio")}  # arch -> media taken
FOLDER_ARCHS = ("qwen2_5_vl",)
FIELD = re.compile(r"^(model_path|trust_remote_code|python|data_branch|data_json|media_root|data_fields|model_id): \S")


def enabled_classes() -> frozenset[str]:
    chosen = os.environ.get("MSMM_PROPERTY_CLASSES", "").strip()
    if chosen == "all":
        return frozenset(CLASSES)
    return frozenset(c.strip() for c in chosen.split(",") if c.strip()) if chosen else ENABLED


def _budget(config: pytest.Config | None = None) -> int:
    full = "--full-matrix" in sys.argv or os.environ.get("MSMM_PROPERTY_FULL") == "1"
    return int(os.environ.get("MSMM_PROPERTY_EXAMPLES") or (FULL_EXAMPLES if full else CI_EXAMPLES))


PROFILE = settings(max_examples=_budget(), derandomize=True, deadline=None, database=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture],
                   phases=[Phase.explicit, Phase.generate, Phase.shrink])
TALLY: dict[str, dict[str, float]] = {}  # test -> outcome (or "s: <step>") -> count (seconds): the run's summary


def _count(test: str, outcome: str, amount: float = 1) -> None:
    TALLY.setdefault(test, {}).setdefault(outcome, 0)
    TALLY[test][outcome] += amount


@contextmanager
def _timed(test: str, step: str):
    started = time.monotonic()
    try:
        yield
    finally:
        _count(test, f"s: {step}", time.monotonic() - started)


@pytest.fixture(scope="module", autouse=True)
def _summary():
    started = time.monotonic()
    yield
    for test, outcomes in TALLY.items():
        examples = sum(v for k, v in outcomes.items() if not k.startswith("s: "))
        print(f"\nproperties: {test}: {examples:.0f} examples in {time.monotonic() - started:.0f} s: "
              + ", ".join(f"{k} {v:.0f}" for k, v in sorted(outcomes.items())), file=sys.stderr)


# --- the framework's worker ------------------------------------------------------------------------------------


class FrameworkWorker:
    """``tests/property_worker.py`` in the trainer's environment, one process for the whole module."""

    def __init__(self, mm_home: Path, checkout: Path, home: Path) -> None:
        from hooks import env_with_hooks
        from hooks.framework.environment import detect_device, framework_env

        ms_home = os.environ.get("MINDSPEED_HOME")
        env = env_with_hooks(framework_env(mm_home, Path(ms_home) if ms_home else None,
                                           cpu_bridges=detect_device() == "cpu"))
        env["HOME"] = str(home)  # the same home the answers' ~ means
        for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE"):
            env.pop(key, None)
        self.checkout = checkout
        self.process = subprocess.Popen([sys.executable, "-m", "tests.property_worker"], cwd=str(checkout), env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True)

    def build(self, config: dict[str, Any], scratch: Path) -> dict[str, Any]:
        """The framework's dataset for the YAML ``config``'s data section and data plugins (the model's is not data)."""
        from tests.property_worker import DONE_MARK

        out = scratch / "answer.json"
        plugins = [p for p in config["training"]["plugin"] if "/fsdp/models/" not in p]
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"dataset_param": config["data"]["dataset_param"], "plugins": plugins, "out": str(out)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.strip() == DONE_MARK:
                return json.loads(out.read_text(encoding="utf-8"))
        raise RuntimeError(f"the framework worker ended (exit {self.process.wait()})")

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A home for ``~`` answers, the directory copier runs in, and the checkout the trainer runs in (apart)."""
    base = tmp_path_factory.mktemp("properties")
    found = {name: base / name for name in ("home", "cwd", "checkout")}
    for path in found.values():
        path.mkdir()
    return found


@pytest.fixture(scope="module")
def worker(mm_home: Path, places: dict[str, Path]):
    started = FrameworkWorker(mm_home, places["checkout"], places["home"])
    yield started
    started.close()


@pytest.fixture(scope="module")
def data_models(tiny_models) -> dict[str, tuple[Path, dict[str, Any], Any]]:
    """arch -> (tiny model folder, its probed facts, the data stage's recommendation)."""
    from hooks.data.candidates import recommend
    from hooks.model.facts import ModelFacts
    from hooks.probe import probe

    found = {}
    for arch in sorted(DATA_ARCHS):
        folder = tiny_models(arch)
        facts = json.loads(probe(folder).to_json(with_timings=False))
        found[arch] = folder, facts, recommend(ModelFacts.from_dict(facts), None)
    return found


# --- the copy's own checks and render --------------------------------------------------------------------------


@contextmanager
def _answering_from(home: Path, cwd: Path):
    """Validators run where copier runs: ``~`` is ``home``, relative paths start at ``cwd``."""
    old_home, old_cwd = os.environ.get("HOME"), Path.cwd()
    os.environ["HOME"] = str(home)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(old_cwd)
        if old_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = old_home


def data_answer_error(data_json: str, media_root: str, facts: dict[str, Any]) -> str:
    """What copier's ``data_json`` then ``media_root`` validators say (branch a), in question order; the lengths
    check (a subprocess of the training interpreter) is left to tests/test_preflight.py: no drawn text is long."""
    from hooks.render.copier_ext import media_root_error
    from hooks.render.validators import data_json_error

    return (data_json_error(data_json, "a")
            or media_root_error(data_json, media_root, "a", "", sys.executable, False, facts))


def rendered_config(model_dir: Path, facts: dict[str, Any], choice: Any, data_json: str, media_root: str,
                           mm_home: Path, scratch: Path) -> dict[str, Any]:
    """The YAML the copy would write: the copy's own partial, as ``hooks.render.evidence`` renders
    it, with the answers as given. Only where the datasets cache goes and its worker count are set here (a fresh
    cache per example: the framework would otherwise reuse an earlier example's conversion)."""
    import yaml

    from hooks.framework import checkout
    from hooks.render.files import render_template_file

    context = {"model_id": "prop", "model_facts": facts, "model_path": str(model_dir), "trust_remote_code": False,
               "data_branch": choice.branch, "chat_template": choice.template, "collator_id": choice.collator_id,
               "data_json": data_json, "media_root": media_root, "framework": checkout.facts(mm_home)}
    config = yaml.safe_load(render_template_file("partials/config.yaml.jinja", context))
    basic = config["data"]["dataset_param"]["basic_parameters"]
    basic.update(cache_dir=str(scratch / "cache"), preprocessing_num_workers=None)
    return config


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(root.rglob("*"))}


# --- data sets -------------------------------------------------------------------------------------------------


@st.composite
def data_cases(draw: st.DrawFn, classes: frozenset[str]) -> tuple[str, DataSpec]:
    """(arch, data set) with the enabled ``classes``: the media the model takes (and, with ``media:untaken``, now
    and then all three), the enabled record faults, the enabled path styles."""
    faults = frozenset(f for f in RECORD_FAULTS if f"record:{f}" in classes)
    styles = ("absolute", *(s for s in ("tilde", "relative") if f"paths:{s}" in classes))
    arch = draw(st.sampled_from(sorted(DATA_ARCHS)))
    kinds = tuple(k for k in DATA_ARCHS[arch] if f"media:{k}" in classes)
    if "media:untaken" in classes and draw(st.sampled_from([False] * 4 + [True])):
        kinds = tuple(k for k in KINDS if k in kinds or k not in DATA_ARCHS[arch])
    return arch, draw(data_specs(kinds=kinds, faults=faults, path_styles=styles))


def check_data_set(arch: str, spec: DataSpec, data_models, worker: FrameworkWorker, places: dict[str, Path],
                   mm_home: Path) -> str:
    """The property for one data set: "stopped" or "trained"; an AssertionError says how it broke."""
    model_dir, facts, choice = data_models[arch]
    if os.environ.get("MSMM_PROPERTY_COLLECT"):  # exploring: every failure written down, none raised
        try:
            return _check_data_set(arch, spec, model_dir, facts, choice, worker, places, mm_home)
        except AssertionError as err:
            with open(os.environ["MSMM_PROPERTY_COLLECT"], "a", encoding="utf-8") as out:
                out.write(json.dumps({"arch": arch, "spec": repr(spec), "failure": str(err).splitlines()[0]}) + "\n")
            return "failed"
    return _check_data_set(arch, spec, model_dir, facts, choice, worker, places, mm_home)


def _check_data_set(arch: str, spec: DataSpec, model_dir: Path, facts: dict[str, Any], choice: Any,
                    worker: FrameworkWorker, places: dict[str, Path], mm_home: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="prop-data-", dir=places["home"]) as tmp:
        root = Path(tmp) / "in"
        with _timed("data sets", "write"):
            written = write_data(spec, root, home=places["home"], cwd=places["cwd"])
        before = _tree(root)
        with _answering_from(places["home"], places["cwd"]), _timed("data sets", "validators"):
            message = data_answer_error(written.data_json, written.media_root, facts)
        assert _tree(root) == before, "a validator changed the user's files"
        if message:
            assert FIELD.match(message), f"the message does not start with a field: {message!r}"
            assert "\n" not in message.strip(), f"the message is not one line: {message!r}"
            return "stopped " + message.split(" ", 1)[0]
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        config = rendered_config(model_dir, facts, choice, written.data_json, written.media_root, mm_home, scratch)
        with _timed("data sets", "framework"):
            built = worker.build(config, scratch)
        assert "error" not in built, (f"accepted by the validators, but MindSpeed-MM's dataset builder on the "
                                      f"copy's YAML raised {built.get('error')}\n" + "\n".join(built.get("trace", [])))
        rows = built["rows"]
        assert len(rows) == len(spec.records), (f"accepted by the validators, but the framework kept {len(rows)} of "
                                                f"{len(spec.records)} records (it dropped the others)")
        for index, (record, row) in enumerate(zip(spec.records, rows, strict=True)):
            for kind, count in dict(record.media).items():
                given = row[f"{kind}s"]
                assert len(given) == count, (f"record {index + 1}: {count} {kind}(s) in the data, {len(given)} reach "
                                             f"the trainer (the YAML does not map the column?)")
                for name in given:
                    target = name if os.path.isabs(name) else places["checkout"] / name
                    assert os.path.isfile(target), f"record {index + 1}: the trainer is given {name}, not a file"
        assert any(row["trained"] for row in rows), "no record has a trained label"
        return "trained"


# The failures this test found, each kept as an explicit example (named after its class); see the report in
# docs/tests.md. They run first on every run.
@pytest.mark.tier2
@PROFILE
@given(case=data_cases(enabled_classes()))
def test_data_sets_train_or_stop_before_writing(case: tuple[str, DataSpec], data_models, worker, places,
                                               mm_home) -> None:
    arch, spec = case
    outcome = check_data_set(arch, spec, data_models, worker, places, mm_home)
    _count("data sets", f"{arch} {outcome}")


# --- model folders ---------------------------------------------------------------------------------------------


def folder_answer_error(model_dir: Path) -> str:
    """What copier's ``model_path`` validator, then its ``python`` validator (the probe, in the training
    interpreter), say: ``hooks.render.copier_ext``'s own functions."""
    from hooks.render.copier_ext import probe_error
    from hooks.render.validators import model_dir_error

    try:
        return model_dir_error(str(model_dir)) or probe_error(str(model_dir), sys.executable, False)
    except SystemExit as stop:  # how copier's consent check stops an unattended copy (a yes/no is never re-asked)
        return str(stop.code).removeprefix("error: ")


def load_problem(model_dir: Path) -> str:
    """What transformers' ``from_pretrained`` makes of the folder: "" when every weight loads into the model its
    config builds, else what is missing, unexpected or mismatched, or the error it raised."""
    from hooks.model.loading import load_config_and_class

    try:
        config, cls, _ = load_config_and_class(model_dir, trust_remote_code=False)
        _, info = cls.from_pretrained(str(model_dir), config=config, output_loading_info=True)
    except Exception as err:  # noqa: BLE001 - the loader's error is the finding
        return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
    wrong = {k: v for k, v in info.items() if v and k != "error_msgs"} | (
        {"error_msgs": info["error_msgs"]} if info.get("error_msgs") else {})
    return json.dumps(wrong, default=str)[:600] if wrong else ""


@pytest.mark.skipif("model_folder" not in enabled_classes(),
                    reason="model-folder consistency checks are w-folder's (issue 40, deliverable 4); "
                           "MSMM_PROPERTY_CLASSES=model_folder runs them")
@settings(PROFILE, max_examples=max(8, _budget() // 10))
@given(spec=folder_specs(FOLDER_ARCHS))
def test_model_folders_load_or_stop_before_writing(spec: FolderSpec, tiny_models) -> None:
    with tempfile.TemporaryDirectory(prefix="prop-folder-") as tmp:
        folder = write_folder(spec, tiny_models(spec.arch), Path(tmp) / "model")
        before = _tree(folder)
        message = folder_answer_error(folder)
        assert _tree(folder) == before, "a validator changed the model folder"
        if message:
            assert FIELD.match(message), f"the message does not start with a field: {message!r}"
            _count("model folders", f"{spec.defect} stopped")
            return
        problem = load_problem(folder)
        assert not problem, f"accepted by the validators, but its weights do not load into its model: {problem}"
        _count("model folders", f"{spec.defect} loads")


def test_classes_are_known() -> None:
    """Every enabled class is one the generators draw (a misspelt class would silently generate nothing)."""
    assert ENABLED <= set(CLASSES)
    assert enabled_classes() <= set(CLASSES), f"unknown classes in MSMM_PROPERTY_CLASSES: {enabled_classes()}"


__all__ = ["RecordSpec", "example"]  # re-exported for the regression examples' readers

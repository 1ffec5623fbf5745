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
``FULL_EXAMPLES``. Every failure found is kept as a named case (``FOUND``, ``FOUND_FOLDERS``, an ``@example``),
skipped, with the name of the branch that owns its check, until its class is enabled.
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
from dataclasses import replace
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
    "record:count": "1-5 records against the sampler of the smoke (2 ranks) and of the YAML on the default cluster "
                    "(8 ranks): each rank must get a batch",
    "paths:tilde": "data_json and media_root answered as ~/...",
    "paths:relative": "data_json and media_root answered relative to the directory copier runs in",
    "model_folder": f"tiny model folders with one defect of {', '.join(FOLDER_DEFECTS[1:])}",
    "destination": "a copy into a sub-folder of a MindSpeed-MM checkout, or into a checkout with the user's own "
                   "file at a path the copy writes (copier's CLI)",
}
# The classes CI runs: all of them (each was found failing first, and enabled once its check was in; see FOUND).
ENABLED = frozenset(CLASSES)

DATA_ARCHS = {"qwen2_5_vl": ("image", "video"), "qwen2_5_omni": ("image", "video", "audio")}  # arch -> media taken
FOLDER_ARCHS = ("qwen2_5_vl",)
FOLDER_FIELD = re.compile(r"^(model_path|trust_remote_code): \S")
FIELD = re.compile(r"^(model_path|trust_remote_code|python|data_branch|data_json|media_root|data_fields|model_id|"
                   r"destination): \S")


def enabled_classes() -> frozenset[str]:
    chosen = os.environ.get("MSMM_PROPERTY_CLASSES", "").strip()
    if chosen == "all":
        return frozenset(CLASSES)
    return frozenset(c.strip() for c in chosen.split(",") if c.strip()) if chosen else ENABLED


def _budget() -> int:
    """Examples per property: CI's, ``--full-matrix``'s (read off the command line: settings are made at import), or
    ``MSMM_PROPERTY_EXAMPLES``."""
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
        print(f"\nproperties: {test}: {examples:.0f} examples (module {time.monotonic() - started:.0f} s): "
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

    def build(self, config: dict[str, Any], scratch: Path, devices: int = 8) -> dict[str, Any]:
        """The framework's dataset for the YAML ``config``'s data section and data plugins (the model's is not data),
        sampled for the smoke's ranks and ``devices`` ranks."""
        from tests.property_worker import DONE_MARK

        out = scratch / "answer.json"
        plugins = [p for p in config["training"]["plugin"] if "/fsdp/models/" not in p]
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"dataset_param": config["data"]["dataset_param"], "plugins": plugins, "out": str(out),
                   "layouts": layouts(config, devices)}
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


SMOKE_LAYOUT = (2, 1)  # the smoke's ranks on CPU and its micro batch (hooks.smoke.run, hooks.smoke.smoke_config)
DEFAULT_DEVICES = 8  # copier.yml's devices_per_node default, one node: the YAML's data-parallel ranks


def layouts(config: dict[str, Any], devices: int = DEFAULT_DEVICES) -> list[list[int]]:
    """The (ranks, micro batch) layouts the copy runs the data on: the smoke's, and the YAML's on the answered
    cluster (``devices`` ranks, its ``training.micro_batch_size``)."""
    return [list(SMOKE_LAYOUT), [devices, int(config.get("training", {}).get("micro_batch_size") or 1)]]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A home for ``~`` answers, the directory copier runs in, and the checkout the trainer runs in (apart)."""
    base = tmp_path_factory.mktemp("properties")
    # the checkout one level deeper than copier's directory: a path relative to one is not the same file from the other
    found = {"home": base / "home", "cwd": base / "cwd", "checkout": base / "repos" / "MindSpeed-MM"}
    for path in found.values():
        path.mkdir(parents=True)
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


def data_answer_error(data_json: str, media_root: str, facts: dict[str, Any], devices: int = DEFAULT_DEVICES) -> str:
    """What copier's ``data_json``, ``media_root`` and ``nodes`` (the records for the default cluster) validators
    say (branch a), in question order; the lengths
    check (a subprocess of the training interpreter) is left to tests/test_preflight.py: no drawn text is long."""
    from hooks.render.copier_ext import cluster_records_error, media_root_error
    from hooks.render.validators import data_json_error

    return (data_json_error(data_json, "a")
            or media_root_error(data_json, media_root, "a", "", sys.executable, False, facts)
            or cluster_records_error(data_json, devices, 1))


def rendered_config(model_dir: Path, facts: dict[str, Any], choice: Any, data_json: str, media_root: str,
                    mm_home: Path, scratch: Path) -> dict[str, Any]:
    """The YAML the copy would write: the copy's own partial, as ``hooks.render.evidence`` renders it, with the
    answers as given and the checkout's framework facts. Only where the datasets cache goes and its worker count
    are set here (a fresh cache per example: the framework would otherwise reuse an earlier example's conversion)."""
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
    # a clean data set half the time, else one enabled fault class (drawn now and then per record): with every class
    # on at once nearly every set would have some fault, and the "trains" side of the property would go untested
    enabled = sorted(f for f in RECORD_FAULTS if f"record:{f}" in classes)
    fault = draw(st.sampled_from([None] * max(1, len(enabled)) + enabled))
    faults = frozenset([fault] if fault else [])
    styles = ("absolute", *(s for s in ("tilde", "relative") if f"paths:{s}" in classes))
    arch = draw(st.sampled_from(sorted(DATA_ARCHS)))
    kinds = tuple(k for k in DATA_ARCHS[arch] if f"media:{k}" in classes)
    if "media:untaken" in classes and draw(st.sampled_from([False] * 4 + [True])):
        kinds = tuple(k for k in KINDS if k in kinds or k not in DATA_ARCHS[arch])
    most = 10 if "record:count" in classes else 5  # past the default cluster's 8 ranks when counts are judged
    spec = draw(data_specs(kinds=kinds, faults=faults, path_styles=styles, max_records=most))
    # the cluster answered: with record:count any of these (8 is copier's default), else one device, so that no
    # data set stops for its count alone
    devices = draw(st.sampled_from((1, 2, DEFAULT_DEVICES))) if "record:count" in classes else 1
    return arch, replace(spec, devices_per_node=devices)


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
            message = data_answer_error(written.data_json, written.media_root, facts, spec.devices_per_node)
        assert _tree(root) == before, "a validator changed the user's files"
        if message:
            assert FIELD.match(message), f"the message does not start with a field: {message!r}"
            assert "\n" not in message.strip(), f"the message is not one line: {message!r}"
            return "stopped " + message.split(" ", 1)[0]
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        with _answering_from(places["home"], places["cwd"]):  # copier renders where it runs, too
            config = rendered_config(model_dir, facts, choice, written.data_json, written.media_root, mm_home,
                                     scratch)
        with _timed("data sets", "framework"):
            built = worker.build(config, scratch, spec.devices_per_node)
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
        if "record:count" in enabled_classes():  # counts the sampler cannot batch
            for layout in built["samplers"]:
                where = f"{len(rows)} records on {layout['ranks']} ranks, micro batch {layout['micro_batch']}"
                assert "error" not in layout, f"{where}: MindSpeed-MM's sampler raised {layout['error']}"
                assert min(layout["batches"]) > 0, f"{where}: a rank gets no batch"
        return "trained"


@pytest.mark.tier2
@PROFILE
@given(case=data_cases(enabled_classes()))
def test_data_sets_train_or_stop_before_writing(case: tuple[str, DataSpec], data_models, worker, places,
                                               mm_home) -> None:
    arch, spec = case
    outcome = check_data_set(arch, spec, data_models, worker, places, mm_home)
    _count("data sets", f"{arch} {outcome}")


def _one(**fields: Any) -> RecordSpec:
    return RecordSpec(**fields)


# Every failure this test found, kept as a named regression case: (its class, the check that now holds it (issue
# 40: the YAML's media columns, the record shapes, the paths written resolved), arch, the data set, what happened
# before that check). A case runs when its class is enabled.
FOUND: dict[str, tuple[str, str, str, DataSpec, str]] = {
    "video records, videos column not mapped": (
        "media:video", "columns", "qwen2_5_vl", DataSpec((_one(media=(("video", 1),)),)),
        "accepted; MindSpeed-MM raises 'The number of videos does not match the number of <video> tokens' (the "
        "YAML leaves '# videos: videos' commented out)"),
    "text-only records without an images column": (
        "record:absent_columns", "columns", "qwen2_5_omni", DataSpec((_one(empty_columns=False),)),
        "accepted; MindSpeed-MM raises KeyError: 'images' (the YAML always maps images: images)"),
    "audio-only records without an images column": (
        "record:absent_columns", "columns", "qwen2_5_omni", DataSpec((_one(media=(("audio", 1),),
                                                                             empty_columns=False),)),
        "accepted; MindSpeed-MM raises KeyError: 'images'"),
    "media given as objects": (
        "record:media_form", "shapes", "qwen2_5_vl", DataSpec((_one(media=(("image", 1),), media_form="object"),)),
        "accepted (the media check skips non-strings); MindSpeed-MM raises TypeError: join() argument must be str, "
        "bytes, or os.PathLike object, not 'dict'"),
    "media given as URLs": (
        "record:media_form", "shapes", "qwen2_5_vl", DataSpec((_one(media=(("image", 1),), media_form="url"),)),
        "accepted (the media check skips '://'); MindSpeed-MM raises FileNotFoundError: No such file or directory: "
        "'https://...'"),
    "content as typed parts": (
        "record:record_shape", "shapes", "qwen2_5_vl", DataSpec((_one(), _one(shape="typed"))),
        "accepted; MindSpeed-MM's converter raises AttributeError: 'list' object has no attribute 'strip' (with an "
        "image the record stops instead: its placeholders are counted in string contents only)"),
    "roles in capitals": (
        "record:roles", "shapes", "qwen2_5_vl", DataSpec((_one(roles=("USER", "ASSISTANT")),)),
        "accepted; MindSpeed-MM's converter drops the record (role tags user/assistant only): 0 of 1 records train"),
    "the model role (user/model)": (
        "record:roles", "shapes", "qwen2_5_vl",
        DataSpec((_one(), _one(media=(("image", 1),), roles=("user", "model")))),
        "accepted; the converter drops the record with its image: 1 of 2 records train, the image never does"),
    "sharegpt roles (human/gpt) in messages": (
        "record:roles", "shapes", "qwen2_5_vl", DataSpec((_one(), _one(roles=("human", "gpt")))),
        "accepted; the converter drops the record: 1 of 2 records train"),
    "a conversation that starts with the assistant": (
        "record:order", "shapes", "qwen2_5_vl", DataSpec((_one(), _one(media=(("image", 1),), assistant_first=True))),
        "accepted; the converter drops the record with its image (odd turns must be the user's): 1 of 2 train"),
    "one record": (
        "record:count", "shapes", "qwen2_5_vl", DataSpec((_one(media=(("image", 1),)),)),
        "accepted; MindSpeed-MM's BaseRandomBatchSampler on the smoke's 2 ranks raises ZeroDivisionError"),
    "fewer records than the default cluster's ranks": (
        "record:count", "shapes", "qwen2_5_vl", DataSpec((_one(media=(("image", 1),)),) * 4),
        "accepted; on the YAML's 8 ranks (devices_per_node default) the sampler raises ZeroDivisionError"),
    "data_json and media_root as ~/...": (
        "paths:tilde", "paths", "qwen2_5_vl", DataSpec((_one(media=(("image", 1),)),), path_style="tilde"),
        "accepted (checked expanded); the YAML gets them literally and MindSpeed-MM's load_dataset raises "
        "FileNotFoundError: Unable to find '~/...'"),
    "data_json and media_root relative to where copier runs": (
        "paths:relative", "paths", "qwen2_5_vl", DataSpec((_one(media=(("image", 1),)),), path_style="relative"),
        "accepted (checked from copier's directory); the trainer runs in the checkout and does not find them"),
}


def _found_cases() -> list[Any]:
    classes = enabled_classes()
    return [pytest.param(name, marks=() if FOUND[name][0] in classes else pytest.mark.skip(
        reason=f"class {FOUND[name][0]} is not enabled ({FOUND[name][1]}; MSMM_PROPERTY_CLASSES)"))
        for name in sorted(FOUND)]


@pytest.mark.tier2
@pytest.mark.parametrize("name", _found_cases())
def test_found_failure_trains_or_stops(name: str, data_models, worker, places, mm_home) -> None:
    """A failure the generators found, as its smallest data set: it trains or stops naming a field. Repeated to
    eight records or more (the default cluster's ranks) unless the count is the case, so that a count check stops
    none of them for its count alone."""

    group, _, arch, spec, _ = FOUND[name]
    if group != "record:count":
        spec = replace(spec, records=spec.records * -(-DEFAULT_DEVICES // len(spec.records)))
    check_data_set(arch, spec, data_models, worker, places, mm_home)


# --- accepted data through a real copy and the smoke ----------------------------------------------------------

SMOKE_EXAMPLES = int(os.environ.get("MSMM_PROPERTY_SMOKES") or (3 if _budget() > CI_EXAMPLES else 1))


@st.composite
def smoke_cases(draw: st.DrawFn) -> tuple[str, DataSpec]:
    """(arch, data set) drawn from the enabled media classes without faults, 4 to 6 records (the smoke's two ranks
    each take some), at least one medium."""

    classes = enabled_classes()
    arch = draw(st.sampled_from(sorted(DATA_ARCHS)))
    kinds = tuple(k for k in DATA_ARCHS[arch] if f"media:{k}" in classes) or ("image",)
    spec = draw(data_specs(kinds=kinds))
    wanted = max(0, 4 - len(spec.records))
    more = draw(st.lists(st.sampled_from(spec.records), min_size=wanted, max_size=wanted + 2))
    records = (*spec.records, *more)
    if not any(r.media for r in records):
        records = (replace(records[0], media=((kinds[0], 1),)), *records[1:])
    return arch, replace(spec, records=records, media_root="given", path_style="absolute")


@pytest.mark.tier2
@pytest.mark.full_matrix
@settings(PROFILE, max_examples=SMOKE_EXAMPLES, phases=[Phase.explicit, Phase.generate])
@given(case=smoke_cases())
def test_accepted_data_trains_through_a_copy(case: tuple[str, DataSpec], tiny_models, mm_home: Path,
                                             template_src: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Data the validators accept, copied into a real checkout: the smoke passes through the real trainer and the
    media proof shows each medium in the data reaching forward (``hooks.smoke.media_proof``)."""
    from tests.copier_run import copy, mm_checkout

    arch, spec = case
    base = tmp_path_factory.mktemp("prop-smoke")
    written = write_data(spec, base / "data")
    checkout = mm_checkout(mm_home, base / "mm")
    done = copy(checkout, skip_tasks=False, template=template_src, model_id="prop_smoke",
                model_path=tiny_models(arch), data_json=written.data_json, media_root=written.media_root,
                devices_per_node=2)
    tail = done.stdout[-4000:] + done.stderr[-3000:]
    print(*(line for line in done.stdout.splitlines() if "smoke[" in line or "reached forward" in line), sep="\n")
    assert done.returncode == 0, tail
    assert "smoke[framework] PASS" in done.stdout, tail
    for kind in sorted(spec.kinds()):
        assert f"verified: {kind} reached forward (" in done.stdout, f"{kind}: no proof it reached forward\n{tail}"
    _count("copy + smoke", f"{arch} {'+'.join(sorted(spec.kinds()))} trained")


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
    from hooks.compat import ensure_torchvision
    from hooks.model.loading import load_config_and_class

    ensure_torchvision()  # as the probe and the smoke do before transformers imports a vision model
    try:
        config, cls, _ = load_config_and_class(model_dir, trust_remote_code=False)
        _, info = cls.from_pretrained(str(model_dir), config=config, output_loading_info=True)
    except Exception as err:  # noqa: BLE001 - the loader's error is the finding
        return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
    wrong = {k: v for k, v in info.items() if v and k != "error_msgs"} | (
        {"error_msgs": info["error_msgs"]} if info.get("error_msgs") else {})
    return json.dumps(wrong, default=str)[:600] if wrong else ""


def check_folder(spec: FolderSpec, tiny_models) -> str:
    """The property for one model folder: "stopped" or "loads"; an AssertionError says how it broke."""
    with tempfile.TemporaryDirectory(prefix="prop-folder-") as tmp:
        folder = write_folder(spec, tiny_models(spec.arch), Path(tmp) / "model")
        before = _tree(folder)
        message = folder_answer_error(folder)
        assert _tree(folder) == before, "a validator changed the model folder"
        if message:  # the folder is what is wrong: the message names model_path (or the consent its code needs)
            assert FOLDER_FIELD.match(message), f"the message does not name model_path: {message!r}"
            return "stopped"
        problem = load_problem(folder)
        assert not problem, f"accepted by the validators, but its weights do not load into its model: {problem}"
        return "loads"


FOLDERS_OFF = pytest.mark.skipif("model_folder" not in enabled_classes(),
                                 reason="model-folder consistency (issue 40, deliverable 4): "
                                        "MSMM_PROPERTY_CLASSES=model_folder runs them")


@FOLDERS_OFF
@settings(PROFILE, max_examples=max(8, _budget() // 20))
@given(spec=folder_specs(FOLDER_ARCHS))
def test_model_folders_load_or_stop_before_writing(spec: FolderSpec, tiny_models) -> None:
    _count("model folders", f"{spec.defect} {check_folder(spec, tiny_models)}")


# The model-folder failures found (issue 40, deliverable 4): name -> (defect, tensor pick, what happened here).
FOUND_FOLDERS: dict[str, tuple[str, int, str]] = {
    "a tensor missing from the weights": (
        "drop_tensor", 0, "accepted; from_pretrained newly initialises lm_head.weight (random weights trained)"),
    "a tensor renamed in the weights": (
        "rename_tensor", 7, "accepted; from_pretrained: missing ...k_proj.bias, unexpected ...renamed_layers..."),
    "a tensor of the wrong shape": (
        "reshape_tensor", 7, "accepted; from_pretrained raises a size mismatch (in the smoke, after the files)"),
    "config with one layer more than the weights": (
        "config_layers", 0, "accepted; from_pretrained newly initialises every weight of the extra layer"),
}


@FOLDERS_OFF
@pytest.mark.parametrize("name", sorted(FOUND_FOLDERS))
def test_found_folder_failure_loads_or_stops(name: str, tiny_models) -> None:
    defect, pick, _ = FOUND_FOLDERS[name]
    check_folder(FolderSpec(FOLDER_ARCHS[0], defect, pick), tiny_models)


# --- through copier's real CLI --------------------------------------------------------------------------------

CLI_EXAMPLES = 2 if _budget() <= CI_EXAMPLES else 8
CLI_ARCH = "qwen2_5_vl"


def _status(dest: Path) -> str:
    return subprocess.run(["git", "-C", str(dest), "status", "--porcelain", "--ignored", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def cli_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh git checkout the CLI copies go into: a git copy of MindSpeed-MM where the framework is at hand."""
    from tests.copier_run import checkout_at_hand

    return checkout_at_hand(tmp_path_factory.mktemp("properties-cli"))


@pytest.fixture(scope="module")
def cli_facts(tiny_models) -> str:
    from hooks.probe import probe

    return probe(tiny_models(CLI_ARCH)).to_json(with_timings=False)


def _evidence(branch: str, template: str) -> str:
    return json.dumps({"recommended": {"branch": branch, "reason": "given", "template": template,
                                       "collator_id": "qwen3vl"}, "candidates": []})


@st.composite
def faulty_data(draw: st.DrawFn) -> DataSpec:
    """A data set of the classes CI runs whose first record has a fault the validators must stop (a missing,
    truncated or undecodable file, or one placeholder too many)."""

    spec = draw(data_specs(kinds=DATA_ARCHS[CLI_ARCH], faults=frozenset({"placeholder_count", "media_file"})))
    first = spec.records[0]
    if draw(st.booleans()):
        first = replace(first, media=first.media or (("image", 1),), defect=draw(st.sampled_from(
            ["missing", "truncated", "garbage"])))
    else:
        first = replace(first, placeholder_delta=((draw(st.sampled_from(DATA_ARCHS[CLI_ARCH])), 1),))
    return replace(spec, records=(first, *spec.records[1:]))


@settings(PROFILE, max_examples=CLI_EXAMPLES, phases=[Phase.explicit, Phase.generate])  # a copy costs ~30 s
@given(spec=faulty_data())
def test_cli_stops_bad_data_before_writing(spec: DataSpec, cli_checkout: Path, cli_facts: str, tiny_models) -> None:
    """copier's real CLI stops on the data the in-process validators stop, with the same one line, and the
    checkout's ``git status`` is as it was."""
    from tests.copier_run import copy

    with tempfile.TemporaryDirectory(prefix="prop-cli-") as tmp:
        written = write_data(spec, Path(tmp) / "in")
        expected = data_answer_error(written.data_json, written.media_root, json.loads(cli_facts))
        assert expected, "the generator made a fault the validators accept"
        before = _status(cli_checkout)
        done = copy(cli_checkout, skip_tasks=False, run_smoke=False, model_id="prop", model_path=tiny_models(CLI_ARCH),
                    model_facts=cli_facts, data_evidence=_evidence("a", "qwen2vl"), data_json=written.data_json,
                    **({"media_root": written.media_root} if written.media_root else {}))
        last = (done.stderr.strip().splitlines() or [""])[-1]
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert last == f"error: {expected}", f"the CLI said {last!r}, the validators {expected!r}"
        assert _status(cli_checkout) == before, "a rejected answer must leave the checkout as it was"
        _count("copier CLI", "stopped")


# A folder in no checkout is a destination by design (the copy renders there and runs the contract smoke: make demo
# without a framework), so only these two must stop.
DESTINATIONS = ("sub_folder", "user_file")


@pytest.mark.tier2
@pytest.mark.skipif("destination" not in enabled_classes(), reason="MSMM_PROPERTY_CLASSES leaves destinations out")
@pytest.mark.parametrize("kind", DESTINATIONS)
@settings(PROFILE, max_examples=1 if CLI_EXAMPLES <= 2 else 2, phases=[Phase.explicit, Phase.generate])
@given(pick=st.integers(0, 10))
@example(pick=2)  # found: sub_folder writes a nested tree inside the checkout, exit 0; user_file at tests/st/...
def test_destination_stops_before_writing(kind: str, pick: int, tmp_path_factory: pytest.TempPathFactory,
                                          cli_facts: str, tiny_models, mm_home: Path) -> None:
    """A destination inside a MindSpeed-MM checkout but not its root, or a user's own file at a path the copy
    writes: the copy stops before writing, naming a field, and the folders are as they were."""
    from hooks import scaffold
    from tests.copier_run import commit_all, copy, mm_checkout

    base = tmp_path_factory.mktemp("dest")
    checkout = mm_checkout(mm_home, base)
    dest = checkout
    if kind == "sub_folder":
        dest = checkout / "examples" / "mine"
        dest.mkdir(parents=True)
    else:
        paths = [p for p in scaffold.written("prop", "a") if p != scaffold.answers_file("prop")]
        target = checkout / paths[pick % len(paths)]
        target = target if target.suffix else target / "mine.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("# the user's own file\n")
        commit_all(checkout)
    before = _status(checkout)  # untracked files included: a nested tree or a changed file of the user shows
    done = copy(dest, skip_tasks=False, run_smoke=False, model_id="prop", model_path=tiny_models(CLI_ARCH),
                model_facts=cli_facts, data_evidence=_evidence("a", "qwen2vl"))
    last = (done.stderr.strip().splitlines() or [""])[-1]
    assert done.returncode != 0, f"{kind}: the copy went ahead (exit 0): {done.stdout[-1500:]}"
    assert re.match(r"^error: \w+: ", last) and FIELD.match(last.removeprefix("error: ")), last
    assert _status(checkout) == before, f"{kind}: files were written before it stopped"
    _count("destinations", f"{kind} stopped")


def test_classes_are_known() -> None:
    """Every enabled class is one the generators draw (a misspelt class would silently generate nothing)."""
    assert ENABLED <= set(CLASSES)
    assert enabled_classes() <= set(CLASSES), f"unknown classes in MSMM_PROPERTY_CLASSES: {enabled_classes()}"



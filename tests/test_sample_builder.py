"""A release that ships no image preprocessing: the user's sample builder (issue 21, deliverable 2).

The fixture is ``remote_tiles`` (InternVL-Chat-style remote code: ``chat()``, ``get_conv_template``) with its
``load_image`` renamed away in the saved folder, as a fine-tune's folder that copied the model code but not the
model card is published (the real case, InternVL2-2B's code without its card, is in
tests/test_published_remote.py and needs the mirrors). The builder the tests answer is the release's own
tiling, taken from the code the fixture was built from: a user copies it from the base model's card.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from hooks.model.facts import ModelFacts
from tests.copier_run import copy, mm_checkout

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def no_preprocessing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """remote_tiles without an image function anywhere in its folder (no model card either)."""
    from hooks.tiny import build_tiny_model

    folder = build_tiny_model("remote_tiles", tmp_path_factory.mktemp("no_preprocessing") / "model")
    code = folder / "modeling_remote_tiles.py"
    code.write_text(code.read_text().replace("def load_image(", "def _tiles_of("))
    return folder


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release's own tiling as a user's builder file (``load_image`` and what it calls)."""
    from hooks.tiny.remote_vlm import modeling_remote_tiles as own

    path = tmp_path_factory.mktemp("builder") / "my_builder.py"
    path.write_text("import torch\n\nMEAN, STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)\n\n\n"
                    + inspect.getsource(own.dynamic_preprocess) + "\n\n" + inspect.getsource(own.load_image))
    return path


def _probe(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hooks.probe", str(folder), "--json", "--no-timings",
                           "--trust-remote-code", *extra], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)


# ---------------------------------------------------------------------------- the contract, on its own


def _returning(value: object):
    def build(image):  # noqa: ARG001 - the contract's signature
        return value

    return build


def test_the_contract_is_checked_on_a_test_image() -> None:
    import torch
    from PIL import Image

    from hooks.data.builder import contract_problems

    config = SimpleNamespace(force_image_size=8)  # a stand-in config: only its size attribute is read
    image = Image.new("RGB", (16, 8), "red")
    assert contract_problems(_returning(torch.zeros(2, 3, 8, 8)), config, image, False) == []
    assert "tiles are 4x4; the model's config takes 8x8" in contract_problems(
        _returning(torch.zeros(1, 3, 4, 4)), config, image, False)[0]
    assert "1 channels" in contract_problems(_returning(torch.zeros(1, 1, 8, 8)), config, image, False)[0]
    assert "returned list" in contract_problems(_returning([]), config, image, False)[0]
    assert "int64" in contract_problems(_returning(torch.zeros(1, 3, 8, 8, dtype=torch.long)), config, image,
                                        False)[0]
    assert "NaN or Inf" in contract_problems(_returning(torch.full((1, 3, 8, 8), float("nan"))), config, image,
                                             False)[0]

    def raising(image):
        raise NotImplementedError("not written yet")

    assert contract_problems(raising, config, image, False) == [
        "could not evaluate the sample builder: it raised NotImplementedError: not written yet"]
    opened: list[str] = []
    assert contract_problems(lambda path: opened.append(path) or torch.zeros(1, 3, 8, 8), config, image, True) == []
    assert opened[0].endswith(".png")  # a builder that opens a file gets a path


def test_answers_that_name_no_function_are_refused(tmp_path: Path) -> None:
    from hooks.data.builder import load_builder, parse

    (tmp_path / "b.py").write_text("def other(image):\n    return image\n")
    for spec, words in ((f"{tmp_path}/b.py", "is not path.py:function"), (f"{tmp_path}/none.py:f", "does not exist"),
                        (f"{tmp_path}/b.py:2x", "is not path.py:function")):
        with pytest.raises(ValueError, match=words):
            parse(spec)
    with pytest.raises(ValueError, match="defines no function load_image"):
        load_builder(f"{tmp_path}/b.py:load_image")


def test_the_skeleton_states_the_contract_with_the_models_figures(no_preprocessing: Path, tmp_path: Path) -> None:
    target = tmp_path / "skeleton.py"
    done = subprocess.run([sys.executable, "-m", "hooks.data.builder", str(no_preprocessing), "--skeleton",
                           str(target)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    text = target.read_text()
    assert "Contract: load_image(image)" in text and "(tiles, channels, height, width)" in text
    assert "raise NotImplementedError" in text  # a skeleton: nothing trains on it by accident
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(target)], capture_output=True,
                          text=True, check=False)
    assert lint.returncode == 0, lint.stdout
    again = subprocess.run([sys.executable, "-m", "hooks.data.builder", str(no_preprocessing), "--skeleton",
                            str(target)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert again.returncode == 2 and "exists" in again.stderr  # never overwritten
    facts = json.loads(_probe(no_preprocessing, "--sample-builder", f"{target}:load_image").stdout)
    assert facts["processor"]["problems"] == [
        "could not evaluate the sample builder: it raised NotImplementedError: write the model's own image "
        "preprocessing here"]


# ---------------------------------------------------------------------------- the probe


def test_the_probe_says_a_builder_is_needed_and_checks_one_against_chat(no_preprocessing: Path,
                                                                        builder: Path) -> None:
    without = json.loads(_probe(no_preprocessing).stdout)["processor"]
    assert without["needs_builder"] is True and "defines load_image" in without["problems"][0]
    done = _probe(no_preprocessing, "--sample-builder", f"{builder}:load_image")
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(done.stdout)
    fmt = facts["processor"]["sample_format"]
    assert facts["processor"]["problems"] == []  # chat()'s prompt rebuilt token for token with the builder's tiles
    assert fmt["kind"] == "code" and fmt["image_function"] == "sample_builder.load_image"
    assert fmt["builder"] == f"{builder}:load_image" and fmt["image_text"] == ["<img>", "<IMG_CONTEXT>", "</img>"]
    from hooks.data.candidates import recommend

    assert recommend(ModelFacts.from_dict(facts), None).branch == "c"


def test_a_wrong_answer_stops_the_probe_naming_the_field(no_preprocessing: Path) -> None:
    done = _probe(no_preprocessing, "--sample-builder", "nowhere.py:load_image")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: sample_builder: ")


# ---------------------------------------------------------------------------- copier


def _status(dest: Path) -> str:
    return subprocess.run(["git", "-C", str(dest), "status", "--porcelain", "--ignored", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


def test_a_copy_without_a_builder_stops_before_rendering_naming_the_way_out(no_preprocessing: Path,
                                                                           tmp_path: Path) -> None:
    from tests.copier_run import git_init

    dest = git_init(tmp_path / "dest")
    before = _status(dest)
    done = copy(dest, model_id="tiles", model_path=no_preprocessing, trust_remote_code=True)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode != 0
    assert last.startswith("error: sample_builder: the release ships no image preprocessing for its chat()"), last
    assert "python -m hooks.data.builder" in last and "--skeleton" in last
    assert _status(dest) == before and "Traceback" not in done.stderr


def test_a_copy_with_a_builder_renders_the_plugin_on_it(no_preprocessing: Path, builder: Path,
                                                       tmp_path: Path) -> None:
    from tests.copier_run import git_init

    dest = git_init(tmp_path / "dest")
    done = copy(dest, model_id="tiles", model_path=no_preprocessing, trust_remote_code=True,
                sample_builder=f"{builder}:load_image")
    assert done.returncode == 0, done.stderr[-3000:]
    plugin = (dest / "mindspeed_mm/fsdp/data/datasets/tiles/dataset_tiles.py").read_text()
    assert "from mindspeed_mm.fsdp.models.tiles.remote_code import sample_builder as _image_code" in plugin
    assert "_image_code.load_image" in plugin
    answers = (dest / ".copier-answers/tiles.yml").read_text()
    assert f"sample_builder: {builder}:load_image" in answers
    assert "your sample builder, copied from" in (dest / "examples/tiles/MIGRATION.md").read_text()


@pytest.mark.tier2
def test_a_copy_with_a_builder_trains_with_parity_against_chat(no_preprocessing: Path, builder: Path,
                                                              mm_home: Path, tmp_path: Path) -> None:
    dest = mm_checkout(mm_home, tmp_path)
    done = copy(dest, skip_tasks=False, model_id="tiles", model_path=no_preprocessing, trust_remote_code=True,
                sample_builder=f"{builder}:load_image")
    print(done.stdout[-4000:])
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("data parity: MATCH (the dataset plugin (your sample builder and the model's own conversation and "
            "chat()))") in done.stdout
    assert "smoke[framework] PASS" in done.stdout and "verified: loss equivalence" in done.stdout
    copied = dest / "mindspeed_mm/fsdp/models/tiles/remote_code/sample_builder.py"
    assert copied.read_text() == builder.read_text()

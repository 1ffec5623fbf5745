"""Issue 40, deliverables 4 and 5: the model folder is consistent before anything is rendered, and the copy knows
where it writes.

Each bad input runs ``copier copy --trust --defaults -d ...`` through copier's real CLI (``tests.test_preflight``'s
``_stops``): the copy exits non-zero with ``error: <field>: ...`` and the checkout's ``git status`` is as it was.
The defective model folders are copies of the tiny Qwen2.5-VL (``hooks.tiny``) with one file edited: its config
(layers, sizes), its weights (a tensor dropped, the file split into shards), or its layout (the Hugging Face
cache's symlinks into ``blobs/``). The destination cases copy into a MindSpeed-MM checkout (a git copy of the real
one in tier 2; in tier 1, a git repository holding the one file that makes a folder a checkout for the hooks,
``mindspeed_mm/fsdp/train/trainer.py``: a stand-in, named as one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.copier_run import TEMPLATE_ROOT, commit_all, copier, git_init, mm_checkout
from tests.test_preflight import _folder, _status, _stops

ARCH = "qwen2_5_vl"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A MindSpeed-MM checkout: the real one's git copy where the framework is at hand, else the stand-in."""
    home = os.environ.get("MINDSPEED_MM_HOME")
    parent = tmp_path_factory.mktemp("folder")
    if home:
        return mm_checkout(Path(home), parent)
    dest = git_init(parent / "MindSpeed-MM")
    trainer = dest / "mindspeed_mm" / "fsdp" / "train" / "trainer.py"
    trainer.parent.mkdir(parents=True)
    trainer.write_text("# stand-in: the file hooks.framework.environment recognises a checkout by\n")
    commit_all(dest)
    return dest


# --- model folders: the weights against the config ----------------------------------------------------------


def _text_config(folder: Path, **changes: object) -> None:
    data = json.loads((folder / "config.json").read_text())
    data["text_config"].update(changes)
    (folder / "config.json").write_text(json.dumps(data))


def _layers(folder: Path, delta: int) -> None:
    """config.json declares ``delta`` more decoder layers than the weights hold (its ``layer_types`` to match)."""
    text = json.loads((folder / "config.json").read_text())["text_config"]
    count = text["num_hidden_layers"] + delta
    _text_config(folder, num_hidden_layers=count, layer_types=(text["layer_types"] * 2)[:count])


def _tensors(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path))


def _save(tensors: dict, path: Path) -> None:
    from safetensors.torch import save_file

    save_file(tensors, str(path), metadata={"format": "pt"})


def _drop(name: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        tensors = _tensors(folder / "model.safetensors")
        del tensors[name]
        _save(tensors, folder / "model.safetensors")
    return edit


def _shards(folder: Path) -> dict[str, str]:
    """The weights split in two shards with their index, as a sharded release is; the weight map."""
    tensors = _tensors(folder / "model.safetensors")
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for shard, part in halves.items():
        _save({name: tensors[name] for name in part}, folder / shard)
    (folder / "model.safetensors").unlink()
    weight_map = {name: shard for shard, part in halves.items() for name in part}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return weight_map


def _missing_shard(folder: Path) -> None:
    _shards(folder)
    (folder / "model-00002-of-00002.safetensors").unlink()


def _index_naming_a_tensor_elsewhere(folder: Path) -> None:
    """An index that assigns a tensor to the shard that does not hold it (the index of another download)."""
    weight_map = _shards(folder)
    name = sorted(weight_map)[0]
    weight_map[name] = "model-00002-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def _cache_layout(folder: Path, *, incomplete: bool = False, dangling: bool = False) -> None:
    """The Hugging Face cache's layout: the folder's weights are symlinks into ``../blobs/<hash>``; the second
    shard's blob still downloading (``<hash>.incomplete``) or gone."""
    _shards(folder)
    blobs = folder.parent / "blobs"
    blobs.mkdir()
    for number, shard in enumerate(sorted(folder.glob("model-*.safetensors"))):
        blob = blobs / f"{number:040x}"
        shard.rename(blob)
        if number == 1 and incomplete:
            blob.rename(blob.with_name(blob.name + ".incomplete"))
        if number == 1 and dangling:
            blob.unlink()
        shard.symlink_to(os.path.relpath(blob, folder))


FOLDER_CASES: dict[str, tuple[str, Callable[[Path], object]]] = {
    "a parameter missing from the weights": (
        "the model built from config.json has the parameter model.language_model.norm.weight [",
        _drop("model.norm.weight")),
    "a shape that differs from config.json": (
        "has model.language_model.layers.0.mlp.gate_proj.weight of shape [48, ",
        lambda f: _text_config(f, intermediate_size=48)),
    "config.json declares a layer the weights lack": (
        "has the parameter model.language_model.layers.2.self_attn.q_proj.weight", lambda f: _layers(f, 1)),
    "the weights hold a layer config.json does not declare": (
        "model.safetensors holds model.layers.1.input_layernorm.weight [64], of a layer the model built from "
        "config.json does not have", lambda f: _layers(f, -1)),
    "a shard the index names is missing": ("names the shard model-00002-of-00002.safetensors, which is not in",
                                           _missing_shard),
    "the index names a tensor its shard does not hold": ("whose header does not hold it",
                                                         _index_naming_a_tensor_elsewhere),
    "a shard behind a symlink to an .incomplete blob": (
        "a download that did not finish", lambda f: _cache_layout(f, incomplete=True)),
    "a shard behind a dangling symlink": ("which does not exist (a partial download?)",
                                          lambda f: _cache_layout(f, dangling=True)),
}


# The same classes as a case before them (a missing parameter; test_preflight's missing shard): --full-matrix only.
REPEATS = ("config.json declares a layer the weights lack", "a shard the index names is missing")


@pytest.mark.parametrize("case", [pytest.param(case, marks=pytest.mark.full_matrix) if case in REPEATS else case
                                  for case in sorted(FOLDER_CASES)])
def test_inconsistent_model_folder_stops_before_rendering(case: str, checkout: Path, tiny_models,
                                                          tmp_path: Path) -> None:
    words, edit = FOLDER_CASES[case]
    folder = _folder(tiny_models, tmp_path / "snapshot", edit)
    _stops(checkout, "model_path", words, model_id="folder", model_path=folder)


def test_the_loaders_naming_rules(tiny_models, tmp_path: Path) -> None:
    """The checkpoint's names reach the model's as transformers 4.57 maps them: Llava's ``language_model.*``
    (``_checkpoint_conversion_mapping``), Qwen2.5-VL's legacy ``model.*``; a tied head absent from the file
    (PaliGemma) is fine, an untied one is not. Headers only: the check never reads a tensor."""
    import transformers

    from hooks.compat import ensure_torchvision
    from hooks.model.build import build_structure
    from hooks.model.loading import load_config_and_class
    from hooks.model.weights import parameters_error, stored_tensors

    if int(transformers.__version__.split(".")[0]) >= 5:
        pytest.skip("the name check runs on transformers 4.57's rules; 5.x's conversions are not evaluated")
    ensure_torchvision()

    def error(folder: Path) -> str:
        config, cls, _ = load_config_and_class(folder, trust_remote_code=False)
        return parameters_error(build_structure(cls, config, folder)[0], folder)

    for arch in ("llava", "paligemma", ARCH):
        assert error(tiny_models(arch)) == "", arch
    stored, _ = stored_tensors(tiny_models("paligemma"))
    assert not any("lm_head" in name for name in stored), "PaliGemma ties its head: the file has none"
    folder = _folder(tiny_models, tmp_path / "untied", _drop("lm_head.weight"))
    assert "has the parameter lm_head.weight" in error(folder)

    def prediction_layer(folder: Path) -> None:
        """A multi-token-prediction layer after the last decoder layer, as GLM's releases ship one (transformers
        drops it with a warning): not a layer config.json lacks, since the model's layers have no ``eh_proj``."""
        tensors = _tensors(folder / "model.safetensors")
        tensors["model.layers.2.eh_proj.weight"] = tensors["model.layers.1.self_attn.q_proj.weight"]
        tensors["model.layers.2.input_layernorm.weight"] = tensors["model.layers.1.input_layernorm.weight"]
        _save({name: tensor.clone() for name, tensor in tensors.items()}, folder / "model.safetensors")

    assert error(_folder(tiny_models, tmp_path / "mtp", prediction_layer)) == ""


# --- paths: resolved once, written resolved ------------------------------------------------------------------


def test_relative_and_home_paths_are_written_resolved(tiny_models, template_src: Path, tmp_path: Path,
                                                     monkeypatch) -> None:
    """``model_path`` relative to the folder copier runs in and ``data_json`` under ``~`` are checked where they
    point and written there: the answers file and the YAML hold absolute paths, so the copy's tasks (run in the
    destination) and the trainer read the same files the questions checked."""
    from PIL import Image

    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    Image.new("RGB", (64, 64), "red").save(home / "data" / "red.png")
    record = {"messages": [{"role": "user", "content": "<image>What color?"},
                           {"role": "assistant", "content": "Red."}], "images": ["red.png"]}
    (home / "data" / "train.json").write_text(json.dumps([record, record]))
    work = tmp_path / "work"
    shutil.copytree(tiny_models(ARCH), work / "models" / "tiny")
    dest = git_init(tmp_path / "dest")
    monkeypatch.setenv("HOME", str(home))
    args = ("copy", "--trust", "--defaults", "--quiet", "--skip-tasks",
            "-d", "model_id=paths", "-d", "model_path=models/tiny", "-d", "data_json=~/data/train.json",
            "-d", "devices_per_node=2", "-d", "python=" + sys.executable, "-d", "run_smoke=false",
            str(template_src), str(dest))
    done = copier(*args, cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = yaml.safe_load((dest / ".copier-answers" / "paths.yml").read_text())
    assert answers["model_path"] == str(work / "models" / "tiny")
    assert answers["data_json"] == str(home / "data" / "train.json")
    config = yaml.safe_load((dest / "examples" / "paths" / "paths_config.yaml").read_text())
    text = json.dumps(config)
    assert str(work / "models" / "tiny") in text and str(home / "data" / "train.json") in text
    assert "~" not in text and "models/tiny\"" not in text.replace(str(work / "models" / "tiny"), "")
    commit_all(dest)
    again = copier(*args, cwd=work)  # the same model again: its own answers file, its own files, the same folder
    assert again.returncode == 0, again.stderr[-3000:]
    assert _status(dest) == "", subprocess.run(["git", "-C", str(dest), "diff"], capture_output=True, text=True).stdout


def test_path_answers_resolve_as_the_user_meant_them(tmp_path: Path, monkeypatch) -> None:
    """A bare interpreter name stays a command (found on PATH), a venv's python is not followed through its
    symlink, a builder keeps its function."""
    from hooks.render.destination import resolved, resolved_answers

    monkeypatch.chdir(tmp_path)
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    assert resolved("python3", "python") == "python3"
    assert resolved("venv/bin/python", "python") == str(tmp_path / "venv" / "bin" / "python")
    assert resolved("b.py:load_image", "sample_builder") == f"{tmp_path / 'b.py'}:load_image"
    assert resolved("", "media_root") == ""
    assert resolved_answers({"model_path": "m", "model_id": "m", "nodes": 1}) == {
        "model_path": str(tmp_path / "m"), "model_id": "m", "nodes": 1}


# --- the destination ------------------------------------------------------------------------------------------


def test_a_destination_inside_a_checkout_stops(checkout: Path, tiny_models) -> None:
    """A sub-folder of a checkout would get a second mindspeed_mm/ tree inside the real one: the copy stops,
    naming the destination and the root to use."""
    inner = checkout / "examples"
    inner.mkdir(exist_ok=True)
    before = _status(checkout)
    last = _stops(inner, "destination", f"is inside the MindSpeed-MM checkout {checkout}, not its root",
                  model_id="folder", model_path=tiny_models(ARCH))
    assert f"copier copy --trust <template> {checkout}" in last
    assert _status(checkout) == before


USER_FILES = {
    "a system-test script of the user's": Path("tests/st/shell_scripts/finetune_mine.sh"),
    "a user's file in the model plugin folder": Path("mindspeed_mm/fsdp/models/mine/notes.py"),
    "a user's example folder": Path("examples/mine/run.sh"),
}


@pytest.mark.parametrize("case", sorted(USER_FILES))
def test_a_users_file_at_a_copy_path_stops(case: str, checkout: Path, tiny_models) -> None:
    """Without the model's answers file, a file at a path the copy writes is the user's (or another model's): the
    copy stops at model_id, naming the path and the ways out, before copier would offer ``--overwrite``."""
    path = checkout / USER_FILES[case]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# mine\n")
    commit_all(checkout)
    try:
        last = _stops(checkout, "model_id", "already exists", model_id="mine", model_path=tiny_models(ARCH))
        assert str(USER_FILES[case]).split("/")[0] in last and "choose another model_id, or move or remove" in last
    finally:
        subprocess.run(["git", "-C", str(checkout), "rm", "-rq", str(USER_FILES[case])], check=True)
        commit_all(checkout)


def _answers(checkout: Path, name: str, **answers: object) -> Path:
    path = checkout / ".copier-answers" / f"{name}.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump({"_src_path": str(TEMPLATE_ROOT), **answers}))
    commit_all(checkout)
    return path


def test_a_model_id_of_another_model_stops(checkout: Path, tiny_models, tmp_path: Path) -> None:
    """``model_id`` taken by another model: another answers file that records it, or its own answers file recording
    another model folder. Both stop before anything is written, naming the answers file and a new id as the way
    out; the same model folder again (a re-run) passes that check."""
    from hooks.render.destination import collision_error, owner_error

    other = _answers(checkout, "renamed", model_id="taken", model_path=str(tiny_models("llava")))
    own = _answers(checkout, "owned", model_id="owned", model_path=str(tiny_models("llava")))
    try:
        last = _stops(checkout, "model_id", ".copier-answers/renamed.yml", model_id="taken",
                      model_path=tiny_models(ARCH))
        assert "choose another model_id" in last
        last = _stops(checkout, "model_path", "is not the model that model_id 'owned' holds",
                      model_id="owned", model_path=tiny_models(ARCH))
        assert ".copier-answers/owned.yml" in last and "choose another model_id" in last
        assert owner_error("owned", str(tiny_models("llava")), str(checkout)) == ""  # the same model again
        assert collision_error("owned", str(checkout)) == ""  # its own files: copier update rewrites them
    finally:
        for path in (other, own):
            subprocess.run(["git", "-C", str(checkout), "rm", "-q", str(path)], check=True)
        commit_all(checkout)

"""Pre-flight (issue 15): every bad answer stops the copy before anything is written, in one line that
names the field and the fix, and the checkout's ``git status`` stays empty.

Each case runs ``copier copy --trust --defaults -d ...`` through copier's real CLI into one checkout
(a git copy of MindSpeed-MM in tier 2, an empty git repository in tier 1). Data cases pass the tiny
Qwen2.5-VL's probed facts with the answers (``-d model_facts=...``, as a re-run would), so only the
data questions are exercised; model-folder cases run the real probe. The README's reliability
section lists every case with its message.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.copier_run import checkout_at_hand, commit_all, copier, copy, git_init

ARCH = "qwen2_5_vl"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh real checkout where the framework is at hand, else an empty git repository."""
    return checkout_at_hand(tmp_path_factory.mktemp("preflight"))


@pytest.fixture(scope="module")
def facts(tiny_models) -> str:
    from hooks.probe import probe

    return probe(tiny_models(ARCH)).to_json(with_timings=False)


def _evidence(branch: str) -> str:
    return json.dumps({"recommended": {"branch": branch, "reason": "test", "template": "qwen2vl",
                                       "collator_id": "qwen3vl"}, "candidates": []})


def _status(dest: Path) -> str:
    return subprocess.run(["git", "-C", str(dest), "status", "--porcelain", "--ignored", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


def _stops(dest: Path, field: str, words: str, **answers: object) -> str:
    """Copy with ``answers``: exit non-zero with ``error: <field>: ...words...``, ``dest`` left as it was."""
    before = _status(dest)
    done = copy(dest, skip_tasks=False, run_smoke=False, **answers)
    last = (done.stderr.strip().splitlines() or [""])[-1]
    assert done.returncode != 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert last.startswith(f"error: {field}: ") and words in last, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert _status(dest) == before, "a rejected answer must leave the checkout as it was"
    return last


# --- the data answers (the model's facts given) -----------------------------------------------------

def _image(root: Path, name: str = "ok.png") -> str:
    from PIL import Image

    Image.new("RGB", (64, 64), "red").save(root / name)
    return name


def _record(image: str) -> dict:
    return {"messages": [{"role": "user", "content": "<image>What color?"}, {"role": "assistant", "content": "Red."}],
            "images": [image]}


def _truncated(root: Path) -> str:
    """A PNG cut in half: it opens (the header is whole) but does not decode."""
    data = (root / _image(root, "whole.png")).read_bytes()
    (root / "cut.png").write_bytes(data[: len(data) // 2])
    return "cut.png"


def _write(root: Path, name: str, text: str) -> str:
    (root / name).write_text(text)
    return str(root / name)


def _undecodable(root: Path, name: str) -> str:
    """Random bytes under a media file's name: neither PIL, PyAV nor libsndfile reads them."""
    (root / name).write_bytes(bytes(range(256)) * 16)
    return name


def _video_record(video: str) -> dict:
    return {"messages": [{"role": "user", "content": "<video>What happens?"},
                         {"role": "assistant", "content": "Nothing."}], "videos": [video]}


def _asking(root: Path, prompt: str) -> str:
    """A data file of one record with one image whose user turn is ``prompt``."""
    record = {**_record(_image(root)), "messages": [{"role": "user", "content": prompt},
                                                    {"role": "assistant", "content": "Yes."}]}
    return _write(root, "p.json", json.dumps([record]))


DATA_CASES: dict[str, tuple[str, str, Callable[[Path], dict]]] = {
    "data_json missing": ("data_json", "is not an existing file", lambda r: {"data_json": r / "none.json"}),
    "data_json broken JSON": ("data_json", "is not valid JSON or JSONL",
                              lambda r: {"data_json": _write(r, "b.json", '[{"messages": [')}),
    "data_json broken JSONL line": ("data_json", "line 2",
                                    lambda r: {"data_json": _write(r, "b.jsonl", '{"a": 1}\n{"a": \n')}),
    "data_json empty list": ("data_json", "holds no records", lambda r: {"data_json": _write(r, "e.json", "[]")}),
    "data_json not records": ("data_json", "is not a list of records",
                              lambda r: {"data_json": _write(r, "s.json", '["a", "b"]')}),
    "data_json not the huggingface shape": ("data_json", "has no 'messages' list",
                                            lambda r: {"data_json": _write(r, "q.json", '[{"q": "x", "a": "y"}]')}),
    "image missing": ("data_json", "does not exist",
                      lambda r: {"data_json": _write(r, "m.json", json.dumps([_record("nope.png")]))}),
    "image does not decode": ("data_json", "cut.png does not decode as an image", lambda r: {
        "data_json": _write(r, "t.json", json.dumps([_record(_image(r)), _record(_truncated(r))]))}),
    "more <image> placeholders than images": ("data_json", "has 2 <image> placeholder(s) in its messages but 1",
                                              lambda r: {"data_json": _asking(r, "<image><image>Same?")}),
    "<video> placeholder without a video": ("data_json", "1 <video> placeholder(s) in its messages but 0 video(s)",
                                           lambda r: {"data_json": _asking(r, "<image><video>Same?")}),
    "video does not decode": ("data_json", "bad.mp4 does not decode as a video", lambda r: {
        "data_json": _write(r, "v.json", json.dumps([_video_record(_undecodable(r, "bad.mp4"))]))}),
    "no record with an answer": ("data_json", "has a non-empty answer to train on", lambda r: {
        "data_json": _write(r, "n.json", json.dumps([{**_record(_image(r)), "messages": [
            {"role": "user", "content": "<image>What color?"}, {"role": "assistant", "content": "  "}]}] * 2))}),
    "data_fields: no record with an answer": ("data_json", "has a non-empty answer to train on", lambda r: {
        "data_branch": "c", "data_json": _write(r, "c.jsonl", "\n".join(
            json.dumps({"img": _image(r), "q": "x", "a": ""}) for _ in range(2))),
        "data_fields": json.dumps({"images": "img", "prompt": "q", "response": "a"})}),
    "image outside media_root": ("media_root", "outside", lambda r: {
        "data_json": _write(r, "o.json", json.dumps([_record(f"../{r.name}/{_image(r)}")])),
        "media_root": r / "media"} if (r / "media").mkdir(exist_ok=True) is None else {}),
    "media_root a file": ("media_root", "is not an existing folder", lambda r: {
        "data_json": _write(r, "g.json", json.dumps([_record(_image(r))])), "media_root": r / "ok.png"}),
    "media_root missing": ("media_root", "is not an existing folder", lambda r: {
        "data_json": _write(r, "g.json", json.dumps([_record(_image(r))])), "media_root": r / "nowhere"}),
    "data_fields not JSON": ("data_fields", "not a JSON object", lambda r: {
        "data_branch": "c", "data_json": _write(r, "c.jsonl", json.dumps({"img": _image(r), "q": "x", "a": "y"})),
        "data_fields": "{images: img}"}),
    "data_fields unknown field": ("data_fields", "unknown field", lambda r: {
        "data_branch": "c", "data_json": _write(r, "c.jsonl", json.dumps({"img": _image(r), "q": "x", "a": "y"})),
        "data_fields": json.dumps({"pictures": "img"})}),
    "data_fields key not in the records": ("data_fields", "has no key 'question'", lambda r: {
        "data_branch": "c", "data_json": _write(r, "c.jsonl", json.dumps({"img": _image(r), "q": "x", "a": "y"})),
        "data_fields": json.dumps({"images": "img", "prompt": "question", "response": "a"})}),
    "data_fields images missing": ("data_json", "does not exist", lambda r: {
        "data_branch": "c", "data_json": _write(r, "c.jsonl", json.dumps({"img": "gone.png", "q": "x", "a": "y"})),
        "data_fields": json.dumps({"images": "img", "prompt": "q", "response": "a"})}),
    "record over cutoff_len": ("data_json", "over the YAML's cutoff_len", lambda r: {"data_json": _write(
        r, "long.json", json.dumps([{**_record(_image(r)), "messages": [
            {"role": "user", "content": "<image>" + " word" * 2600}, {"role": "assistant", "content": "Red."}]}]))}),
    "devices_per_node zero": ("devices_per_node", "at least 1", lambda r: {"devices_per_node": 0}),
    "devices_per_node a word": ("devices_per_node", "'eight' is not a whole number",
                                lambda r: {"devices_per_node": "eight"}),
    "nodes a fraction": ("nodes", "'1.5' is not a whole number", lambda r: {"nodes": 1.5}),
    "device_memory_gb a word": ("device_memory_gb", "'sixty' is not a positive number",
                                lambda r: {"device_memory_gb": "sixty"}),
    "device_memory_gb negative": ("device_memory_gb", "positive number", lambda r: {"device_memory_gb": -8}),
}


@pytest.mark.parametrize("case", sorted(DATA_CASES))
def test_bad_data_answer_stops_before_rendering(case: str, checkout: Path, tiny_models, facts: str,
                                                tmp_path: Path) -> None:
    field, words, make = DATA_CASES[case]
    answers = make(tmp_path)
    branch = str(answers.get("data_branch", "a"))
    _stops(checkout, field, words, model_id="pre", model_path=tiny_models(ARCH), model_facts=facts,
           data_evidence=_evidence(branch), **answers)


# --- audio data (the tiny Qwen2-Audio's facts given) -------------------------------------------------

AUDIO_ARCH = "qwen2_audio"


@pytest.fixture(scope="module")
def audio_facts(tiny_models) -> str:
    from hooks.probe import probe

    return probe(tiny_models(AUDIO_ARCH)).to_json(with_timings=False)


def _wav(root: Path, name: str = "tone.wav", samples: int | None = None) -> str:
    from hooks.data.sample import demo_audio, write_wav

    write_wav(root / name, demo_audio(0)[0][:samples])
    return name


def _heard(audios: list[str], prompt: str = "<audio>Which tone?") -> dict:
    return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": "A low tone."}],
            "audios": audios}


AUDIO_CASES: dict[str, tuple[str, str, Callable[[Path], dict]]] = {
    "audio does not decode": ("data_json", "noise.wav does not decode as audio", lambda r: {
        "data_json": _write(r, "a.json", json.dumps([_heard([_wav(r)]), _heard([_undecodable(r, "noise.wav")])]))}),
    "audio without samples": ("data_json", "silent.wav does not decode as audio (it holds no samples)", lambda r: {
        "data_json": _write(r, "a.json", json.dumps([_heard([_wav(r, "silent.wav", samples=0)])]))}),
    "audio missing": ("data_json", "names gone.wav in 'audios', but", lambda r: {
        "data_json": _write(r, "a.json", json.dumps([_heard(["gone.wav"])]))}),
    "more <audio> placeholders than audios": (
        "data_json", "has 2 <audio> placeholder(s) in its messages but 1 audio(s)",
        lambda r: {"data_json": _write(r, "a.json", json.dumps([_heard([_wav(r)], "<audio><audio>Same tone?")]))}),
    "data_fields audio does not decode": ("data_json", "noise.wav does not decode as audio", lambda r: {
        "data_branch": "c", "data_json": _write(r, "c.jsonl", json.dumps(
            {"clip": _undecodable(r, "noise.wav"), "q": "<audio>Which tone?", "a": "A low tone."})),
        "data_fields": json.dumps({"audios": "clip", "prompt": "q", "response": "a"})}),
}


@pytest.mark.parametrize("case", sorted(AUDIO_CASES))
def test_bad_audio_data_stops_before_rendering(case: str, checkout: Path, tiny_models, audio_facts: str,
                                               tmp_path: Path) -> None:
    """Audio files are checked as images are: named files exist, decode (soundfile, else librosa: samples, all
    finite), and ``<audio>`` placeholders match the ``audios`` list (branches a, b)."""
    field, words, make = AUDIO_CASES[case]
    answers = make(tmp_path)
    branch = str(answers.get("data_branch", "a"))
    _stops(checkout, field, words, model_id="pre", model_path=tiny_models(AUDIO_ARCH), model_facts=audio_facts,
           data_evidence=_evidence(branch), **answers)


# --- the model folder and the interpreter (the real probe) -------------------------------------------


def _folder(tiny_models, tmp_path: Path, edit: Callable[[Path], object]) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(tiny_models(ARCH), folder)
    edit(folder)
    return folder


def _config(folder: Path, **changes: object) -> None:
    data = json.loads((folder / "config.json").read_text())
    data.update(changes)
    (folder / "config.json").write_text(json.dumps({k: v for k, v in data.items() if v is not None}))


def _cut_weights(folder: Path) -> None:
    """The safetensors file of an interrupted download: its header whole, half of its tensors' bytes."""
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])


def _corrupt_header(folder: Path) -> None:
    """Bytes of the JSON header overwritten with bytes no UTF-8 text holds (the file's length unchanged)."""
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[40:48] = b"\xff" * 8
    weights.write_bytes(bytes(data))


def _index_naming_a_missing_shard(folder: Path) -> None:
    """An index that lists a second shard the folder lacks (one file of a sharded download missing)."""
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "np") as weights:
        names = sorted(weights.keys())
    weight_map = {name: "model-00001-of-00002.safetensors" for name in names[: len(names) // 2]}
    weight_map.update({name: "model-00002-of-00002.safetensors" for name in names[len(names) // 2:]})
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def _florence2(folder: Path) -> None:
    """A Florence-2 folder as transformers writes its config (encoder-decoder), with a tokenizer and processor."""
    from transformers import Florence2Config

    (folder / "config.json").write_text(Florence2Config().to_json_string())


def _no_torch_python(tmp_path: Path) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    return str(tmp_path / "bare" / "bin" / "python")


MODEL_CASES: dict[str, tuple[str, str, Callable[..., dict]]] = {
    "model folder missing": ("model_path", "does not exist", lambda t, m: {"model_path": m / "missing"}),
    "config.json missing": ("model_path", "has no config.json",
                            lambda t, m: {"model_path": _folder(t, m, lambda f: (f / "config.json").unlink())}),
    "config.json malformed": ("model_path", "is not valid JSON", lambda t, m: {
        "model_path": _folder(t, m, lambda f: (f / "config.json").write_text("{model_type: qwen"))}),
    "model_type unknown to transformers": ("model_path", "is not one transformers", lambda t, m: {
        "model_path": _folder(t, m, lambda f: _config(f, model_type="qwen9_vl"))}),
    "tokenizer files missing": ("model_path", "has no tokenizer files", lambda t, m: {"model_path": _folder(
        t, m, lambda f: [p.unlink() for p in f.iterdir() if p.name.startswith(("tokenizer", "vocab", "merges"))])}),
    "processor files missing": ("model_path", "processor does not load", lambda t, m: {"model_path": _folder(
        t, m, lambda f: [p.unlink() for p in f.iterdir() if p.name.endswith("processor_config.json")])}),
    "auto_map without consent": ("trust_remote_code", "auto_map", lambda t, m: {
        "model_path": _folder(t, m, lambda f: _config(f, auto_map={"AutoConfig": "c.C"}))}),
    "no model_type without consent": ("trust_remote_code", "neither model_type nor auto_map", lambda t, m: {
        "model_path": _folder(t, m, lambda f: _config(f, model_type=None))}),
    "no model_type, no class in the folder": ("model_path", "no *.py file in the folder defines", lambda t, m: {
        "model_path": _folder(t, m, lambda f: _config(f, model_type=None)), "trust_remote_code": True}),
    "interpreter without torch": ("python", "cannot import torch",
                                  lambda t, m: {"model_path": t(ARCH), "python": _no_torch_python(m)}),
    "interpreter missing": ("python", "cannot run", lambda t, m: {"model_path": t(ARCH), "python": m / "nopython"}),
    "model_id not an identifier": ("model_id", "identifier", lambda t, m: {"model_path": t(ARCH), "model_id": "q-2"}),
    "weights truncated": ("model_path", "model.safetensors does not deserialise (the tensors' data is", lambda t, m: {
        "model_path": _folder(t, m, _cut_weights)}),
    "weights header corrupt": ("model_path", "model.safetensors does not deserialise (the header is not UTF-8 JSON",
                               lambda t, m: {"model_path": _folder(t, m, _corrupt_header)}),
    "weights index naming a missing shard": ("model_path", "names the shard model-00002-of-00002.safetensors, which "
                                             "is not in", lambda t, m: {
                                                 "model_path": _folder(t, m, _index_naming_a_missing_shard)}),
    "florence2 not covered": ("model_path", "model_type 'florence2' is not covered: a captioning or encoder-decoder",
                              lambda t, m: {"model_path": _folder(t, m, _florence2)}),
}


@pytest.mark.parametrize("case", sorted(MODEL_CASES))
def test_bad_model_answer_stops_before_rendering(case: str, checkout: Path, tiny_models, tmp_path: Path) -> None:
    field, words, make = MODEL_CASES[case]
    answers = {"model_id": "pre", **make(tiny_models, tmp_path)}
    _stops(checkout, field, words, **answers)


def test_weights_are_read_as_their_loaders_read_them(tiny_models, tmp_path: Path) -> None:
    """``hooks.model.weights`` agrees with the safetensors library on damaged copies of a real file (cut short,
    header bytes overwritten), reads torch's zip and legacy formats by their containers, and does it in the
    validators' process without importing torch."""
    import torch
    from safetensors import safe_open

    from hooks.model.weights import weights_error

    model = tiny_models(ARCH)
    data = (model / "model.safetensors").read_bytes()
    length = int.from_bytes(data[:8], "little")
    folder = tmp_path / "w"
    folder.mkdir()
    damaged = [data[:cut] for cut in (0, 7, 8 + length // 2, 8 + length, len(data) - 1)] + [data + b"\0"]
    damaged += [data[:at] + bytes([value]) + data[at + 1:] for at in range(8, 8 + length, max(1, length // 40))
                for value in (0x7D, 0xFF)]
    refused = 0
    for variant in damaged:
        (folder / "model.safetensors").write_bytes(variant)
        try:
            with safe_open(str(folder / "model.safetensors"), "np") as weights:
                weights.keys()
            loads = True
        except Exception:  # noqa: BLE001 - the library's refusal is the fact compared against
            loads = False
        refused += not loads
        assert (weights_error(folder) == "") == loads, weights_error(folder)
    assert refused > len(damaged) // 2, "most of the damaged copies must be ones the library refuses"
    (folder / "model.safetensors").write_bytes(data)
    (folder / "pytorch_model.bin.index.json").write_text('{"weight_map": {"w": "pytorch_model-1.bin"}}')
    assert weights_error(folder) == "", "a .bin index beside safetensors is not what transformers reads"

    bins = tmp_path / "bins"
    bins.mkdir()
    for legacy in (False, True):
        torch.save({"w": torch.ones(64, 64)}, bins / "pytorch_model.bin", _use_new_zipfile_serialization=not legacy)
        assert weights_error(bins) == ""
    zipped = bins / "pytorch_model.bin"
    torch.save({"w": torch.ones(64, 64)}, zipped)
    zipped.write_bytes(zipped.read_bytes()[:-40])
    assert "pytorch_model.bin does not deserialise (a torch zip archive that does not open" in weights_error(bins)

    check = ("import sys; from pathlib import Path; from hooks.render.validators import model_dir_error; "
             f"assert model_dir_error({str(model)!r}) == ''; assert 'torch' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr


def test_an_example_folder_that_is_not_ours_stops(checkout: Path, tiny_models, facts: str) -> None:
    taken = checkout / "examples" / "taken"
    taken.mkdir(parents=True)
    (taken / "run.sh").write_text("echo mine\n")
    commit_all(checkout)
    try:
        _stops(checkout, "model_id", "already exists", model_id="taken", model_path=tiny_models(ARCH),
               model_facts=facts, data_evidence=_evidence("a"))
    finally:
        shutil.rmtree(taken)
        commit_all(checkout)


def test_branch_b_without_a_chat_template_stops(checkout: Path, tiny_models) -> None:
    """PaliGemma has no chat template: a forced branch b (a template derived from it) stops at that question."""
    _stops(checkout, "data_branch", "has no chat template", model_id="pre", model_path=tiny_models("paligemma"),
           data_branch="b")


# --- copier update -----------------------------------------------------------------------------------


def test_update_without_answers_file_or_on_a_dirty_tree_changes_nothing(tiny_models, facts: str,
                                                                         tmp_path: Path) -> None:
    """copier itself refuses both, in one line: no answers file named (-a), local changes (commit first)."""
    dest = git_init(tmp_path / "c")
    assert copy(dest, model_id="upd", model_path=tiny_models(ARCH), model_facts=facts,
                data_evidence=_evidence("a")).returncode == 0
    commit_all(dest)
    done = copier("update", "--trust", "--defaults", "--skip-tasks", cwd=dest)
    assert done.returncode != 0 and ".copier-answers.yml" in done.stderr and _status(dest) == ""
    report = dest / "examples" / "upd" / "MIGRATION.md"
    report.write_text(report.read_text() + "local edit\n")
    before = _status(dest)
    done = copier("update", "--trust", "--defaults", "--skip-tasks", "-a", ".copier-answers/upd.yml", cwd=dest)
    assert done.returncode != 0 and "dirty" in done.stderr and _status(dest) == before


# --- smoke verdicts on a bad training signal ---------------------------------------------------------


@pytest.mark.parametrize(("losses", "labels", "why"), [
    ([8.1, float("nan"), 8.0, 7.9, 7.8], 40, "non-finite loss"),
    ([0.0] * 5, 40, "loss is zero"),
    ([8.1] * 5, 40, "loss is constant"),
    ([8.1, 8.0, 7.9, 7.8, 7.7], 0, "no unmasked label tokens"),
], ids=["nan loss", "all labels masked (zero loss)", "flat loss", "no unmasked label tokens"])
def test_a_bad_training_signal_fails_the_smoke(losses: list[float], labels: int, why: str) -> None:
    from hooks.smoke.verdict import SmokeResult, judge

    result = judge(SmokeResult(mode="framework", losses=losses, label_tokens=labels, iterations_expected=5))
    assert not result.passed and why in result.summary()

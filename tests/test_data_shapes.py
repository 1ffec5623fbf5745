"""Shapes of records users bring (issue 40, deliverables 2 and 3): each either trains or stops the copy before
anything is written, decided against what MindSpeed-MM's own converter (``convert.py``), mm_plugin and sampler
will do with it (``hooks/data/shapes.py`` says which shape meets which).

Tier 1: one copier copy per class of input that stops (``tests/test_preflight.py``'s helpers: the tiny
Qwen2.5-VL's or Qwen2-Audio's probed facts given, ``git status`` of the checkout unchanged), the sharegpt
convention rendered into the YAML's ``attr`` and read by the framework's own converter. Tier 2: a data set in
MindSpeed-MM's own example formats (its LLaVA converter's output, LLaMA-Factory's omni demo) copied onto the tiny
Qwen2.5-Omni through the real trainer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.copier_run import changed_paths, checkout_at_hand, copy, git_init, mm_checkout
from tests.test_preflight import _evidence, _image, _stops, _wav, _write

ARCH, AUDIO_ARCH = "qwen2_5_vl", "qwen2_audio"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh real checkout where the framework is at hand, else an empty git repository."""
    return checkout_at_hand(tmp_path_factory.mktemp("shapes"))


def _probed(tiny_models, arch: str) -> str:
    from hooks.probe import probe

    return probe(tiny_models(arch)).to_json(with_timings=False)


@pytest.fixture(scope="module")
def facts(tiny_models) -> str:
    return _probed(tiny_models, ARCH)


@pytest.fixture(scope="module")
def audio_facts(tiny_models) -> str:
    return _probed(tiny_models, AUDIO_ARCH)


def _turns(*pairs: tuple[str, object]) -> list[dict]:
    return [{"role": role, "content": content} for role, content in pairs]


def _asked(root: Path, *, turns: list[dict] | None = None, images: object = None, copies: int = 2,
           name: str = "d.json") -> dict:
    """``copies`` records with one image each (``images`` overrides the list), ``turns`` their turns."""
    image = _image(root)
    record = {"messages": turns or _turns(("user", "<image>What color?"), ("assistant", "Red.")),
              "images": [image] if images is None else images}
    return {"data_json": _write(root, name, json.dumps([record] * copies))}


def _branch_c(root: Path, record: dict, fields: dict | None = None) -> dict:
    _image(root)
    return {"data_branch": "c", "data_json": _write(root, "c.jsonl", "\n".join([json.dumps(record)] * 2)),
            "data_fields": json.dumps(fields or {})}


TYPED = [{"type": "image"}, {"type": "text", "text": "What color?"}]
SHAREGPT_TURNS = [{"from": "human", "value": "<image>What color?"}, {"from": "gpt", "value": "Red."}]

SHAPE_CASES: dict[str, tuple[str, str, Callable[[Path], dict]]] = {
    "content as typed parts": ("data_json", "a list of typed parts; MindSpeed-MM's converter reads a string",
                               lambda r: _asked(r, turns=_turns(("user", TYPED), ("assistant", "Red.")))),
    "a role tag no convention names": ("data_json", "role(s) ['bot'] in 'role'",
                                       lambda r: _asked(r, turns=_turns(("user", "<image>Hi?"), ("bot", "Red.")))),
    "assistant first": ("data_json", "record 1 has 'assistant' at turn 1", lambda r: _asked(r, turns=_turns(
        ("assistant", "Hello."), ("user", "<image>What color?")))),
    "a system turn mid-way": ("data_json", "a system turn mid-way at turn 3", lambda r: _asked(r, turns=_turns(
        ("user", "<image>What color?"), ("assistant", "Red."), ("system", "Be brief."), ("user", "Sure?"),
        ("assistant", "Yes.")))),
    "an odd number of turns": ("data_json", "odd number of turns (3", lambda r: _asked(r, turns=_turns(
        ("user", "<image>What color?"), ("assistant", "Red."), ("user", "Sure?")))),
    "two conventions in one file": ("data_json", "record 2 is written as conversations/from", lambda r: {
        "data_json": _write(r, "m.json", json.dumps([
            {"messages": _turns(("user", "<image>What color?"), ("assistant", "Red.")), "images": [_image(r)]},
            {"conversations": SHAREGPT_TURNS, "images": [_image(r)]}]))}),
    "image as an object": ("data_json", "an object, not a path", lambda r: _asked(r, images=[{"path": "ok.png"}])),
    "image as a URL": ("data_json", "a URL: the framework's loaders (PIL, PyAV, librosa) open local files only",
                       lambda r: _asked(r, images=["https://example.com/ok.png"])),
    "one record for two ranks": ("data_json", "holds 1 record(s), but the smoke runs 2 data-parallel rank(s) x micro "
                                              "batch 1 with drop_last, so it needs at least 2",
                                 lambda r: _asked(r, copies=1)),
    "fewer records than the cluster's ranks": ("data_json", "holds 4 record(s), but the YAML's run on 1 node(s) x 8 "
                                              "device(s) runs 8 data-parallel rank(s)", lambda r: _asked(r, copies=4)),
    "data_fields: a video part": ("data_json", "a content part of type 'video'", lambda r: _branch_c(r, {
        "messages": _turns(("user", [{"type": "video"}, {"type": "text", "text": "What?"}]), ("assistant", "A.")),
        "images": []})),
    "data_fields: image as a URL": ("data_json", "a URL", lambda r: _branch_c(r, {
        "messages": _turns(("user", "<image>What color?"), ("assistant", "Red.")),
        "images": ["http://example.com/ok.png"]})),
    "data_fields: assistant first": ("data_json", "has 'assistant' at turn 1", lambda r: _branch_c(r, {
        "messages": _turns(("assistant", "Hello."), ("user", "<image>What color?")), "images": ["ok.png"]})),
    "data_fields: one record": ("data_json", "so it needs at least 2", lambda r: {
        **_branch_c(r, {}), "data_json": _write(r, "one.jsonl", json.dumps(
            {"messages": _turns(("user", [{"type": "image"}, {"type": "text", "text": "What?"}]),
                                ("assistant", "Red.")), "images": [{"path": "ok.png"}]}))}),
}


@pytest.mark.parametrize("case", sorted(SHAPE_CASES))
def test_a_shape_the_framework_would_not_train_stops_before_rendering(case: str, checkout: Path, tiny_models,
                                                                     facts: str, tmp_path: Path) -> None:
    field, words, make = SHAPE_CASES[case]
    answers = make(tmp_path)
    branch = str(answers.get("data_branch", "a"))
    _stops(checkout, field, words, model_id="shp", model_path=tiny_models(ARCH), model_facts=facts,
           data_evidence=_evidence(branch), **answers)


def _long_clip(root: Path) -> dict:
    """Two records, the second naming a 5 s clip (the tiny Qwen2-Audio's Whisper extractor keeps 4 s: its
    ``chunk_length``, shrunk from the release's 30 s)."""
    from hooks.data.sample import demo_audio, write_wav

    wave = demo_audio(0, seconds=5.0)[0]
    write_wav(root / "long.wav", wave)
    record = {"messages": _turns(("user", "<audio>Which tone?"), ("assistant", "A low tone.")),
              "audios": ["long.wav"]}
    return {"data_json": _write(root, "a.json", json.dumps([{**record, "audios": [_wav(root)]}, record]))}


def test_a_clip_the_extractor_cuts_stops_naming_what_it_keeps(checkout: Path, tiny_models, audio_facts: str,
                                                              tmp_path: Path) -> None:
    """The feature extractor, called as MindSpeed-MM's mm_plugin calls it, drops what follows its chunk (30 s in the
    releases): the copy says so, per clip, with what to change (not "resize its images")."""
    last = _stops(checkout, "data_json", "keeps the first 4 s of each clip", model_id="shp",
                  model_path=tiny_models(AUDIO_ARCH), model_facts=audio_facts, data_evidence=_evidence("a"),
                  **_long_clip(tmp_path))
    assert "record 2 names long.wav, a 5.0 s clip, but WhisperFeatureExtractor" in last
    assert "split the clip into pieces of at most 4 s" in last


def test_the_length_message_says_per_medium_what_to_change() -> None:
    from hooks.data.preflight import shorter

    assert "images" not in shorter({}, [], ["clip"]) and "fewer or shorter clips" in shorter({}, [], ["clip"])
    assert "image_max_pixels" in shorter({}, ["image"], [])
    assert "video_fps" in shorter({"videos": ["v.mp4"]}, [], [])


# --- mapped shapes: they train -----------------------------------------------------------------------


def test_branch_c_reads_typed_parts_and_path_objects() -> None:
    """Branch c's dataset plugin (``partials/processor_dataset.py``) reads chat-style typed parts as the text with a
    placeholder where each image/audio part stands, and ``{"path": ...}`` media objects as their paths."""
    from hooks.data.records import dataset_runtime
    from hooks.data.shapes import mapped_error

    mapping = dataset_runtime().FieldMap()
    record = {"messages": _turns(("user", TYPED + [{"type": "audio"}]), ("assistant", [{"type": "text",
                                                                                       "text": "Red."}])),
              "images": [{"path": "a.png"}], "audios": {"path": "t.wav"}}
    assert mapping.turns(record) == [("user", "<image>What color?<audio>"), ("assistant", "Red.")]
    assert (mapping.images_of(record), mapping.audios_of(record)) == (["a.png"], ["t.wav"])
    assert mapped_error([record], mapping) == ""


def test_the_sharegpt_convention_is_mapped_and_the_framework_converter_reads_it(
        checkout: Path, tiny_models, facts: str, tmp_path: Path) -> None:
    """LLaVA's sharegpt records (``conversations`` of ``from``/``value``, ``human``/``gpt``: the input of
    MindSpeed-MM's ``llava_instruct_2_mllm_demo_format.py``) render ``attr`` keys that read them, and MindSpeed-MM's
    own ``SharegptDatasetConverter`` built from that ``attr`` turns every record into user/assistant turns."""
    data = tmp_path / "llava"
    data.mkdir()
    records = [{"conversations": [{"from": "system", "value": "Be brief."}, *SHAREGPT_TURNS], "images": [_image(data)]},
               {"conversations": [{"from": "human", "value": "Hi."}, {"from": "gpt", "value": "Hello."}],
                "images": []}]
    _write(data, "llava.json", json.dumps(records))
    dest = git_init(tmp_path / "dest")
    done = copy(dest, model_id="sgpt", model_path=tiny_models(ARCH), model_facts=facts, data_evidence=_evidence("a"),
                data_json=data / "llava.json", run_smoke=False, devices_per_node=2)
    assert done.returncode == 0, done.stderr[-3000:]
    config = next((dest / "examples" / "sgpt").glob("*.yaml"))
    attr = yaml.safe_load(config.read_text())["data"]["dataset_param"]["attr"]
    assert {k: attr[k] for k in ("messages", "role_tag", "content_tag", "user_tag", "assistant_tag")} == {
        "messages": "conversations", "role_tag": "from", "content_tag": "value", "user_tag": "human",
        "assistant_tag": "gpt"}
    home = os.environ.get("MINDSPEED_MM_HOME")
    if not home:
        return  # the framework's converter is not at hand (tier 1 elsewhere): the attr above is what it reads
    out = framework_converted(Path(home), attr, records, data)
    assert [[t["role"] for t in o["_prompt"] + o["_response"]] for o in out] == [["user", "assistant"]] * 2
    assert out[0]["_system"] == "Be brief." and out[0]["_response"][0]["content"] == "Red."
    assert out[0]["_images"] == [str(data / "ok.png")] and out[1]["_images"] is None
    # The parity's own samples (huggingface shape) are written in the YAML's convention for the framework's side
    # (hooks.data.framework_batches): the converter reads them into the turns the huggingface attr reads.
    from hooks.data.shapes import HUGGINGFACE, Convention

    sample = {"messages": _turns(("system", "Be brief."), ("user", "<image>What color?"), ("assistant", "Red.")),
              "images": ["ok.png"]}
    assert framework_converted(Path(home), attr, [Convention.of_attr(attr).written(sample)], data) == \
        framework_converted(Path(home), {**attr, **HUGGINGFACE.attr()}, [sample], data)


CONVERT = """
import json, sys, types
home, attr, records, folder = sys.argv[1], *map(json.loads, sys.argv[2:4]), sys.argv[4]
from hooks.compat import ensure_torchvision
ensure_torchvision()  # transformers' processors import as in the smoke's interpreter
for name in ("mindspeed_mm", "mindspeed_mm.config", "mindspeed_mm.config.arguments", "mindspeed_mm.fsdp",
             "mindspeed_mm.fsdp.data", "mindspeed_mm.fsdp.data.data_utils",
             "mindspeed_mm.fsdp.data.data_utils.func_utils"):
    package = types.ModuleType(name)
    package.__path__ = [home + "/" + name.replace(".", "/")]
    sys.modules[name] = package
from mindspeed_mm.fsdp.data.data_utils.func_utils import convert
converter = convert.get_dataset_converter(attr.get("formatting", "sharegpt"), convert.DatasetAttr(**attr),
                                          convert.DataArguments(dataset_dir=folder))
print(json.dumps([converter(record) for record in records]))
"""


def framework_converted(home: Path, attr: dict, records: list[dict], folder: Path) -> list[dict]:
    """``records`` through MindSpeed-MM's own converter (``convert.py``, as ``align_dataset`` picks it by ``attr``'s
    ``formatting``), in a fresh interpreter: its package ``__init__`` files, which import the whole trainer, are
    left out; the converter's module and its own imports are the checkout's."""
    done = subprocess.run([sys.executable, "-c", CONVERT, str(home), json.dumps(attr), json.dumps(records),
                           str(folder)], capture_output=True, text=True, check=False, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.tier2
@pytest.mark.full_matrix
def test_sharegpt_records_train_through_a_copy(tmp_path: Path, tiny_models, mm_home: Path,
                                               template_src: Path) -> None:
    """LLaVA's sharegpt records on the tiny Qwen2.5-VL: the YAML's attr reads them, data parity (its samples written
    in that convention) MATCH, the real trainer's smoke PASS with the image proven."""
    checkout = mm_checkout(mm_home, tmp_path / "mm")
    data = tmp_path / "llava"
    data.mkdir()
    records = [{"conversations": [{"from": "human", "value": f"<image>\nWhat color is it? ({i})"},
                                  {"from": "gpt", "value": f"It is {color}."}], "id": f"{i:012d}",
                "images": [_image(data, f"{color}.png")]}
               for i, color in enumerate(("red", "blue", "green", "white"))]
    done = copy(checkout, skip_tasks=False, template=template_src, model_id="sgpt",
                model_path=tiny_models(ARCH), data_json=_write(data, "llava.json", json.dumps(records)),
                devices_per_node=2)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "data parity: MATCH" in done.stdout
    assert re.search(r"smoke\[framework\] PASS: 5/5 iterations", done.stdout), done.stdout[-3000:]
    assert re.search(r"verified: image reached forward", done.stdout), done.stdout[-3000:]


# --- MindSpeed-MM's own example data (tier 2) --------------------------------------------------------


def _video(path: Path, frames: int = 4) -> None:
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=2)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for i in range(frames):
            image = np.full((64, 64, 3), 60 * i % 255, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def mindspeed_example_data(root: Path, video: bool = False) -> Path:
    """A data set in the formats MindSpeed-MM's omni examples give, tiny media generated:

    - ``llava_instruct_2_mllm_demo_format.py``'s output (``examples/qwen2.5omni/README.md`` section 2): ``images``
      first, then ``messages``; image paths ``./train2017/<name>`` relative to ``dataset_dir``, LLaVA's
      ``<image>\\n`` lead in the human turn; ``"images": []`` on a text-only record;
    - LLaMA-Factory's ``mllm_audio_demo.json`` records that README points at (section 1): ``<audio>`` in the
      user turn, the clip in ``audios`` under ``mllm_demo_data/``; with ``video``, its ``mllm_video_audio_demo.json``
      record too: ``<video><audio>`` in the user turn, ``videos`` and ``audios``.
    """
    from PIL import Image

    from hooks.data.sample import demo_audio, write_wav

    (root / "train2017").mkdir(parents=True)
    (root / "mllm_demo_data").mkdir()
    records = []
    for i, color in enumerate(("red", "blue")):
        name = f"0000000{i + 1}.jpg"
        Image.new("RGB", (64, 64), color).save(root / "train2017" / name)
        records.append({"images": [f"./train2017/{name}"], "messages": [
            {"role": "user", "content": "<image>\nWhat color is the picture?"},
            {"role": "assistant", "content": f"It is {color}."}]})
    for i in range(2):
        wave, answer = demo_audio(i, seconds=1.0)
        write_wav(root / "mllm_demo_data" / f"{i + 1}.wav", wave)
        records.append({"messages": [{"content": "<audio>What's that sound?", "role": "user"},
                                     {"content": answer, "role": "assistant"}],
                        "audios": [f"mllm_demo_data/{i + 1}.wav"]})
    records.append({"images": [], "messages": [{"role": "user", "content": "What is the capital of France?"},
                                               {"role": "assistant", "content": "Paris."}]})
    records.insert(1, records.pop(2))  # image, audio, image, audio, text: each rank's first batch a real medium
    if video:
        _video(root / "mllm_demo_data" / "4.mp4")
        write_wav(root / "mllm_demo_data" / "4.wav", demo_audio(2, seconds=2.0)[0])
        records.append({"messages": [{"content": "<video><audio>What is the video describing?", "role": "user"},
                                     {"content": "A picture that darkens and brightens.", "role": "assistant"}],
                        "videos": ["mllm_demo_data/4.mp4"], "audios": ["mllm_demo_data/4.wav"]})
    (root / "mllm_format_demo.json").write_text(json.dumps(records, ensure_ascii=False))
    return root / "mllm_format_demo.json"


@pytest.mark.tier2
@pytest.mark.parametrize("video", [False, pytest.param(True, marks=pytest.mark.full_matrix)])
def test_mindspeed_mm_example_data_trains_on_the_tiny_omni(video: bool, tmp_path: Path, tiny_models, mm_home: Path,
                                                           template_src: Path) -> None:
    """One copy of the tiny Qwen2.5-Omni with a data set in MindSpeed-MM's own example formats: data parity MATCH,
    the real trainer's smoke PASS with image and audio (and video) each reaching forward, nothing outside the
    model's paths."""
    checkout = mm_checkout(mm_home, tmp_path / "mm")
    before = changed_paths(checkout)
    data_json = mindspeed_example_data(tmp_path / "data", video)
    model_id = "omni_demo"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id,
                model_path=tiny_models("qwen2_5_omni"), data_json=data_json, devices_per_node=2)
    print(done.stdout[-4000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "data parity: MATCH" in done.stdout
    assert re.search(r"smoke\[framework\] PASS: 5/5 iterations", done.stdout), done.stdout[-3000:]
    assert re.search(r"verified: audio reached forward", done.stdout), done.stdout[-3000:]
    assert re.search(r"verified: image reached forward", done.stdout), done.stdout[-3000:]
    if video:
        assert re.search(r"verified: video reached forward", done.stdout), done.stdout[-3000:]
    allowed = (".copier-answers/", f"examples/{model_id}/", f"mindspeed_mm/fsdp/models/{model_id}/",
               f"mindspeed_mm/fsdp/data/datasets/{model_id}/", "tests/st/")
    assert all(p.startswith(allowed) for p in changed_paths(checkout) - before)

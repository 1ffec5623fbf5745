"""Audio as a medium of the data path (issue 33): facts read off the processor, branch c's samples, the refusal of
audio a data path cannot take, and (tier 2) a copy that trains on clips through the real trainer.

The model is the tiny Qwen2-Audio (``hooks/tiny/audio.py``: real classes, Whisper features, the processor's
published chat template); clips are the demo tones (``hooks.data.sample.demo_audio``) written as 16-bit WAV.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from hooks.data.records import runtime
from hooks.data.sample import build_demo_dataset, demo_audio, write_wav
from tests.copier_run import changed_paths, copy, git_init, mm_checkout

QUESTION = [("user", "<audio>What do you hear?"), ("assistant", "A low tone.")]


@pytest.fixture(scope="module")
def qwen2_audio(tiny_models) -> Path:
    return tiny_models("qwen2_audio")


@pytest.fixture(scope="module")
def facts(qwen2_audio: Path) -> dict:
    from hooks.probe import probe

    return json.loads(probe(qwen2_audio).to_json(with_timings=False))


@pytest.fixture(scope="module")
def processor(qwen2_audio: Path):
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(str(qwen2_audio))


def test_the_probe_reads_how_the_processor_takes_audio(facts: dict) -> None:
    proc = facts["processor"]
    assert proc["media"] == ["audio"]  # no image processor: the image samples are never built for it
    audio = proc["audio"]
    assert audio["extractor"] == "WhisperFeatureExtractor" and audio["attribute"] == "feature_extractor"
    assert (audio["sampling_rate"], audio["kwarg"], audio["token"]) == (16000, "audio", "<|AUDIO|>")
    assert audio["batch_keys"] == ["feature_attention_mask", "input_features"] and not audio["problems"]
    form = proc["sample_format"]
    assert form["kind"] == "chat" and form["media"] == ["audio"] and form["audio_keys"] == audio["batch_keys"]


def test_numbered_clips_leave_branch_c_and_the_reason_says_why(facts: dict) -> None:
    from hooks.data.candidates import candidates, recommend
    from hooks.render.validators import branch_error

    assert candidates(facts, "qwen2_audio") == []  # "Audio 1: ..." is no fixed template item: no derived template
    reason = recommend(facts, None)["reason"]
    assert recommend(facts, None)["branch"] == "c" and "two audios are not written as two items" in reason
    assert branch_error("b", facts).startswith("data_branch: b derives a template") and "audio" in branch_error(
        "b", facts)


def _wave(i: int):
    return demo_audio(i)[0]


def test_a_sample_carries_its_clips_and_trains_the_answer_only(processor) -> None:
    rt = runtime()
    fmt = rt.SampleFormat(kind="chat", media=("audio",), sampling_rate=16000, audio_kwarg="audio",
                          audio_keys=("feature_attention_mask", "input_features"))
    one = rt.build_sample(processor, fmt, QUESTION, [], 4096, [_wave(0)])
    assert tuple(one["input_features"].shape) == (1, 128, 400) and one["feature_attention_mask"].sum() == 150
    ids, labels = one["input_ids"][0], one["labels"][0]
    assert processor.tokenizer.decode(ids[labels != -100]) == "A low tone.<|im_end|>\n"
    assert (ids == processor.audio_token_id).sum() == 37  # 1.5 s of 16 kHz: 150 frames, 37 audio positions
    two = rt.build_sample(processor, fmt, [("user", "<audio><audio>Compare."), ("assistant", "Higher.")], [], 4096,
                          [_wave(1), demo_audio(2, seconds=2.5)[0]])
    assert two["input_features"].shape[0] == 2 and (two["input_ids"] == processor.audio_token_id).sum() == 37 + 62
    text_only = rt.build_sample(processor, fmt, [("user", "Say hi."), ("assistant", "Hi.")], [], 4096)
    keys = frozenset(["input_ids", "attention_mask", "input_features", "feature_attention_mask"])
    batch = rt.collate([text_only, one], 0, keys, rt.stand_ins(processor, fmt), frozenset(fmt.audio_keys))
    assert tuple(batch["input_features"].shape) == (1, 128, 400)  # the batch's own clip: no stand-in added
    alone = rt.collate([text_only], 0, keys, rt.stand_ins(processor, fmt), frozenset(fmt.audio_keys))
    assert tuple(alone["input_features"].shape) == (1, 128, 400)  # a masked stand-in clip runs the audio tower
    length = text_only["input_ids"].shape[-1]
    assert alone["attention_mask"][0, length:].sum() == 0 and (alone["labels"][0, length:] == -100).all()


def test_audio_features_are_never_padded_as_tokens(processor) -> None:
    """A sample with exactly as many tokens as mel bins (128) must still have its features concatenated."""
    import torch

    rt = runtime()
    sample = {"input_ids": torch.ones(1, 128, dtype=torch.long), "attention_mask": torch.ones(1, 128),
              "labels": torch.ones(1, 128, dtype=torch.long), "input_features": torch.zeros(1, 128, 400)}
    short = {**{k: v[:, :10] for k, v in sample.items() if k != "input_features"}, "input_features": sample[
        "input_features"]}
    batch = rt.collate([sample, short], 0, frozenset(sample), None, frozenset(["input_features"]))
    assert tuple(batch["input_features"].shape) == (2, 128, 400)


def test_audio_a_data_path_cannot_take_is_refused_naming_it(processor) -> None:
    rt = runtime()
    with pytest.raises(ValueError, match="has audio .* takes none: the model would train on the placeholder"):
        rt.build_sample(processor, rt.SampleFormat("chat"), QUESTION, [], 4096)
    with pytest.raises(ValueError, match="names audio files .* takes no audio"):
        rt.load_audios(["a.wav"], Path("."), 0)


def test_untaken_media_error_names_the_record_and_the_medium() -> None:
    from hooks.data.audio import untaken_media_error

    image_model = {"architecture": "Llava", "processor": {}}
    records = [{"messages": [{"role": "user", "content": "Hi"}]}, {"messages": [], "audios": ["a.wav"]}]
    assert untaken_media_error(records, image_model).startswith("data_json: record 2 has audio clips or <audio>, but "
                                                                "Llava takes no audio")
    audio_model = {"architecture": "Qwen2Audio", "processor": {"media": ["audio"]}}
    assert untaken_media_error(records, audio_model) == ""
    assert "takes no image" in untaken_media_error([{"messages": [{"role": "user", "content": "<image>x"}]}],
                                                   audio_model)


def test_the_generated_data_carries_clips_for_audio_models(tmp_path: Path) -> None:
    import librosa

    data = json.loads(build_demo_dataset(tmp_path / "a", media=("audio",)).read_text())
    assert all(r["audios"] and r["messages"][0]["content"].startswith("<audio>") for r in data)
    wave, rate = librosa.load(str(tmp_path / "a" / data[0]["audios"][0]), sr=16000)
    assert rate == 16000 and abs(wave - demo_audio(0)[0]).max() < 1e-3
    omni = json.loads(build_demo_dataset(tmp_path / "o", media=("image", "audio")).read_text())
    kinds = {(bool(r["images"]), bool(r["audios"])) for r in omni}
    assert kinds == {(True, False), (False, True), (True, True)}
    assert json.loads(build_demo_dataset(tmp_path / "i").read_text())[0].keys() == {"images", "messages"}


def test_a_copy_with_audio_data_for_an_image_model_stops_before_writing(tmp_path: Path, tiny_models) -> None:
    """Tier 1 (an empty folder, no framework): the data question stops the copy, naming the record and audio."""
    data = build_demo_dataset(tmp_path / "data", media=("audio",))
    for branch in ("a", "c"):
        dest = git_init(tmp_path / f"dest_{branch}")
        done = copy(dest, model_id="q", model_path=tiny_models("qwen2_5_vl"), data_json=data, data_branch=branch)
        assert done.returncode != 0
        assert re.search(r"error: data_json: record 1 has audio clips or <audio>, but Qwen2_5_VL\w+ takes no audio",
                         done.stderr), done.stderr[-2000:]
        assert subprocess.run(["git", "-C", str(dest), "status", "--porcelain", "--ignored"], capture_output=True,
                              text=True).stdout == ""


# Every audio-capable fixture copied with the defaults: (arch, data, branch). CI runs one per branch kind (c on the
# user's clips, b on an omni thinker with the generated sample); --full-matrix the others.
AUDIO_COPIES = [
    ("qwen2_audio", "given", "c"),
    ("qwen2_5_omni", "generated", "b"),
    pytest.param("qwen2_audio", "generated", "c", marks=pytest.mark.full_matrix),
    pytest.param("phi4_multimodal", "generated", "c", marks=pytest.mark.full_matrix),
    pytest.param("gemma3n", "generated", "b", marks=pytest.mark.full_matrix),
]


def _given_clips(folder: Path) -> Path:
    """Six clips of 1 to 2.25 s in a folder of the user's own, huggingface records naming them."""
    (folder / "wav").mkdir(parents=True)
    records = []
    for i in range(6):
        write_wav(folder / "wav" / f"{i}.wav", demo_audio(i, seconds=1.0 + 0.25 * i)[0])
        records.append({"messages": [{"role": "user", "content": "<audio>Which tone?"},
                                     {"role": "assistant", "content": demo_audio(i)[1]}], "audios": [f"wav/{i}.wav"]})
    (folder / "train.json").write_text(json.dumps(records))
    return folder / "train.json"


@pytest.mark.tier2
@pytest.mark.parametrize(("arch", "data", "branch"), AUDIO_COPIES)
def test_an_audio_copy_trains_on_its_clips(arch: str, data: str, branch: str, tmp_path: Path, tiny_models,
                                           mm_home: Path, template_src: Path) -> None:
    """Parity MATCH on clips against the model's own processor, the real trainer, audio proven to reach forward and
    the audio tower to get a gradient at step 1, loss equivalence with the model's own forward."""
    checkout = mm_checkout(mm_home, tmp_path / "mm")
    before = changed_paths(checkout)
    extra = {"data_json": _given_clips(tmp_path / "mydata")} if data == "given" else {}
    model_id = f"{arch}_hf"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch),
                **extra)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert f"data branch {branch}" in done.stdout and "data parity: MATCH" in done.stdout
    assert "one audio, two audios" in done.stdout and "stand-in" in done.stdout
    assert re.search(r"smoke\[framework\] PASS: 5/5 iterations", done.stdout)
    assert re.search(r"verified: audio reached forward \(\w+ \[", done.stdout), done.stdout[-3000:]
    assert "verified: loss equivalence: step-1 loss" in done.stdout
    allowed = (".copier-answers/", f"examples/{model_id}/", f"mindspeed_mm/fsdp/models/{model_id}/",
               f"mindspeed_mm/fsdp/data/datasets/{model_id}/")
    assert all(p.startswith(allowed) for p in changed_paths(checkout) - before)


def test_a_processor_that_does_not_import_is_named_with_its_real_cause() -> None:
    """transformers wraps a processor class's failed import in a generic message; the cause is what to fix."""
    from hooks.data.facts import cause_of

    try:
        try:
            raise ModuleNotFoundError("No module named 'torchaudio'", name="torchaudio")
        except ModuleNotFoundError as inner:
            raise ModuleNotFoundError("Could not import module 'GraniteSpeechProcessor'.") from inner
    except ModuleNotFoundError as err:
        text = cause_of(err)
    assert text.endswith("caused by ModuleNotFoundError: No module named 'torchaudio'")
    assert cause_of(ImportError()) == "ImportError: (no message)"


def test_a_tekken_tokenizer_counts_as_tokenizer_files() -> None:
    from hooks.model.probe import TOKENIZER_FILES

    assert "tekken.json" in TOKENIZER_FILES  # Voxtral ships its tokenizer as tekken.json only

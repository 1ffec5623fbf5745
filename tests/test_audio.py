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

from hooks import load_answers, scaffold
from hooks.data.records import dataset_runtime
from hooks.data.sample import build_demo_dataset, demo_audio, write_wav
from hooks.model.facts import ModelFacts
from tests.copier_run import changed_paths, copy, git_init, mm_checkout
from tests.model_facts import stand_in_facts
from tests.test_omni_stages import WHO_NAMES

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

    typed = ModelFacts.from_dict(facts)
    assert candidates(typed, "qwen2_audio") == []  # "Audio 1: ..." is no fixed template item: no derived template
    reason = recommend(typed, None).reason
    assert recommend(typed, None).branch == "c" and "two audios are not written as two items" in reason
    assert branch_error("b", facts).startswith("data_branch: b derives a template") and "audio" in branch_error(
        "b", facts)


def _wave(i: int):
    return demo_audio(i)[0]


def test_a_sample_carries_its_clips_and_trains_the_answer_only(processor) -> None:
    rt = dataset_runtime()
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

    rt = dataset_runtime()
    sample = {"input_ids": torch.ones(1, 128, dtype=torch.long), "attention_mask": torch.ones(1, 128),
              "labels": torch.ones(1, 128, dtype=torch.long), "input_features": torch.zeros(1, 128, 400)}
    short = {**{k: v[:, :10] for k, v in sample.items() if k != "input_features"}, "input_features": sample[
        "input_features"]}
    batch = rt.collate([sample, short], 0, frozenset(sample), None, frozenset(["input_features"]))
    assert tuple(batch["input_features"].shape) == (2, 128, 400)


def test_audio_a_data_path_cannot_take_is_refused_naming_it(processor) -> None:
    rt = dataset_runtime()
    with pytest.raises(ValueError, match="has audio .* takes none: the model would train on the placeholder"):
        rt.build_sample(processor, rt.SampleFormat("chat"), QUESTION, [], 4096)
    with pytest.raises(ValueError, match="names audio files .* takes no audio"):
        rt.load_audios(["a.wav"], Path("."), 0)


def test_untaken_media_error_names_the_record_and_the_medium() -> None:
    from hooks.data.audio import untaken_media_error

    image_model = stand_in_facts(architecture="Llava")
    records = [{"messages": [{"role": "user", "content": "Hi"}]}, {"messages": [], "audios": ["a.wav"]}]
    assert untaken_media_error(records, image_model).startswith("data_json: record 2 has audio clips or <audio>, but "
                                                                "Llava takes no audio")
    audio_model = stand_in_facts(architecture="Qwen2Audio", processor={"media": ["audio"]})
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
    extra = {"data_json": _given_clips(tmp_path / "mydata"), "devices_per_node": 2} if data == "given" else {}
    model_id = f"{arch}_hf"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch),
                **extra)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert f"data branch {branch}" in done.stdout and "data parity: MATCH" in done.stdout
    assert re.search(r"compared: .*one audio, two audios.*text only", done.stdout), done.stdout[-3000:]
    assert "stand-in" in done.stdout
    assert re.search(r"smoke\[framework\] PASS: 5/5 iterations", done.stdout)
    assert re.search(r"verified: audio reached forward \(\w+ \[", done.stdout), done.stdout[-3000:]
    assert "verified: loss equivalence: step-1 loss" in done.stdout
    if arch in WHO_NAMES:  # the thinker, as test_omni_stages's copy (full matrix) checks it
        stage = ModelFacts.from_dict(load_answers(checkout / scaffold.answers_file(model_id))["model_facts"]
                                     ).trained_submodule
        assert stage.name == "thinker" and WHO_NAMES[arch] in stage.reason
    allowed = (".copier-answers/", f"examples/{model_id}/", f"mindspeed_mm/fsdp/models/{model_id}/",
               f"mindspeed_mm/fsdp/data/datasets/{model_id}/", "tests/st/")  # tests/st: the system test (issue 35)
    assert all(p.startswith(allowed) for p in changed_paths(checkout) - before)


@pytest.mark.tier2
def test_a_voxtral_copy_trains_on_its_clips_through_its_own_template_call(tmp_path: Path, voxtral: Path,
                                                                          mm_home: Path, template_src: Path) -> None:
    """The default copy of the tiny Voxtral: branch c's template convention, parity MATCH against the model card's
    own call on the clips' files, the real trainer with the audio proof, loss equivalence."""
    checkout = mm_checkout(mm_home, tmp_path / "mm")
    before = changed_paths(checkout)
    done = copy(checkout, skip_tasks=False, template=template_src, model_id="voxtral", model_path=voxtral)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "data branch c" in done.stdout and "data parity: MATCH" in done.stdout
    assert "its own chat-template call" in done.stdout and "stand-in clip" in done.stdout
    assert re.search(r"smoke\[framework\] PASS: 5/5 iterations", done.stdout)
    assert re.search(r"verified: audio reached forward \(input_features \[\d+, 128, 3000\].*audio_tower got a "
                     r"gradient", done.stdout)
    assert "verified: loss equivalence: step-1 loss" in done.stdout
    plugin = (checkout / "mindspeed_mm/fsdp/data/datasets/voxtral/dataset_voxtral.py").read_text()
    assert "mode=ValidationMode.finetuning" in plugin and "data.TemplateCall(" in plugin
    allowed = (".copier-answers/", "examples/voxtral/", "mindspeed_mm/fsdp/models/voxtral/",
               "mindspeed_mm/fsdp/data/datasets/voxtral/", "tests/st/")
    assert all(p.startswith(allowed) for p in changed_paths(checkout) - before)


@pytest.fixture(scope="module")
def voxtral(tiny_models) -> Path:
    return tiny_models("voxtral")


@pytest.fixture(scope="module")
def voxtral_facts(voxtral: Path) -> dict:
    from hooks.probe import probe

    return json.loads(probe(voxtral).to_json(with_timings=False))


def test_a_processor_that_takes_clips_only_through_its_chat_template_call_is_read_as_such(voxtral_facts: dict) -> None:
    """VoxtralProcessor.__call__ takes no clips and it has no chat template to render: its own
    ``apply_chat_template(tokenize=True, return_dict=True)`` reads each clip from a file (the template convention),
    in the mode its tokenizer's from_pretrained names for a conversation that ends in an answer."""
    from hooks.data.candidates import recommend, unbuildable

    proc = voxtral_facts["processor"]
    form = proc["sample_format"]
    assert form["kind"] == "template" and form["media"] == ["audio"] and form["sampling_rate"] == 16000
    assert form["load_mode"] == "mistral_common.protocol.instruct.validator.ValidationMode.finetuning"
    assert form["end_of_turn"] == "</s>" and form["audio_keys"] == ["input_features"]
    audio = proc["audio"]
    assert audio["kwarg"] == "" and audio["batch_keys"] == ["input_features"] and not audio["problems"]
    assert audio["one_audio_tokens"] > 375  # one 30 s chunk: 375 [AUDIO], and the turn around it
    typed = ModelFacts.from_dict(voxtral_facts)
    assert unbuildable(typed) == "" and recommend(typed, None).branch == "c"


def test_a_template_call_sample_trains_each_answer_and_matches_the_model_cards_call(
        voxtral: Path, voxtral_facts: dict, tmp_path: Path) -> None:
    """Two turns, three clips (two in the first): the plugin's sample equals the model card's call on the record's
    own files (the parity reference, ``hooks.data.media.template_inputs``) token for token and feature for feature,
    and trains each answer with its ``</s>``; a text-only batch gets a masked, untrained stand-in clip."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from transformers import AutoProcessor

    from hooks.data.batch import compare_sample, own_load
    from hooks.data.media import template_inputs
    from hooks.data.records import template_call

    rt, form = dataset_runtime(), voxtral_facts["processor"]["sample_format"]
    fmt = rt.SampleFormat(**form)
    clips = [demo_audio(1)[0], demo_audio(2, seconds=2.5)[0], demo_audio(3)[0]]
    files = []
    for i, clip in enumerate(clips):
        files.append(tmp_path / f"{i}.wav")
        write_wav(files[-1], clip)
    waves = rt.load_audios([f.name for f in files], tmp_path, fmt.sampling_rate)
    turns = [("user", "<audio><audio>Compare the two sounds."), ("assistant", "The second is higher."),
             ("user", "<audio>And this one?"), ("assistant", "A very high tone.")]
    processor = AutoProcessor.from_pretrained(str(voxtral))
    call = template_call(processor, form, voxtral, tmp_path / "clips")
    sample = rt.build_sample(call, fmt, turns, [], 1 << 30, waves)
    ids, labels = sample["input_ids"][0], sample["labels"][0]
    assert tuple(sample["input_features"].shape) == (3, 128, 3000) and int((ids == 24).sum()) == 3 * 375
    assert processor.tokenizer.decode(ids[labels != -100]) == "The second is higher.</s>A very high tone.</s>"
    own_processor = AutoProcessor.from_pretrained(str(voxtral), **own_load(form, True))
    own = template_inputs(own_processor, [[
        {"role": "user", "content": [{"type": "audio", "path": files[0]}, {"type": "audio", "path": files[1]},
                                     {"type": "text", "text": "Compare the two sounds."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "The second is higher."}]},
        {"role": "user", "content": [{"type": "audio", "path": files[2]}, {"type": "text", "text": "And this one?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A very high tone."}]}]])
    verdict, notes = compare_sample("two turns", sample, own, processor.tokenizer,
                                    ["The second is higher.", "A very high tone."], form["end_of_turn"],
                                    set(voxtral_facts["forward_params"]), False)
    assert (verdict, notes) == ("match", [])
    text_only = rt.build_sample(call, fmt, [("user", "Say hi."), ("assistant", "Hi.")], [], 1 << 30)
    assert "input_features" not in text_only
    batch = rt.collate([text_only], call.tokenizer.pad_token_id, frozenset(voxtral_facts["forward_params"]),
                       rt.stand_ins(call, fmt), frozenset(fmt.audio_keys))
    length = text_only["input_ids"].shape[-1]
    assert tuple(batch["input_features"].shape) == (1, 128, 3000) and int((batch["input_ids"] == 24).sum()) == 375
    assert batch["attention_mask"][0, length:].sum() == 0 and (batch["labels"][0, length:] == -100).all()
    with pytest.raises(ValueError, match="marks 2 clip.* names 1 audio file"):
        rt.build_sample(call, fmt, [("user", "<audio><audio>Two?"), ("assistant", "One.")], [], 1 << 30, waves[:1])


def test_the_contract_smoke_encodes_template_call_samples(voxtral: Path) -> None:
    """Without a framework checkout the contract smoke trains on the built-in tones, encoded as the plugin would."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from transformers import AutoProcessor

    from hooks.data.encoders import builtin_samples, encode, media_of

    processor = AutoProcessor.from_pretrained(str(voxtral))
    sample = builtin_samples(media_of(processor))[0]
    batch = encode(processor, sample, voxtral)
    assert tuple(batch["input_features"].shape) == (1, 128, 3000)
    trained = batch["input_ids"][0][batch["labels"][0] != -100]
    assert processor.tokenizer.decode(trained) == sample[-1]["content"][0]["text"] + "</s>"


def test_the_length_preflight_builds_template_call_samples(voxtral: Path, tmp_path: Path) -> None:
    """A clip is 30 s of [AUDIO] to Voxtral: a record over cutoff_len is named before the copy, built as the plugin
    builds it."""
    from hooks.data.preflight import length_error

    write_wav(tmp_path / "a.wav", demo_audio(0)[0])
    (tmp_path / "train.json").write_text(json.dumps([{"messages": [{"role": "user", "content": "<audio>Which?"},
                                                                   {"role": "assistant", "content": "Low."}],
                                                      "audios": ["a.wav"]}]))
    assert length_error(voxtral, tmp_path / "train.json", None, {}, False, cutoff=4096) == ""
    assert re.match(r"data_json: record 1 becomes 38\d tokens", length_error(voxtral, tmp_path / "train.json", None,
                                                                              {}, False, cutoff=100))


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
    from hooks.model.facts import TOKENIZER_FILES

    assert "tekken.json" in TOKENIZER_FILES  # Voxtral ships its tokenizer as tekken.json only


def test_branch_c_takes_the_media_its_convention_hands_the_processor() -> None:
    """An omni model whose processor writes its own prompt (no chat template) takes no clips on branch c: its data
    with audio stops the copy, and the smoke's generated sample holds images only."""
    from hooks.data.audio import media_taken, untaken_media_error

    omni = stand_in_facts(architecture="Omni", processor={"media": ["image", "audio"],
                                                          "sample_format": {"kind": "prompt"}})
    assert media_taken(omni) == ["image", "audio"] and media_taken(omni, "c") == ["image"]
    record = [{"messages": [{"role": "user", "content": "<audio>Hi"}], "audios": ["a.wav"]}]
    refused = untaken_media_error(record, omni, branch="c")
    assert "branch c's 'prompt' convention hands the processor no audio" in refused
    assert untaken_media_error(record, omni, branch="b") == ""
    chat = stand_in_facts(processor={"media": ["audio"], "sample_format": {"kind": "chat", "media": ["audio"]}})
    assert media_taken(chat, "c") == ["audio"]


def test_what_the_model_freezes_itself_stays_frozen_after_loading(facts: dict, qwen2_audio: Path) -> None:
    """Qwen2-Audio's __init__ freezes its sinusoidal positions; transformers 5's from_pretrained hands them back
    trainable. The facts name them, and every load of ours (the smoke's reference and contract smoke, through
    ``keep_frozen``; the generated plugin, from the facts) freezes them again."""
    from hooks.model.build import keep_frozen
    from hooks.model.stages import load_trained

    assert facts["frozen_by_model"] == ["audio_tower.embed_positions.weight"]
    model = load_trained(qwen2_audio, None)
    model.requires_grad_(True)  # as transformers 5 loads it
    keep_frozen(model)
    assert not model.get_parameter("audio_tower.embed_positions.weight").requires_grad
    assert all(p.requires_grad for n, p in model.named_parameters() if n != "audio_tower.embed_positions.weight")

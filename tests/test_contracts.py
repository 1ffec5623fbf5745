"""The typed stage contracts (issue 34): each reads what it writes, and answers files written before read back as
they were (the answers file is what a later ``copier update`` renders from, so its bytes must not move)."""

from __future__ import annotations

import json
from pathlib import Path

from hooks.data.candidates import CandidateVerdict, DataEvidence, Recommendation
from hooks.model.facts import ModelFacts
from hooks.model.processor_facts import ProcessorFacts
from hooks.model.stages import TrainedStage
from hooks.report.smoke import SmokeRecord
from hooks.smoke.baseline import compare_losses
from hooks.smoke.training_yaml import TrainingYaml
from tests.model_facts import stand_in_answers_facts

PROCESSORS = [
    {},  # the probe ran without the data stage
    {"class": "PaliGemmaProcessor", "image_token": "<image>", "has_chat_template": False, "output_keys": ["input_ids"],
     "one_image_tokens": 270, "data_format": None, "sample_format": {"kind": "chat"}},  # no chat template
    {"class": "Phi3VProcessor", "image_token": None, "has_chat_template": True, "unevaluated": True,
     "error": "TypeError: x", "sample_format": {"kind": "prompt"}},  # an image token found as None
    {"missing": True, "error": "no processor class", "problems": [], "model_card": True,
     "sample_format": {"kind": "recipe", "per_sample": ["images"]}, "inside_model": "vision_tower.image_processor"},
]


def test_processor_facts_read_back_what_they_wrote() -> None:
    for data in PROCESSORS:
        assert ProcessorFacts.from_dict(data).to_dict() == data


def test_model_facts_round_trip_through_the_answers_file() -> None:
    data = stand_in_answers_facts(processor=PROCESSORS[1], attention={"sdpa": True})
    data["trained_submodule"] = {"name": "thinker", "config_key": "thinker_config", "reason": "r",
                                 "published_class": "Bundle", "class": "Thinker"}
    facts = ModelFacts.from_dict(data)
    assert facts.trained_submodule == TrainedStage("thinker", "thinker_config", "r", "Bundle", "Thinker")
    assert facts.processor.class_name == "PaliGemmaProcessor" and facts.processor.data_format is None
    assert json.loads(facts.to_json(with_timings=False)) == data
    assert ModelFacts.of(data) == facts and ModelFacts.of(facts) is facts and ModelFacts.of({}) is None


def test_a_plan_frozen_before_towers_reads_its_vision_towers_as_vision_encoders() -> None:
    old = stand_in_answers_facts(plan={"vision_towers": ["visual"]})
    old["plan"].pop("towers")
    assert ModelFacts.from_dict(old).plan.towers == {"visual": "vision"}
    assert TrainedStage.from_dict({}) is None and TrainedStage.from_dict(None) is None


def test_data_evidence_round_trip() -> None:
    evidence = DataEvidence(Recommendation("b", "m", "qwen3vl", "matched"),
                            [CandidateVerdict("a", "qwen2vl", "qwen3vl", "in-repo", "mismatch", "ids differ")])
    assert DataEvidence.from_dict(evidence.to_dict()) == evidence
    assert "stop" not in evidence.recommended.to_dict()  # absent unless the interpreter stopped the copy
    assert DataEvidence.from_dict({}) is None


def test_the_smoke_record_reads_back_with_its_baseline_comparison(tmp_path: Path) -> None:
    record = SmokeRecord(passed=False, mode="framework", summary="smoke[framework] FAIL: losses moved",
                         losses=[8.0, 1.9], baseline=compare_losses([8.0, 7.9], [8.0, 1.9]), regressed=True)
    record.write(tmp_path / "smoke_result.json")
    again = SmokeRecord.read(tmp_path / "smoke_result.json")
    assert again == record and not again.baseline.within
    assert SmokeRecord.read(tmp_path / "absent.json") is None


def test_the_training_yaml_is_read_wherever_the_framework_puts_a_key() -> None:
    newer = TrainingYaml.of({"features": {"recompute": True, "recompute_plan": {"apply_modules": ["b"]},
                                          "loss_cfg": {"loss_type": "per_sample_loss"}},
                             "parallel": {"fsdp_plan": {"apply_modules": ["a"], "param_dtype": "bf16"}}})
    older = TrainingYaml.of({"parallel": {"recompute": True, "recompute_plan": {"apply_modules": ["b"]},
                                          "fsdp_plan": {"apply_modules": ["a"]}},
                             "model": {"loss_cfg": {"loss_type": "per_sample_loss"}}})
    for view in (newer, older):
        assert (view.fsdp_units, view.recomputed, view.loss_type) == (["a"], ["b"], "per_sample_loss")
    assert newer.param_dtype == "bf16" and older.param_dtype == "fp32" and TrainingYaml.of(None).recomputed == []


def test_nested_formats_read_typed_and_the_file_keeps_its_mappings() -> None:
    """The chat, media, audio and sample formats inside ``ProcessorFacts`` read as ``ChatSlots``, ``MediaFacts``,
    ``AudioFacts`` and ``SampleForm``; the answers file keeps the mappings (the generated data code embeds them)."""
    from hooks.data.chat_format import ChatFormat
    from hooks.model.processor_facts import AudioFacts, ChatSlots, MediaFacts, SampleForm

    chat = ChatFormat(user_pre="<u>", end_of_turn="<e>", image_item="<image>", problems=[]).to_dict()
    media = {"item_prefix": "<bos>", "token_types": {"7": 1}, "video_item": None, "batch_keys": ["pixel_values"]}
    audio = AudioFacts("WhisperFeatureExtractor", "feature_extractor", 16000, "audio", "<|AUDIO|>",
                       ["input_features"], ["input_features"], 40).to_dict()
    sample = {"kind": "recipe", "per_sample": ["images"], "sentinels": [-200], "builder": "b.py:build"}
    data = {"class": "P", "image_token": "<image>", "output_keys": ["input_ids"],
            "data_format": {"chat": chat, "media": media}, "audio": audio, "sample_format": sample}
    proc = ProcessorFacts.from_dict(data)
    assert proc.to_dict() == data  # the file's bytes do not move
    assert isinstance(proc.chat_format, ChatSlots) and proc.chat_format.end_of_turn == "<e>"
    assert ChatSlots.from_dict(chat).to_dict() == chat and "audio_item" not in chat  # image models' facts as before
    assert proc.media_format == MediaFacts("<bos>", {"7": 1}, None, ["pixel_values"])
    assert proc.audio_facts.sampling_rate == 16000 and proc.audio_facts.to_dict() == audio
    assert proc.form == SampleForm(kind="recipe", builder="b.py:build", per_sample=["images"])  # others: the code's
    none = ProcessorFacts.from_dict({"class": "P", "data_format": None})
    assert none.chat_format is None and none.media_format is None and none.audio_facts is None
    assert none.form.kind == "" and none.form.builder is None

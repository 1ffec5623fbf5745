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

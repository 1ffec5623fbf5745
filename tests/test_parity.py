"""Data parity (hooks/data/parity.py, hooks/data/batch.py, hooks/data/candidates.py).

Tier 1: the batch comparison on hand-made batches with a real tokenizer, the label-mask rule, the
recommendation from verdicts, the cache key, and the evidence fork's mechanics. Tier 2: the whole
check in a real checkout (in-repo templates and derived ones), the copy-time evidence reused after
rendering, and a forced wrong template stopping the copy before the smoke.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from hooks.data import parity
from hooks.data.batch_spec import BatchSpec
from hooks.data.candidates import Candidate, candidates, recommend
from hooks.data.parity import ParityResult
from hooks.model.facts import ModelFacts
from hooks.render import evidence
from tests.model_facts import stand_in_answers_facts, stand_in_facts

ANSWER = "The image is red."


@pytest.fixture(scope="module")
def qwen_tokenizer(tiny_models):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_models("qwen2_5_vl")))


def _chat_ids(tokenizer, answer: str = ANSWER) -> list[int]:
    text = ("<|im_start|>user\n<|vision_start|><|image_pad|><|image_pad|><|vision_end|>What color?<|im_end|>\n"
            f"<|im_start|>assistant\n{answer}<|im_end|>\n")
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _batch(ids: list[int], labels: list[int], **extra):
    import torch

    return {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
            "labels": torch.tensor([labels]), **extra}


def _qwen_labels(tokenizer, ids: list[int], *, train_newline: bool = True) -> list[int]:
    """MindSpeed-MM's labels for ids: the answer slot (answer, <|im_end|>, "\\n") trained."""
    start = len(_chat_ids(tokenizer)) - len(tokenizer(f"{ANSWER}<|im_end|>\n", add_special_tokens=False)["input_ids"])
    labels = [-100] * start + ids[start:]
    return labels if train_newline else labels[:-1] + [-100]


def _compare(tokenizer, ours, own, forward_keys=("input_ids", "pixel_values"), kwargs=False):
    from hooks.data.batch import compare_sample

    return compare_sample("one image", ours, own, tokenizer, [ANSWER], "<|im_end|>", set(forward_keys), kwargs)


def test_own_trained_marks_the_answer_and_its_end_of_turn(qwen_tokenizer) -> None:
    from hooks.data.batch import own_trained

    ids = _chat_ids(qwen_tokenizer)
    trained = own_trained(qwen_tokenizer, ids, [ANSWER], "<|im_end|>")
    text = qwen_tokenizer.decode([t for t, m in zip(ids, trained, strict=True) if m])
    assert text == ANSWER + "<|im_end|>"


def test_identical_batches_match_and_a_trained_newline_is_noted(qwen_tokenizer) -> None:
    import torch

    ids = _chat_ids(qwen_tokenizer)
    pixels = torch.ones(4, 6)
    verdict, notes = _compare(qwen_tokenizer, _batch(ids, _qwen_labels(qwen_tokenizer, ids), pixel_values=pixels),
                              _batch(ids, ids, pixel_values=pixels.clone()))
    assert verdict == "match"
    assert any("whitespace '\\n'" in n for n in notes)


def test_a_note_several_samples_share_is_one_line_naming_them() -> None:
    from hooks.data.batch import by_sample

    notes = ["image processor P on both sides", "one image: also trains the whitespace '\\n'",
             "one image: also passes ['rope_deltas']", "two images: also trains the whitespace '\\n'",
             "video: also trains the whitespace '\\n'", "text only: a stand-in image is added"]
    assert by_sample(notes) == ["image processor P on both sides",
                                "one image, two images, video: also trains the whitespace '\\n'",
                                "one image: also passes ['rope_deltas']", "text only: a stand-in image is added"]


def test_a_different_token_is_a_mismatch_in_words(qwen_tokenizer) -> None:
    ids = _chat_ids(qwen_tokenizer)
    other = _chat_ids(qwen_tokenizer, "The image is blue.")
    verdict, notes = _compare(qwen_tokenizer, _batch(other, _qwen_labels(qwen_tokenizer, other)), _batch(ids, ids))
    assert verdict == "mismatch" and "input_ids differ at token" in notes[0] and "blue" in notes[0]


def test_a_trained_prompt_token_and_an_untrained_answer_are_mismatches(qwen_tokenizer) -> None:
    ids = _chat_ids(qwen_tokenizer)
    labels = _qwen_labels(qwen_tokenizer, ids)
    prompt_trained = list(labels)
    prompt_trained[2] = ids[2]
    verdict, notes = _compare(qwen_tokenizer, _batch(ids, prompt_trained), _batch(ids, ids))
    assert verdict == "mismatch" and "is trained but is prompt" in notes[0]
    no_eot = list(labels)
    no_eot[-2] = -100  # <|im_end|>
    verdict, notes = _compare(qwen_tokenizer, _batch(ids, no_eot), _batch(ids, ids))
    assert verdict == "mismatch" and "is not trained" in notes[0]


def test_media_keys_missing_different_or_unknown(qwen_tokenizer) -> None:
    import torch

    ids = _chat_ids(qwen_tokenizer)
    labels = _qwen_labels(qwen_tokenizer, ids)
    own = _batch(ids, ids, pixel_values=torch.ones(4, 6))
    verdict, notes = _compare(qwen_tokenizer, _batch(ids, labels), own)
    assert verdict == "mismatch" and "lacks 'pixel_values'" in notes[0]
    verdict, notes = _compare(qwen_tokenizer, _batch(ids, labels, pixel_values=torch.zeros(4, 6)), own)
    assert verdict == "mismatch" and "'pixel_values' differs" in notes[0] and "by up to 1" in notes[0]
    stray = _batch(ids, labels, pixel_values=torch.ones(4, 6), rope_deltas=torch.zeros(1, 1))
    assert _compare(qwen_tokenizer, stray, own)[0] == "mismatch"
    verdict, notes = _compare(qwen_tokenizer, stray, own, kwargs=True)
    assert verdict == "match" and any("through **kwargs" in n for n in notes)


def test_text_only_batch_needs_a_masked_stand_in_image() -> None:
    import torch

    from hooks.data.batch import text_only_check

    ids = list(range(10))
    fake = {"input_ids": torch.tensor([ids + [7, 7]]), "attention_mask": torch.tensor([[1] * 10 + [0, 0]]),
            "labels": torch.tensor([[-100] * 8 + [1, 2, -100, -100]]), "pixel_values": torch.ones(2, 3)}
    assert text_only_check(fake, 10, True)[0] == "match"
    assert text_only_check({k: v for k, v in fake.items() if k != "pixel_values"}, 10, True)[0] == "mismatch"
    attended = {**fake, "attention_mask": torch.ones(1, 12, dtype=torch.long)}
    assert text_only_check(attended, 10, True)[0] == "mismatch"


# --- candidates and the recommendation --------------------------------------------------------------


def _facts(model_type: str, problems: list[str] | None = None) -> ModelFacts:
    chat = None if problems is None else {"problems": problems, "image_item": "<image>"}
    return stand_in_facts(model_type, {"data_format": {"chat": chat, "media": {"item_prefix": ""}}
                                       if chat is not None else None})


def test_candidates_try_the_family_template_first_then_the_derived_one() -> None:
    assert candidates(_facts("glm4v", []), "glm") == [Candidate("a", "glm4.1v", "qwen3vl"),
                                                      Candidate("b", "glm", "qwen3vl")]
    assert candidates(_facts("llava", []), "x") == [Candidate("b", "x", "qwen3vl")]
    assert candidates(_facts("emu3", ["not in place"]), "x") == []


def test_the_first_match_is_recommended_with_what_failed_before_it() -> None:
    a, b = Candidate("a", "glm4.1v", "qwen3vl"), Candidate("b", "glm", "qwen3vl")
    tried = [(a, ParityResult("mismatch", ["one image: input_ids differ at token 40"])), (b, ParityResult("match"))]
    choice = recommend(_facts("glm4v", []), tried)
    assert choice.branch == "b" and choice.template == "glm"
    assert "'glm4.1v'" in choice.reason and "one image: input_ids differ at token 40" in choice.reason
    none = recommend(_facts("glm4v", []), [(a, ParityResult("mismatch", ["x differs"]))])
    assert none.branch == "c" and "x differs" in none.reason


# --- cache and evidence -----------------------------------------------------------------------------


@pytest.fixture
def checkout_and_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A model folder and a checkout's data code: the files a verdict depends on (nothing is run)."""
    monkeypatch.setenv("MSMM_CACHE", str(tmp_path / "cache"))
    model, data = tmp_path / "model", tmp_path / "co" / "mindspeed_mm" / "fsdp" / "data"
    model.mkdir()
    data.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"w")
    (data / "template.py").write_text("A = 1\n")
    return tmp_path / "co", model


def test_parity_key_follows_the_inputs_but_not_the_weights(checkout_and_model: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    dest, model = checkout_and_model
    plugin = tmp_path / "data_plugin_x.py"
    plugin.write_text("SLOT = 1\n")
    config = {"data": {"dataset_param": {"basic_parameters": {"template": "qwen2vl", "dataset": "a.json"}}}}
    key = parity.parity_key(dest, model, config, [plugin], BatchSpec(), "python3")
    (model / "model.safetensors").write_bytes(b"other weights")
    assert parity.parity_key(dest, model, config, [plugin], BatchSpec(), "python3") == key
    moved = {"data": {"dataset_param": {"basic_parameters": {"template": "qwen2vl", "dataset": "b.json"}}}}
    assert parity.parity_key(dest, model, moved, [plugin], BatchSpec(), "python3") == key  # samples replace data
    other = {"data": {"dataset_param": {"basic_parameters": {"template": "glm4.1v"}}}}
    assert parity.parity_key(dest, model, other, [plugin], BatchSpec(), "python3") != key
    assert parity.parity_key(dest, model, config, [plugin], BatchSpec(), "/other/python") != key
    plugin.write_text("SLOT = 2\n")
    assert parity.parity_key(dest, model, config, [plugin], BatchSpec(), "python3") != key
    (dest / "mindspeed_mm" / "fsdp" / "data" / "template.py").write_text("A = 22\n")
    assert parity.parity_key(dest, model, config, [], BatchSpec(), "python3") != parity.parity_key(
        dest, model, config, [plugin], BatchSpec(), "python3")


def test_only_verdicts_are_stored_and_only_for_the_same_packages(checkout_and_model: tuple[Path, Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    parity.store_verdict("k1", ParityResult("error", ["transient"]))
    assert parity.load_cached_verdict("k1") is None
    parity.store_verdict("k2", ParityResult("match", ["fine"]))
    assert parity.load_cached_verdict("k2") == ParityResult("match", ["fine"])
    monkeypatch.setattr(parity, "_env_versions", lambda: {"transformers": "9.9.9"})
    assert parity.load_cached_verdict("k2") is None


def test_cli_outside_a_checkout_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answers = tmp_path / "a.yml"
    answers.write_text("model_id: x\nmodel_path: /nowhere\ndata_branch: a\nchat_template: qwen2vl\n")
    assert parity.main([str(answers), "--dest", str(tmp_path)]) == 0
    assert "cannot run here: destination is not a MindSpeed-MM checkout" in capsys.readouterr().out


# --- tier 2 -----------------------------------------------------------------------------------------


def _evidence(mm_home: Path, tiny_models, arch: str, tmp_path: Path) -> dict:
    from hooks.framework.environment import framework_unavailable
    from hooks.probe import probe

    model = tiny_models(arch)
    facts = json.loads(probe(model).to_json(with_timings=False))
    answers = {"model_id": f"ev_{arch}", "model_path": str(model), "python": sys.executable, "model_facts": facts}
    return evidence.gather_evidence(mm_home, answers, framework_unavailable(mm_home)[1])


@pytest.mark.tier2
def test_qwen_keeps_its_in_repo_template(mm_home: Path, tiny_models, tmp_path: Path) -> None:
    evidence = _evidence(mm_home, tiny_models, "qwen2_5_vl", tmp_path)
    assert [c.verdict for c in evidence.candidates] == ["match"]
    assert evidence.recommended.branch == "a" and evidence.recommended.template == "qwen2vl"


@pytest.mark.tier2
def test_glm41v_in_repo_template_is_not_the_models_format(mm_home: Path, tiny_models, tmp_path: Path) -> None:
    """The settled GLM question: the in-repo Reasoning template trains a think block and an EOS that the
    model's own chat template never writes; the template derived from it matches."""
    evidence = _evidence(mm_home, tiny_models, "glm4v", tmp_path)
    verdicts = [(c.template, c.verdict) for c in evidence.candidates]
    assert verdicts == [("glm4.1v", "mismatch"), ("ev_glm4v", "match")], evidence
    assert evidence.recommended.branch == "b"


@pytest.mark.tier2
def test_a_forced_wrong_template_stops_before_the_smoke(mm_home: Path, tiny_models, template_src: Path,
                                                        tmp_path: Path) -> None:
    from tests.copier_run import changed_paths, copy, mm_checkout

    checkout = mm_checkout(mm_home, tmp_path)
    done = copy(checkout, skip_tasks=False, template=template_src, model_id="wrong_tpl",
                model_path=tiny_models("gemma3"), data_branch="a", chat_template="qwen2vl")
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    # Qwen2-VL's template on Gemma 3: MindSpeed-MM's data path raises (no video processor). That is "could
    # not evaluate", never a mismatch, and a data path that cannot be built stops the copy before the smoke.
    assert "data parity: ERROR" in out and re.search(r"error: data parity: one image: could not evaluate: ", out), \
        out[-4000:]
    assert "cannot be built" in out and "framework smoke" not in out
    assert changed_paths(checkout)  # the scaffold is written (and the message says how to remove it)
    assert "rm -r .copier-answers/wrong_tpl.yml" in out


def test_candidate_yaml_renders_with_the_checkouts_facts_and_no_memory_plan(tmp_path: Path) -> None:
    """The copy-time evidence renders each candidate's YAML outside copier (strict undefined): the answers it has
    then carry no memory plan or loading choice yet, and the framework facts come from the checkout."""
    import yaml

    facts = stand_in_answers_facts(
        architecture="Qwen2_5_VLForConditionalGeneration", attention={"flash_attention_2": True},
        plan={"apply_modules": ["model.visual", "lm_head"], "recompute_modules": ["model.layers.{*}"],
              "freeze_proposal": ["model.visual"]})
    answers = {"model_id": "m", "model_facts": facts, "model_path": "/m", "trust_remote_code": False}
    config = evidence.candidate_config(tmp_path, Candidate("a", "qwen2vl", "qwen3vl"), answers, tmp_path)
    assert config["features"]["recompute_plan"]["apply_modules"] == ["model.layers.{*}"]
    assert config["training"]["init_model_with_meta_device"] is True  # no plan: meta init + load, as before
    assert yaml.safe_dump(config)


def test_a_plan_without_recompute_blocks_turns_recompute_off(tmp_path: Path) -> None:
    """Issue 21: every block's forward refuses ``past_key_values``; the YAML said ``recompute: true`` with
    ``apply_modules:`` null, which the trainer's schema rejects ('Input should be a valid list')."""
    facts = stand_in_answers_facts(
        architecture="Qwen2_5_VLForConditionalGeneration", attention={"flash_attention_2": True},
        plan={"apply_modules": ["model.visual", "lm_head"], "recompute_modules": [], "recompute_left_out": ["Block"],
              "freeze_proposal": ["model.visual"]})
    answers = {"model_id": "m", "model_facts": facts, "model_path": "/m", "trust_remote_code": False}
    config = evidence.candidate_config(tmp_path, Candidate("a", "qwen2vl", "qwen3vl"), answers, tmp_path)
    assert config["features"]["recompute"] is False and "recompute_plan" not in config["features"]

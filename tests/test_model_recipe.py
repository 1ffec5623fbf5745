"""The model card's recipe as a convention, and processors resolved honestly (issue 32).

On the tiny FastVLM-0.5B built from a mirror of its hub folder (``hooks.tiny.published``; skipped without the
mirror or timm): LLaVA's original code, no processor (``AutoProcessor`` resolves the config class
``LlavaConfig`` by name to transformers' ``LlavaProcessor``, which cannot load), the image processor built
inside the vision tower, the sentinel -200 spliced by the card's inline quick-start. Small folders written
here check the resolution rule without a mirror.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hooks.data.resolution import names_processor
from hooks.tiny import published


@pytest.fixture(scope="module")
def fastvlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return published.build("fastvlm_0_5b", tmp_path_factory.mktemp("published") / "fastvlm_0_5b")
    except published.MirrorMissing as exc:
        pytest.skip(str(exc))


def _folder(path: Path, config: dict, *files: str) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    for name in files:
        (path / name).write_text("{}")
    return path


def test_what_names_a_processor(tmp_path: Path) -> None:
    """A built-in config, a processor file or an auto_map entry names one; a remote config alone names none."""
    remote = {"model_type": "llava_qwen2", "auto_map": {"AutoConfig": "llava_qwen.LlavaConfig"}}
    assert names_processor(_folder(tmp_path / "a", {"model_type": "qwen2_vl"})) == "its config is a transformers class"
    assert names_processor(_folder(tmp_path / "b", remote)) == ""
    assert names_processor(_folder(tmp_path / "c", remote, "preprocessor_config.json")) == "preprocessor_config.json"
    named = {**remote, "auto_map": {**remote["auto_map"], "AutoProcessor": "processing_x.XProcessor"}}
    assert names_processor(_folder(tmp_path / "d", named)) == "config.json's auto_map"


def test_a_guessed_processor_is_no_processor_with_its_cause(fastvlm: Path) -> None:
    """AutoProcessor fails on a processor the release never named: "no processor", the cause recorded, and no
    advice to copy files the release does not have (the probe used to stop here)."""
    from hooks.data.facts import processor_facts

    facts = processor_facts(fastvlm, trust_remote_code=True)
    assert facts["missing"] and "unloadable" not in facts
    assert "the release names none" in facts["error"] and "LlavaConfig" in facts["error"]
    assert "OSError" in facts["error"] and "copy the processor" not in facts["error"]


def test_the_recipe_is_read_off_the_card_and_run_on_the_weightless_build(fastvlm: Path) -> None:
    """The card's quick-start, run with a record's turn and image: what reaches generate holds the sentinel where
    the image goes and the tower's own preprocessing; the sample appends the answer and the chat template's end of
    turn, trained; later turns follow the template; a text-only sample has no sentinel and a stand-in's media."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from PIL import Image
    from transformers import AutoTokenizer

    from hooks.data.model_recipe import inside_model, recipe_facts
    from hooks.data.records import dataset_runtime
    from hooks.model.loading import load_config_and_class

    _, cls, _ = load_config_and_class(fastvlm, trust_remote_code=True)
    forward = ["input_ids", "attention_mask", "labels", "images", "image_sizes"]
    facts = recipe_facts(cls, fastvlm, forward, True)
    fmt = facts["sample_format"]
    assert facts["problems"] == [] and fmt == {"kind": "recipe", "recipe_block": 0, "end_of_turn": "<|im_end|>\n",
                                               "per_sample": ["images"], "sentinels": [-200]}
    assert facts["inside_model"] == "model.vision_tower.image_processor (CLIPImageProcessor)"
    data = dataset_runtime()
    tokenizer = AutoTokenizer.from_pretrained(fastvlm)
    model = data.recording_model(cls, str(fastvlm))
    assert inside_model(model).startswith("model.vision_tower")
    recipe = data.ModelRecipe(tokenizer, model, data.recipe_code((fastvlm / "README.md").read_text(), 0))
    form = data.SampleFormat(kind="recipe", end_of_turn=fmt["end_of_turn"], per_sample=("images",), recipe_block=0)
    red = Image.new("RGB", (64, 48), "red")
    turns = [("user", "<image>What color?"), ("assistant", "Red."), ("user", "Sure?"), ("assistant", "Yes.")]
    sample = data.build_sample(recipe, form, turns, [red], 1 << 20)
    ids, labels = sample["input_ids"][0], sample["labels"][0]
    own = data.run_recipe(recipe, "<image>What color?", [red])
    prompt = own["input_ids"][0]
    assert ids[:len(prompt)].tolist() == prompt.tolist() and int((prompt == -200).sum()) == 1
    assert bool((labels[:len(prompt)] == -100).all())
    assert tokenizer.decode(ids[labels != -100]) == "Red.<|im_end|>\nYes.<|im_end|>\n"
    assert sample["images"].shape == (1, 3, 1024, 1024) and bool((sample["images"] == own["images"]).all())
    text = data.build_sample(recipe, form, [("user", "Hi."), ("assistant", "Hello.")], [], 1 << 20)
    assert int((text["input_ids"] < 0).sum()) == 0 and "images" not in text
    assert tokenizer.decode(text["input_ids"][0]).endswith("<|im_start|>user\nHi.<|im_end|>\n<|im_start|>assistant\n"
                                                           "Hello.<|im_end|>\n")
    batch = data.collate([sample, text], tokenizer.pad_token_id, frozenset(["input_ids", "attention_mask", "images"]),
                         data.stand_ins(recipe, form))
    assert isinstance(batch["images"], list) and len(batch["images"]) == 2  # one entry per sample, as forward takes
    with pytest.raises(ValueError, match="the model card's recipe takes one image"):
        data.build_sample(recipe, form, [("user", "<image><image>Compare."), ("assistant", "Same.")], [red, red], 999)
    with pytest.raises(ValueError, match="the model card's recipe writes its own system prompt"):
        data.build_sample(recipe, form, [("system", "Be brief."), *turns[:2]], [red], 999)


def test_the_recorded_sample_trains_through_the_models_own_forward(fastvlm: Path) -> None:
    """The recipe's sample, as the plugin collates it, goes through the release's own forward: the sentinel is
    replaced by image features, labels are extended by the model itself, the loss is finite and backpropagates."""
    import math

    import torch
    from PIL import Image
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hooks.data.records import dataset_runtime
    from hooks.model.loading import load_config_and_class

    _, cls, _ = load_config_and_class(fastvlm, trust_remote_code=True)
    data = dataset_runtime()
    tokenizer = AutoTokenizer.from_pretrained(fastvlm)
    recipe = data.ModelRecipe(tokenizer, data.recording_model(cls, str(fastvlm)),
                              data.recipe_code((fastvlm / "README.md").read_text(), 0))
    form = data.SampleFormat(kind="recipe", end_of_turn="<|im_end|>\n", per_sample=("images",), recipe_block=0)
    samples = [data.build_sample(recipe, form, [("user", "<image>What color?"), ("assistant", "Red.")],
                                 [Image.new("RGB", (64, 48), "red")], 1 << 20),
               data.build_sample(recipe, form, [("user", "Hi."), ("assistant", "Hello.")], [], 1 << 20)]
    batch = data.collate(samples, tokenizer.pad_token_id, frozenset(["input_ids", "attention_mask", "images"]),
                         data.stand_ins(recipe, form))
    model = AutoModelForCausalLM.from_pretrained(fastvlm, trust_remote_code=True, dtype=torch.float32)
    out = model(**batch)
    assert math.isfinite(out.loss.item())
    out.loss.backward()
    assert model.get_model().mm_projector[0].weight.grad.abs().sum() > 0  # the image reached the projector


def test_a_prompt_builder_stands_in_for_a_missing_card(tmp_path: Path) -> None:
    """Without the card nothing builds a sample: the probe asks for a prompt builder; the skeleton states the
    model's figures; filled with the card's steps it is the recipe convention's code, checked on a test image."""
    import subprocess
    import sys

    from hooks.data.prompt_builder import is_prompt_builder
    from hooks.probe import probe
    from tests.test_published_remote import CARD_STEPS

    try:
        folder = published.build("fastvlm_0_5b_nocard", tmp_path / "fastvlm_0_5b_nocard")
    except published.MirrorMissing as exc:
        pytest.skip(str(exc))
    facts = json.loads(probe(folder, trust_remote_code=True).to_json(with_timings=False))["processor"]
    assert facts["needs_builder"] is True and facts["builder_contract"] == "prompt"
    builder = tmp_path / "my_builder.py"
    subprocess.run([sys.executable, "-m", "hooks.data.builder", str(folder), "--skeleton", str(builder), "--contract",
                    "prompt"], check=True, capture_output=True, cwd=Path(__file__).resolve().parent.parent)
    text = builder.read_text()
    assert "IMAGE_TOKEN_INDEX = -200" in text and "the tokenizer has a chat template" in text
    builder.write_text(text.replace("    raise NotImplementedError(\"write the model card's inference recipe here\")\n",
                                    CARD_STEPS))
    from hooks.data.builder import load_builder

    assert is_prompt_builder(load_builder(f"{builder}:build_prompt"))
    facts = json.loads(probe(folder, trust_remote_code=True, sample_builder=f"{builder}:build_prompt")
                       .to_json(with_timings=False))["processor"]
    assert facts["problems"] == [] and facts["sample_format"] == {
        "kind": "recipe", "recipe_block": -1, "end_of_turn": "<|im_end|>\n", "per_sample": ["images"],
        "sentinels": [-200], "builder": f"{builder}:build_prompt"}

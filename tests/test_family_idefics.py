"""Idefics-like, Mllama, Gemma 3n and VQ families (``hooks.tiny.idefics``): builds, plans and shrink.

Every architecture is built once per session (``tiny_models``), reloaded through the Auto classes
and trained on the contract smoke's own encoding of one image + one answer. The shrink tests start
from the tiny build and from the family's transformers *default* config with the tiny tokenizer and
processor next to it; the default's token ids (and Gemma 3n's id ranges) are re-pointed at the tiny
tokenizer, and the processor is given the default's image geometry (the shrinker keeps geometry by
design). Idefics3 and SmolVLM default vision geometries do not pixel-shuffle (7 x 7 patches, factor
2), so those two take a released geometry instead. The FSDP2 contract smoke of every architecture
(VQ, generation and audio parameters without gradients included) runs in tests/test_matrix.py.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from hooks.tiny import all_builders
from hooks.tiny.idefics import BUILDERS
from tests.samples import encoded_sample, feature_token_id, tiny_sample, train_once

ARCHS = tuple(BUILDERS)
# Image placeholder tokens for one 64x64 picture: locks each family's geometry.
IMAGE_TOKENS = {
    "idefics2": 4,  # perceiver latents
    "idefics3": 20,  # 2x2 tiles + global tile, 4 pixel-shuffled tokens each
    "smolvlm": 20,
    "mllama": 1,  # one <|image|> per image; the tiles reach the text through cross-attention
    "gemma3n": 4,
    "chameleon": 16,  # 4x4 VQ codes
    "emu3": 20,  # 4 rows of 4 codes + an end-of-line token each
    "janus": 576,  # fixed by JanusProcessor
}
# Parameters that get no gradient from an image + text batch, by name prefix.
NO_GRAD = {
    "gemma3n": ("model.audio_tower.", "model.embed_audio."),
    "chameleon": ("model.vqmodel.",),
    # transformers 4.57.1: Emu3ForConditionalGeneration.forward does not pass pixel_values on (see below)
    "emu3": ("model.vqmodel.",),
    "janus": ("model.vqmodel.", "model.generation_"),
}
EXPECTED_APPLY = {
    "idefics2": [
        "model.vision_model.encoder.layers.{*}", "model.vision_model",
        "model.connector.perceiver_resampler.layers.{*}", "model.connector",
        "model.text_model.embed_tokens", "model.text_model.layers.{*}", "model.text_model", "lm_head",
    ],
    "idefics3": [
        "model.vision_model.encoder.layers.{*}", "model.vision_model", "model.connector",
        "model.text_model.embed_tokens", "model.text_model.layers.{*}", "model.text_model", "lm_head",
    ],
    "mllama": [
        "model.vision_model.transformer.layers.{*}", "model.vision_model.global_transformer.layers.{*}",
        "model.vision_model", "model.multi_modal_projector",
        "model.language_model.embed_tokens", "model.language_model.layers.{*}", "model.language_model", "lm_head",
    ],
    # Tied lm_head: the root owns embed_tokens and lm_head; the timm tower is one unit (no ModuleList).
    "gemma3n": [
        "model.audio_tower.conformer.{*}", "model.audio_tower", "model.vision_tower", "model.embed_vision",
        "model.embed_audio", "model.language_model.layers.{*}", "model.language_model.embed_tokens_per_layer",
        "model.language_model.altup_projections.{*}", "model.language_model.altup_unembed_projections.{*}",
    ],
    # The VQ tokenizer is entered through .encode(): never its own unit, its enclosing unit owns it.
    "chameleon": ["model.embed_tokens", "model.layers.{*}", "model", "lm_head"],
    "emu3": [
        "model.vqmodel.encoder.time_res_stack.{*}", "model.vqmodel.decoder.time_res_stack.{*}",
        "model.vqmodel.decoder.middle_block", "model.vqmodel.decoder.up_block",
        "model.text_model.embed_tokens", "model.text_model.layers.{*}", "model.text_model", "lm_head",
    ],
    "janus": [
        "model.vision_model.encoder.layers.{*}", "model.vision_model", "model.aligner",
        "model.generation_embeddings", "model.generation_aligner", "model.generation_head",
        "model.language_model.embed_tokens", "model.language_model.layers.{*}", "model.language_model", "lm_head",
    ],
}
EXPECTED_APPLY["smolvlm"] = EXPECTED_APPLY["idefics3"]


def test_registered() -> None:
    assert set(ARCHS) <= set(all_builders())
    assert len(ARCHS) == 8


@pytest.mark.parametrize("arch", ARCHS)
def test_builds_reloads_and_trains(arch: str, tiny_models) -> None:
    model_dir = tiny_models(arch)
    config, processor, batch = tiny_sample(model_dir)
    assert feature_token_id(config) == processor.tokenizer.convert_tokens_to_ids(processor.image_token)
    image_tokens = batch["input_ids"] == feature_token_id(config)
    assert int(image_tokens.sum()) == IMAGE_TOKENS[arch]
    assert int((batch["labels"] != -100).sum()) > 0
    loss, no_grad = train_once(model_dir, batch)
    assert math.isfinite(loss) and loss > 0
    assert [n for n in no_grad if not n.startswith(NO_GRAD.get(arch, ()))] == []


def test_chameleon_template_lives_on_the_tokenizer(tiny_models) -> None:
    """ChameleonProcessor.__init__ takes no chat_template, so 4.57.1 drops chat_template.jinja on load."""
    processor, batch = encoded_sample(tiny_models("chameleon"))
    assert processor.tokenizer.chat_template and (tiny_models("chameleon") / "chat_template.jinja").is_file()
    image = "<racm3:break>" + "<image>" * IMAGE_TOKENS["chameleon"] + "<eoss>"  # codes replace <image> in the model
    assert processor.tokenizer.decode(batch["input_ids"][0]).startswith(f"<s>USER: {image}\nWhat colour")


def test_gemma3n_token_ids_follow_the_embedding_ranges(tiny_models) -> None:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_models("gemma3n"))
    text, vision, audio = config.text_config, config.vision_config, config.audio_config
    assert vision.vocab_offset == text.vocab_size_per_layer_input == config.eoi_token_id
    assert vision.vocab_offset < config.image_token_id < audio.vocab_offset == config.eoa_token_id
    assert audio.vocab_offset + audio.vocab_size == text.vocab_size
    assert config.boi_token_id < vision.vocab_offset and config.vision_soft_tokens_per_image == 4


def test_emu3_forward_drops_pixel_values_in_4_57_1(tiny_models) -> None:
    """Emu3ForConditionalGeneration.forward does not hand pixel_values/image_sizes to Emu3Model
    (fixed upstream by huggingface/transformers#47948): the image does not change the loss, so a
    passing smoke trains on text only. Fails once transformers is upgraded past the fix."""
    import torch
    from transformers import AutoModelForImageTextToText

    model_dir = tiny_models("emu3")
    _, batch = encoded_sample(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        with_image = model(**batch).loss
        without = model(**{k: v for k, v in batch.items() if k not in ("pixel_values", "image_sizes")}).loss
    assert torch.equal(with_image, without)


# Plans -------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_plan(arch: str, tiny_models) -> None:
    from transformers import AutoModelForImageTextToText

    from hooks.model.matching import module_name_match
    from hooks.probe import probe

    facts = probe(tiny_models(arch), with_processor=False)
    plan = facts.plan
    assert plan.problems == []
    assert plan.apply_modules == EXPECTED_APPLY[arch]
    assert plan.ep_modules == []
    assert facts.tie_word_embeddings == (arch == "gemma3n")
    names = [name for name, _ in AutoModelForImageTextToText.from_pretrained(tiny_models(arch)).named_modules()]
    for pattern in plan.apply_modules + plan.recompute_modules:
        assert any(module_name_match(pattern, name) for name in names), pattern


def test_mllama_mixed_layer_list_is_one_block_container(tiny_models) -> None:
    """Self- and cross-attention decoder layers share ``language_model.layers``: one unit per layer."""
    from transformers import AutoModelForImageTextToText

    from hooks.probe import probe

    model = AutoModelForImageTextToText.from_pretrained(tiny_models("mllama"))
    kinds = [type(layer).__name__ for layer in model.model.language_model.layers]
    assert kinds == ["MllamaSelfAttentionDecoderLayer", "MllamaCrossAttentionDecoderLayer"]
    plan = probe(tiny_models("mllama"), with_processor=False).plan
    assert "model.language_model.layers.{*}" in plan.recompute_modules
    assert plan.language_tower == "model.language_model" and plan.vision_towers == ["model.vision_model"]


def test_vq_tokenizer_is_never_its_own_unit() -> None:
    """Chameleon calls ``vqmodel.encode()``: as an FSDP2 unit its weights would stay sharded DTensors."""
    from hooks.model.plan import ModuleInfo, ModuleTable, derive_plan

    spec = [("", "ForCG", 0, False), ("model", "ChameleonModel", 0, False),
            ("model.embed_tokens", "Embedding", 100, False), ("model.layers", "ModuleList", 0, True),
            ("model.layers.0", "ChameleonDecoderLayer", 50, False),
            ("model.layers.1", "ChameleonDecoderLayer", 50, False),
            ("model.norm", "RMSNorm", 1, False), ("model.vqmodel", "ChameleonVQVAE", 0, False),
            ("model.vqmodel.encoder", "Encoder", 40, False), ("lm_head", "Linear", 100, False)]
    totals = {name: sum(own for n, _, own, _ in spec if n == name or n.startswith(name + ".") or not name)
              for name, *_ in spec}
    table = ModuleTable(
        modules=[ModuleInfo(n, c, totals[n], own, is_list) for n, c, own, is_list in spec],
        no_split=["ChameleonDecoderLayer"], input_embeddings="model.embed_tokens", output_embeddings="lm_head",
    )
    plan = derive_plan(table)
    assert plan.apply_modules == ["model.embed_tokens", "model.layers.{*}", "model", "lm_head"]
    assert plan.problems == []


# Shrink --------------------------------------------------------------------------------------


def _tiny_ids(tiny: Any) -> dict[str, Any]:
    """Token ids of a tiny config: top-level ``*_token_id`` / ``*_token_index`` and the text level's."""
    top = {k: v for k, v in tiny.items() if k.endswith(("_token_id", "_token_index")) and v is not None}
    text = tiny.get("text_config") or tiny
    return {**top, "text": {k: text[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in text}}


def _default_config(arch: str, tiny: dict[str, Any]) -> dict[str, Any]:
    """The family's transformers default config, token ids (and id ranges) re-pointed at the tiny tokenizer."""
    from transformers import AutoConfig

    data = AutoConfig.for_model(tiny["model_type"]).to_dict()
    data["architectures"] = tiny["architectures"]
    ids = _tiny_ids(tiny)
    text = data.get("text_config") or data
    text.update(ids.pop("text"))
    data.update(ids)
    if arch in ("chameleon", "emu3"):  # the codebook must match the image-code tokens of the vocabulary
        data["vocabulary_map"] = tiny["vocabulary_map"]
        for key in ("num_embeddings", "codebook_size"):
            if key in data["vq_config"]:
                data["vq_config"][key] = tiny["vq_config"][key]
    if arch == "gemma3n":  # text, vision and audio id ranges
        for level in ("text_config", "vision_config", "audio_config"):
            for key in ("vocab_size", "vocab_size_per_layer_input", "vocab_offset"):
                if key in tiny[level]:
                    data[level][key] = tiny[level][key]
    if arch == "mllama":  # MllamaTextConfig's default (rope_scaling None) does not build; the shrink fixes it
        assert data["text_config"]["rope_scaling"] is None
    if arch == "idefics3":  # Idefics3-8B-Llama3's geometry: 364 px / 14 px patches = 26 x 26 -> 169 tokens
        data["vision_config"].update(image_size=364, patch_size=14)
    if arch == "smolvlm":  # SmolVLM-256M's geometry: 512 px / 16 px = 32 x 32, shuffled by 4 -> 64 tokens
        data["vision_config"].update(image_size=512, patch_size=16)
        data["scale_factor"] = 4
    return data


def _processor_for_default(arch: str, processor: Any) -> Any:
    """Give the tiny processor the default config's image geometry (tokens per image, tile size)."""
    images = getattr(processor, "image_processor", None)
    if arch == "idefics2":
        processor.image_seq_len = 64  # Idefics2PerceiverConfig().resampler_n_latents
    elif arch in ("idefics3", "smolvlm"):
        side = 364 if arch == "idefics3" else 512
        processor.image_seq_len = 169 if arch == "idefics3" else 64
        images.size, images.max_image_size = {"longest_edge": side}, {"longest_edge": side}
    elif arch == "mllama":
        images.size = {"height": 448, "width": 448}
    elif arch == "gemma3n":  # 16 x 16 fused grid; 512 px (not the released 768) still yields it, in half the time
        processor.image_seq_length = 256
        images.size = {"height": 512, "width": 512}
    elif arch == "chameleon":
        processor.image_seq_length = 1024
        images.size, images.crop_size = {"shortest_edge": 512}, {"height": 512, "width": 512}
    elif arch == "janus":
        images.size = {"height": 384, "width": 384}
    return processor


def _default_model_dir(arch: str, tiny_dir: Path, dest: Path) -> Path:
    """Default config + the tiny tokenizer/processor (adapted to the default geometry), no weights."""
    from transformers import AutoProcessor

    from hooks.model.shrink import is_weight_file

    dest.mkdir(parents=True)
    for item in tiny_dir.iterdir():
        if item.is_file() and not item.name.startswith(".") and not is_weight_file(item.name):
            shutil.copy2(item, dest / item.name)
    tiny = json.loads((tiny_dir / "config.json").read_text())
    (dest / "config.json").write_text(json.dumps(_default_config(arch, tiny), indent=2))
    _processor_for_default(arch, AutoProcessor.from_pretrained(tiny_dir)).save_pretrained(dest)
    return dest


@pytest.mark.parametrize("source", ["tiny", "default"])
@pytest.mark.parametrize("arch", ARCHS)
def test_shrink_trains(arch: str, source: str, tiny_models, tmp_path: Path) -> None:
    from transformers import AutoConfig

    from hooks.model.shrink import shrink_model_dir

    src = tiny_models(arch)
    if source == "default":
        src = _default_model_dir(arch, src, tmp_path / "src")
    dest = shrink_model_dir(src, tmp_path / "dest")
    config = AutoConfig.from_pretrained(dest)
    assert (config.get_text_config().hidden_size, config.get_text_config().num_hidden_layers) == (64, 2)
    _, batch = encoded_sample(dest)
    assert batch["input_ids"].tolist() == encoded_sample(src)[1]["input_ids"].tolist()
    assert int((batch["input_ids"] == feature_token_id(config)).sum()) > 0
    loss, no_grad = train_once(dest, batch)
    assert math.isfinite(loss) and loss > 0
    assert [n for n in no_grad if not n.startswith(NO_GRAD.get(arch, ()))] == []


def test_shrunk_mllama_keeps_both_layer_kinds_and_a_valid_projector(tiny_models, tmp_path: Path) -> None:
    from transformers import AutoConfig

    from hooks.model.shrink import shrink_model_dir

    src = _default_model_dir("mllama", tiny_models("mllama"), tmp_path / "src")
    config = AutoConfig.from_pretrained(shrink_model_dir(src, tmp_path / "dest"))
    vision, text = config.vision_config, config.text_config
    assert text.cross_attention_layers == [1] and text.rope_scaling["rope_type"] == "default"
    assert (vision.attention_heads, vision.num_global_layers, vision.intermediate_layers_indices) == (2, 2, [0, 1])
    assert vision.vision_output_dim == vision.hidden_size * 3

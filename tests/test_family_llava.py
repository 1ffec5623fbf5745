"""LLaVA-like families (``hooks.tiny.llava``): tiny builds, token agreement, plans, shrink and the FSDP2 smoke.

Every architecture is built once per session (``tiny_models``), reloaded through the Auto
classes and trained on the contract smoke's own encoding of one image + one answer (chat
template, or the prompt-format hooks of paligemma / got_ocr2). The shrink tests start from the
family's transformers *default* config (published layout for perception_lm, whose default does
not build) with the tiny tokenizer/processor next to it; geometry and token ids are taken from
the tiny build, since the shrinker keeps those by design and the tiny processor must match them.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from hooks.tiny import all_builders
from hooks.tiny.llava import BUILDERS
from tests.samples import encoded_sample, tiny_sample, train_once

ARCHS = tuple(BUILDERS)
TIED = {"aya_vision", "cohere2_vision", "paligemma", "lfm2_vl"}
PROMPT_FORMAT = {"paligemma", "got_ocr2"}  # released without a chat template
# Image placeholder tokens for one 64x64 picture: locks each family's geometry.
IMAGE_TOKENS = {
    "llava": 16,
    "llava_next": 88,  # base tile + 2x2 AnyRes tiles (16 each) + 8 row-end newlines
    "llava_next_video": 88,
    "pixtral": 16,
    "mistral3": 4,  # 2x2 patch merge
    "aya_vision": 20,  # 4 tiles + global thumbnail, 4 tokens each
    "cohere2_vision": 20,
    "paligemma": 16,
    "lfm2_vl": 16,
    "perception_lm": 20,
    "got_ocr2": 256,  # released 1024 px / 16 px geometry, the processor's default pad count
}
CLIP_LAYERS = "model.vision_tower.vision_model.encoder.layers.{*}"
VISION_LAYERS = {
    "pixtral": "model.vision_tower.transformer.layers.{*}",
    "mistral3": "model.vision_tower.transformer.layers.{*}",
    "perception_lm": "model.vision_tower.timm_model.blocks.{*}",
    "got_ocr2": "model.vision_tower.layers.{*}",
}
LANGUAGE_UNITS = ["model.language_model.embed_tokens", "model.language_model.layers.{*}", "model.language_model",
                  "lm_head"]
# LLaVA 1.5 / NeXT read the second-to-last CLIP layer: the last layer and post-layernorm stay unused.
UNUSED_PREFIXES = (
    "model.vision_tower.vision_model.encoder.layers.1.",
    "model.vision_tower.vision_model.post_layernorm.",
)
SECOND_TO_LAST = {"llava", "llava_next", "llava_next_video"}


# The model reads these towers' recorded hidden states; fully_shard's class swap would hide them.
HIDDEN_STATE_TOWERS = {"aya_vision", "cohere2_vision"}
# Vision blocks whose forward takes neither past_key_values nor **kwargs: not recompute targets.
NO_VISION_RECOMPUTE = {"llava", "llava_next", "llava_next_video", "perception_lm", "got_ocr2"}


def expected_units(arch: str) -> list[str]:
    """The FSDP plan the probe must derive (MindSpeed-MM example order)."""
    units = [VISION_LAYERS.get(arch, CLIP_LAYERS)]
    if arch == "got_ocr2":
        units.append("model.vision_tower.neck")
    units += ([] if arch in HIDDEN_STATE_TOWERS else ["model.vision_tower"]) + ["model.multi_modal_projector"]
    # Tied embeddings: the root owns embed_tokens and lm_head (a language-model unit would hold one side).
    return units + (["model.language_model.layers.{*}"] if arch in TIED else LANGUAGE_UNITS)


def test_registered() -> None:
    assert set(ARCHS) <= set(all_builders())
    assert len(ARCHS) == 11


@pytest.mark.parametrize("arch", ARCHS)
def test_builds_reloads_and_trains(arch: str, tiny_models) -> None:
    model_dir = tiny_models(arch)
    config, processor, batch = tiny_sample(model_dir)
    assert bool(processor.chat_template) == (arch not in PROMPT_FORMAT)
    assert int((batch["input_ids"] == processor.image_token_id).sum()) == IMAGE_TOKENS[arch]
    assert int((batch["labels"] != -100).sum()) > 0
    loss, no_grad = train_once(model_dir, batch)
    assert math.isfinite(loss) and loss > 0
    allowed = UNUSED_PREFIXES if arch in SECOND_TO_LAST else ()
    assert [n for n in no_grad if not n.startswith(allowed)] == []


def test_lfm2_vl_config_reloads_through_auto(tiny_models) -> None:
    """transformers 4.57.1 would save model_type "lfm2-vl", which AutoConfig does not know."""
    assert json.loads((tiny_models("lfm2_vl") / "config.json").read_text())["model_type"] == "lfm2_vl"


@pytest.mark.parametrize("arch", ARCHS)
def test_plan(arch: str, tiny_models) -> None:
    from transformers import AutoModelForImageTextToText

    from hooks.model.matching import module_name_match
    from hooks.probe import probe

    facts = probe(tiny_models(arch), with_processor=False)
    plan = facts.plan
    assert plan.problems == []
    assert plan.apply_modules == expected_units(arch)
    vision = [] if arch in NO_VISION_RECOMPUTE else [VISION_LAYERS.get(arch, CLIP_LAYERS)]
    assert plan.recompute_modules == [*vision, "model.language_model.layers.{*}"]
    assert plan.ep_modules == [] and plan.vision_towers == ["model.vision_tower"]
    assert plan.language_tower == "model.language_model"
    assert facts.tie_word_embeddings == (arch in TIED)
    names = [name for name, _ in AutoModelForImageTextToText.from_pretrained(tiny_models(arch)).named_modules()]
    for pattern in plan.apply_modules + plan.recompute_modules:
        assert any(module_name_match(pattern, name) for name in names), pattern


# Prompt-format encodings of the contract smoke -------------------------------------------------


def test_paligemma_encoding_labels_only_the_suffix(tiny_models) -> None:
    processor, batch = encoded_sample(tiny_models("paligemma"))
    tok = processor.tokenizer
    assert tok.decode(batch["input_ids"][batch["labels"] != -100]) == "It is red.<eos>"
    assert batch["token_type_ids"].sum() == (batch["labels"] != -100).sum()  # suffix tokens are type 1


def test_got_ocr2_encoding_appends_the_answer_turn(tiny_models) -> None:
    processor, batch = encoded_sample(tiny_models("got_ocr2"))
    ids = batch["input_ids"][0]
    assert processor.tokenizer.decode(ids[batch["labels"][0] != -100]) == "It is red.<|im_end|>"
    assert processor.tokenizer.decode(ids).endswith("<|im_start|>assistant\nIt is red.<|im_end|>")


# Shrinking the family's default config ------------------------------------------------------------

# Geometry and token ids: never changed by the shrinker, so taken from the tiny build to match its processor.
OVERLAY = (
    "architectures", "image_size", "patch_size", "num_patches", "spatial_merge_size",
    "downsample_factor", "image_grid_pinpoints", "vision_feature_select_strategy", "spatial_pool_stride",
    "projector_pooling_ratio", "image_seq_length", "video_seq_length", "image_token_index", "image_token_id",
    "video_token_index", "video_token_id", "pad_token_id", "bos_token_id", "eos_token_id",
)


def default_config(arch: str) -> dict[str, Any]:
    """The family's transformers default config (pixtral: the Pixtral-12B layout; perception_lm: PLM-1B's)."""
    import transformers as tf

    if arch == "pixtral":
        return tf.LlavaConfig(vision_config=tf.PixtralVisionConfig().to_dict(),
                              text_config=tf.MistralConfig().to_dict(), vision_feature_layer=-1).to_dict()
    if arch == "perception_lm":  # the default TimmWrapperConfig (resnet50, no model_args) does not build
        vision = {"architecture": "vit_pe_core_large_patch14_336", "num_classes": 0, "do_pooling": False,
                  "model_args": {"embed_dim": 1024, "depth": 23, "img_size": [448, 448], "ref_feat_shape": [32, 32],
                                 "global_pool": "", "use_post_transformer_norm": False}}
        text = tf.LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                              num_key_value_heads=8, head_dim=64, vocab_size=128256)
        return tf.PerceptionLMConfig(vision_config=vision, text_config=text.to_dict()).to_dict()
    classes = {
        "llava": tf.LlavaConfig, "llava_next": tf.LlavaNextConfig, "llava_next_video": tf.LlavaNextVideoConfig,
        "mistral3": tf.Mistral3Config, "aya_vision": tf.AyaVisionConfig, "cohere2_vision": tf.Cohere2VisionConfig,
        "paligemma": tf.PaliGemmaConfig, "lfm2_vl": tf.Lfm2VlConfig, "got_ocr2": tf.GotOcr2Config,
    }
    return classes[arch]().to_dict()


def overlay(dest: dict[str, Any], tiny: dict[str, Any]) -> None:
    """Copy geometry and token ids from the tiny config, level by level."""
    for key in OVERLAY:
        if key in tiny:
            dest[key] = tiny[key]
    if isinstance(dest.get("model_args"), dict):
        for key in ("img_size", "ref_feat_shape"):
            dest["model_args"][key] = tiny["model_args"][key]
    for key, value in tiny.items():
        if key.endswith("_config") and isinstance(value, dict) and isinstance(dest.get(key), dict):
            overlay(dest[key], value)


def default_model_dir(arch: str, tiny_dir: Path, dest: Path) -> Path:
    """The default config next to the tiny tokenizer/processor files (no weights)."""
    from hooks.model.shrink import is_weight_file

    dest.mkdir(parents=True)
    for item in tiny_dir.iterdir():
        if item.is_file() and item.name != "config.json" and not item.name.startswith("."):
            if not is_weight_file(item.name):
                shutil.copy2(item, dest / item.name)
    config = default_config(arch)
    tiny = json.loads((tiny_dir / "config.json").read_text())
    overlay(config, tiny)
    config["model_type"] = tiny["model_type"]  # lfm2_vl: the spelling AutoConfig knows
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    return dest


@pytest.mark.parametrize("arch", ARCHS)
def test_shrinks_family_default_config(arch: str, tiny_models, tmp_path: Path) -> None:
    from transformers import AutoConfig

    from hooks.model.shrink import shrink_model_dir

    src = default_model_dir(arch, tiny_models(arch), tmp_path / "src")
    dest = shrink_model_dir(src, tmp_path / "dest")
    config = AutoConfig.from_pretrained(dest)
    text = config.get_text_config()
    assert (text.hidden_size, text.num_hidden_layers) == (64, 2)
    assert json.loads((dest / "config.json").read_text())["model_type"] == json.loads(
        (src / "config.json").read_text())["model_type"]
    _, batch = encoded_sample(dest)
    loss, _ = train_once(dest, batch)
    assert math.isfinite(loss) and loss > 0


def test_family_fixes_shrink_projector_widths() -> None:
    """Widths outside the generic field names: top-level projector sizes, SAM's mlp_dim, timm model_args."""
    from hooks.model.shrink import shrink_config_dict
    from hooks.model.shrink_rules import Dims

    dims = Dims()
    assert shrink_config_dict(default_config("cohere2_vision"), dims)["alignment_intermediate_size"] == 256
    pali = shrink_config_dict(default_config("paligemma"), dims)
    assert pali["projection_dim"] == pali["vision_config"]["projection_dim"] == 64
    assert shrink_config_dict(default_config("lfm2_vl"), dims)["projector_hidden_size"] == 128
    got = shrink_config_dict(default_config("got_ocr2"), dims)["vision_config"]
    assert (got["mlp_dim"], got["output_channels"]) == (64, 32)
    args = shrink_config_dict(default_config("perception_lm"), dims)["vision_config"]["model_args"]
    assert (args["embed_dim"], args["depth"], args["num_heads"]) == (32, 2, 2)


def test_keep_model_type(tmp_path: Path) -> None:
    from hooks.model.shrink import keep_model_type

    (tmp_path / "src").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "src" / "config.json").write_text('{"model_type": "lfm2_vl"}')
    (tmp_path / "out" / "config.json").write_text('{"model_type": "lfm2-vl", "x": 1}')
    keep_model_type(tmp_path / "src", tmp_path / "out")
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == {"model_type": "lfm2_vl", "x": 1}


# The FSDP2 contract smoke of these architectures runs in tests/test_matrix.py (ranks forked, warm).

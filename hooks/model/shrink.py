"""Shrink a (possibly full-size) VLM directory into a tiny random-weight copy for smoke runs.

A smoke run must exercise the user's *real* model class, tokenizer, processor and
chat template, but cannot afford the real weights. We therefore keep every
non-weight file verbatim and rewrite only ``config.json``: few layers and small
widths, kept consistent across the text and vision sub-configs, then save random
weights built with the real class. Things that decide how many tokens an image
becomes (patch size, spatial merge, temporal patch, image size) and the vocabulary
(token ids must stay valid) are never changed, so the unchanged processor still
matches the shrunk model.

The config is handled as a dict walk over the config and all nested sub-configs
(``text_config``, ``vision_config``, ``llm_config``, ...) with rules keyed on well
known field names; what a single family needs beyond that lives in one small
function in ``FAMILY_FIXES``. Weights are never read.

``python -m hooks.model.shrink SRC DEST [--trust-remote-code] [--layers N] [--seed N]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hooks import exit_now

MARKER = ".shrink.json"
SHRINK_VERSION = 2  # 2: Qwen-VL keeps its resampler width (_fix_qwen_vl)

WEIGHT_SUFFIXES = (
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf", ".onnx", ".npz", ".pdparams",
)


@dataclass(frozen=True)
class Dims:
    """Target sizes. Text hidden 64 keeps a 150k vocabulary at ~10M params per embedding matrix."""

    layers: int = 2
    text_hidden: int = 64
    text_heads: int = 4
    text_kv_heads: int = 2
    text_ffn: int = 128
    moe_ffn: int = 32
    experts: int = 4
    top_k: int = 2
    shared_experts: int = 1
    vision_hidden: int = 32
    vision_heads: int = 2
    vision_ffn: int = 64


# Field names, grouped by meaning. Only these are touched; anything unknown is kept.
HIDDEN_KEYS = ("hidden_size", "d_model", "n_embd", "embed_dim")
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "depth")
HEAD_KEYS = ("num_attention_heads", "num_heads", "n_head", "n_heads")
KV_HEAD_KEYS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")
FFN_KEYS = ("intermediate_size", "ffn_dim", "n_inner", "d_ff")
MOE_FFN_KEYS = ("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size")
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_k")
SHARED_EXPERT_KEYS = ("n_shared_experts", "num_shared_experts")
# Layer-index lists that mark *some* layers as special: keep both kinds after shrinking.
SPECIAL_INDEX_KEYS = ("fullatt_block_indexes", "mlp_only_layers", "global_attn_indexes", "full_attn_idxs",
                      "cross_attention_layers")
# Layer-index lists that tap features from layers: keep as many taps as the depths allow.
TAP_INDEX_KEYS = ("deepstack_visual_indexes",)
# Hidden-state indexes into the vision tower's outputs (may be negative).
FEATURE_LAYER_KEYS = ("vision_feature_layer", "vision_feature_layers", "select_layer")
# Vision fields that must equal the (shrunk) text hidden size.
OUT_HIDDEN_KEYS = ("out_hidden_size",)
ROPE_KEYS = ("rope_scaling", "rope_parameters")
# Sub-dicts that are not model sub-configs.
NOT_SUBCONFIGS = frozenset(
    (*ROPE_KEYS, "auto_map", "id2label", "label2id", "task_specific_params", "quantization_config")
)
# Dropped: the random weights are never quantized.
DROP_KEYS = ("quantization_config", "compression_config")
# Dropped at every level: provenance that would make the output depend on the source path.
VOLATILE_KEYS = ("_name_or_path", "transformers_version")
TEXT_NAMES = ("text", "llm", "language", "lm_config", "decoder")
VISION_NAMES = ("vision", "visual", "image", "vit", "audio", "encoder", "perceiver", "vq")


# Small numeric helpers -----------------------------------------------------------------


def _is_int(value: Any) -> bool:
    """A plain integer field (per-stage lists of multi-stage towers are left to family fixes)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _first(d: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` present in ``d`` with an integer value."""
    return next((k for k in keys if _is_int(d.get(k))), None)


def _set_all(d: dict[str, Any], keys: tuple[str, ...], value: int) -> None:
    """Set every present integer key of a group, so aliases stay in agreement."""
    for key in keys:
        if _is_int(d.get(key)):
            d[key] = value


def scale_sections(sections: list[int], total: int) -> list[int]:
    """Rescale mRoPE sections to sum to ``total`` (largest remainder, each >= 1).

    Sections partition the rotary frequencies (head_dim/2, or less with partial
    rotary) among temporal/height/width; keeping their proportions keeps the
    model's position layout recognisable at any head_dim.
    """
    total = max(total, len(sections))
    old = sum(sections) or 1
    exact = [s * total / old for s in sections]
    out = [max(1, int(x)) for x in exact]
    order = sorted(range(len(sections)), key=lambda i: (-(exact[i] - int(exact[i])), i))
    k = 0
    while sum(out) < total:
        out[order[k % len(order)]] += 1
        k += 1
    while sum(out) > total:
        i = max(range(len(out)), key=lambda j: (out[j], -j))
        out[i] -= 1
    return out


def remap_special(indexes: list[int], old_n: int, new_n: int) -> list[int]:
    """Map "special layer" indexes into a shallower stack, keeping both special and plain layers.

    E.g. Qwen2.5-VL full-attention blocks [7, 15, 23, 31] of 32 become [1] of 2:
    one window-attention block and one full-attention block, as in the original.
    """
    special = sorted({i for i in indexes if 0 <= i < old_n})
    if not special:
        return []
    if len(special) >= old_n:
        return list(range(new_n))
    scale = (new_n - 1) / max(old_n - 1, 1)
    mapped = sorted({min(new_n - 1, round(i * scale)) for i in special})
    while len(mapped) >= new_n:
        mapped.pop(0)
    return mapped


def remap_taps(indexes: list[int], count: int, new_n: int) -> list[int]:
    """Spread ``count`` feature taps evenly over ``new_n`` layers (distinct, ascending)."""
    count = max(1, min(count, len(indexes), new_n))
    if count == 1:
        return [new_n - 1]
    return sorted({round(j * (new_n - 1) / (count - 1)) for j in range(count)})


def remap_per_layer(values: list[Any], new_n: int) -> list[Any]:
    """Shorten a per-layer list, keeping every distinct value (e.g. sliding and full attention).

    Takes the leading layers, then overwrites from the end with kinds that would
    otherwise vanish, so a 5:1 sliding/full pattern still has one full layer.
    """
    out = [values[i % len(values)] for i in range(new_n)]
    kinds = list(dict.fromkeys(map(_hashable, values)))
    missing = [v for v in kinds if v not in {_hashable(x) for x in out}]
    pos = new_n - 1
    for kind in missing[: new_n - 1]:
        out[pos] = next(v for v in values if _hashable(v) == kind)
        pos -= 1
    return out


def _hashable(value: Any) -> Any:
    """A hashable stand-in for list/dict entries of per-layer lists."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def clamp_feature_layer(value: Any, depth: int) -> Any:
    """Keep hidden-state indexes valid for a tower of ``depth`` blocks (depth + 1 states)."""
    if isinstance(value, list):
        return [clamp_feature_layer(v, depth) for v in value]
    if not isinstance(value, int):
        return value
    return max(value, -(depth + 1)) if value < 0 else min(value, depth)


# Walking the config dict ---------------------------------------------------------------


@dataclass
class Level:
    """One config dict in the tree, with the role its rules depend on."""

    path: str
    data: dict[str, Any]
    role: str  # "text", "vision" or "top"


def _role(key: str, sub: dict[str, Any]) -> str:
    """Guess the role of a nested sub-config from its key, falling back to its content."""
    name = key.lower()
    if any(w in name for w in VISION_NAMES):
        return "vision"
    if any(w in name for w in TEXT_NAMES):
        return "text"
    return "text" if "vocab_size" in sub else "vision"


def _is_flat_text(data: dict[str, Any]) -> bool:
    """A top level that itself describes the language model (Qwen2-VL-style flat configs)."""
    has_layers = _first(data, LAYER_KEYS) is not None
    return "vocab_size" in data and has_layers and _first(data, HIDDEN_KEYS) is not None


def iter_levels(data: dict[str, Any], path: str = "", role: str = "top") -> Iterator[Level]:
    """Yield the top level and every nested sub-config, depth first."""
    yield Level(path or "<top>", data, "text" if role == "top" and _is_flat_text(data) else role)
    for key in sorted(data):
        value = data[key]
        if key in NOT_SUBCONFIGS or not isinstance(value, dict):
            continue
        if key.endswith("_config") or "model_type" in value:
            yield from iter_levels(value, f"{path}.{key}" if path else key, _role(key, value))


# Per-role shrinking --------------------------------------------------------------------


def _old_head_dim(d: dict[str, Any]) -> int | None:
    """head_dim before shrinking: explicit, or hidden / heads."""
    if _is_int(d.get("head_dim")) and d["head_dim"] > 0:
        return int(d["head_dim"])
    hidden, heads = _first(d, HIDDEN_KEYS), _first(d, HEAD_KEYS)
    if hidden and heads and d[heads]:
        return int(d[hidden]) // int(d[heads])
    return None


def _kv_heads(old_kv: int, old_heads: int | None, new_heads: int, target: int) -> int:
    """Keep the attention flavour: MHA stays MHA, MQA stays MQA, GQA gets ``target`` groups."""
    if old_heads and old_kv >= old_heads:
        return new_heads
    if old_kv <= 1:
        return 1
    return min(target, new_heads)


def _shrink_attention(d: dict[str, Any], hidden: int, heads: int, kv_target: int) -> None:
    """Width, heads, KV heads, head_dim and mRoPE sections, all mutually consistent."""
    old_hd = _old_head_dim(d)
    heads_key = _first(d, HEAD_KEYS)
    old_heads = int(d[heads_key]) if heads_key else None
    _set_all(d, HIDDEN_KEYS, hidden)
    _set_all(d, HEAD_KEYS, heads)
    for key in KV_HEAD_KEYS:
        if _is_int(d.get(key)):
            d[key] = _kv_heads(int(d[key]), old_heads, heads, kv_target)
    if _is_int(d.get("head_dim")):
        d["head_dim"] = hidden // heads
    new_hd = hidden // heads
    for key in ROPE_KEYS:
        rope = d.get(key)
        if isinstance(rope, dict) and rope.get("mrope_section") and old_hd:
            old = list(rope["mrope_section"])
            rope["mrope_section"] = scale_sections(old, round(sum(old) * new_hd / old_hd))
        if isinstance(rope, dict) and old_hd:
            rotary = float(d.get("partial_rotary_factor") or 1.0)
            _shrink_frequency_lists(rope, int(old_hd * rotary) // 2, int(new_hd * rotary) // 2)


def _shrink_frequency_lists(rope: dict[str, Any], old: int, new: int) -> None:
    """One factor per rotary frequency (LongRoPE/``su`` ``short_factor``/``long_factor``, head_dim / 2 long, and
    validated against it): every (old/new)-th factor, so the profile from high to low frequency is kept."""
    for key, value in rope.items():
        if isinstance(value, list) and len(value) == old and new < old and all(_is_number(v) for v in value):
            rope[key] = [value[i * old // new] for i in range(new)]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shrink_moe(d: dict[str, Any], dims: Dims) -> None:
    """Fewer, narrower experts; top-k and expert groups stay valid for the new count."""
    experts = None
    for key in EXPERT_KEYS:
        if isinstance(d.get(key), int) and d[key] > 0:
            experts = d[key] = min(d[key], dims.experts)
    for key in TOP_K_KEYS:
        if isinstance(d.get(key), int) and d[key] > 0:
            d[key] = min(d[key], dims.top_k, experts or dims.top_k)
    for key in SHARED_EXPERT_KEYS:
        if isinstance(d.get(key), int) and d[key] > 0:
            d[key] = min(d[key], dims.shared_experts)
    _set_all(d, MOE_FFN_KEYS, dims.moe_ffn)
    for key in ("n_group", "topk_group"):
        if isinstance(d.get(key), int):
            d[key] = 1


def _new_depth(d: dict[str, Any], layers: int) -> int:
    """Layer count after shrinking; leading dense layers are kept on top of ``layers`` MoE ones."""
    dense = d.get("first_k_dense_replace")
    if isinstance(dense, int) and dense > 0:
        d["first_k_dense_replace"] = 1
        return layers + 1
    return layers


def _shrink_depth(d: dict[str, Any], layers: int) -> tuple[int, int] | None:
    """Set the layer count and remap every per-layer list; returns (old, new) depth."""
    key = _first(d, LAYER_KEYS)
    if key is None:
        return None
    old_n, new_n = int(d[key]), _new_depth(d, layers)
    _set_all(d, LAYER_KEYS, new_n)
    for name in SPECIAL_INDEX_KEYS:
        if isinstance(d.get(name), list):
            d[name] = remap_special(d[name], old_n, new_n)
    if isinstance(d.get("max_window_layers"), int):
        d["max_window_layers"] = min(d["max_window_layers"], new_n)
    skip = set(SPECIAL_INDEX_KEYS + TAP_INDEX_KEYS + FEATURE_LAYER_KEYS) | {"architectures"}
    for name, value in d.items():
        if name not in skip and isinstance(value, list) and len(value) == old_n and old_n != new_n:
            d[name] = remap_per_layer(value, new_n)
    return old_n, new_n


def shrink_text_level(d: dict[str, Any], dims: Dims) -> None:
    """Language model: hidden 64, 4 heads (2 KV groups), small FFN and MoE, ``layers`` layers."""
    _shrink_attention(d, dims.text_hidden, dims.text_heads, dims.text_kv_heads)
    _set_all(d, FFN_KEYS, dims.text_ffn)
    _shrink_moe(d, dims)
    _shrink_depth(d, dims.layers)


def shrink_vision_level(d: dict[str, Any], dims: Dims, text_hidden: int, text_layers: int) -> None:
    """Vision (or other encoder) tower: hidden 32, 2 heads; geometry fields are left alone."""
    _shrink_attention(d, dims.vision_hidden, dims.vision_heads, dims.vision_heads)
    _set_all(d, FFN_KEYS, dims.vision_ffn)
    _shrink_moe(d, dims)
    depth = _shrink_depth(d, dims.layers)
    _set_all(d, OUT_HIDDEN_KEYS, text_hidden)
    new_n = depth[1] if depth else dims.layers
    for name in TAP_INDEX_KEYS:
        if isinstance(d.get(name), list) and d[name]:
            d[name] = remap_taps(d[name], min(len(d[name]), text_layers), new_n)


def _fix_feature_layers(levels: list[Level]) -> None:
    """Clamp hidden-state selectors (usually top-level) into the shrunk vision depth."""
    depth = next((lv.data[_first(lv.data, LAYER_KEYS)] for lv in levels
                  if lv.role == "vision" and _first(lv.data, LAYER_KEYS)), None)
    if depth is None:
        return
    for lv in levels:
        for name in FEATURE_LAYER_KEYS:
            if name in lv.data:
                lv.data[name] = clamp_feature_layer(lv.data[name], int(depth))


# Per-family fixes ------------------------------------------------------------------------


def _fix_qwen2_vl(data: dict[str, Any], dims: Dims) -> None:
    """Qwen2-VL's vision ``embed_dim`` is the tower width and ``hidden_size`` its output width."""
    vision = data.get("vision_config") or {}
    if "embed_dim" in vision:
        vision["embed_dim"] = dims.vision_hidden
        vision["hidden_size"] = dims.text_hidden


def _fix_gemma3(data: dict[str, Any], dims: Dims) -> None:
    """Gemma3 scales queries by ``query_pre_attn_scalar`` (= head_dim in the releases)."""
    text = data.get("text_config") or {}
    if text.get("query_pre_attn_scalar") is not None:
        text["query_pre_attn_scalar"] = text.get("head_dim") or dims.text_hidden // dims.text_heads


def _fix_swiglu_projector(data: dict[str, Any], dims: Dims) -> None:
    """Aya Vision / Command A Vision: the projector width is top-level (28672 / 36864 in the releases).

    It stays even because the SwiGLU projector splits it into value and gate halves.
    """
    if _is_int(data.get("alignment_intermediate_size")):
        data["alignment_intermediate_size"] = 2 * dims.text_ffn


def _fix_paligemma(data: dict[str, Any], dims: Dims) -> None:
    """PaliGemma projects vision features to top-level ``projection_dim`` (copied into the vision
    config), which must equal the shrunk text width; Gemma 2 text also scales by query_pre_attn_scalar."""
    width = (data.get("text_config") or {}).get("hidden_size", dims.text_hidden)
    for key in ("projection_dim", "hidden_size"):
        if _is_int(data.get(key)):
            data[key] = width
    vision = data.get("vision_config") or {}
    if _is_int(vision.get("projection_dim")):
        vision["projection_dim"] = width
    _fix_gemma3(data, dims)


def _fix_lfm2_vl(data: dict[str, Any], dims: Dims) -> None:
    """LFM2-VL's projector width is top-level ``projector_hidden_size`` (2560 in the releases)."""
    if _is_int(data.get("projector_hidden_size")):
        data["projector_hidden_size"] = dims.text_ffn


def _fix_got_ocr2(data: dict[str, Any], dims: Dims) -> None:
    """GOT-OCR2's SAM tower names its FFN ``mlp_dim`` and its conv-neck width ``output_channels``."""
    vision = data.get("vision_config") or {}
    if _is_int(vision.get("mlp_dim")):
        vision["mlp_dim"] = dims.vision_ffn
    if _is_int(vision.get("output_channels")):
        vision["output_channels"] = dims.vision_hidden


def _fix_perception_lm(data: dict[str, Any], dims: Dims) -> None:
    """Perception LM's timm tower keeps its sizes in ``vision_config.model_args``, not a sub-config.

    ``num_heads`` is set even when absent: the architecture's default (16) would leave a
    32-wide tower with 2-dim heads, too narrow for its 2-D rotary embedding.
    """
    args = (data.get("vision_config") or {}).get("model_args")
    if not isinstance(args, dict):
        return
    if _is_int(args.get("embed_dim")):
        args["embed_dim"] = dims.vision_hidden
        args["num_heads"] = dims.vision_heads
    if _is_int(args.get("depth")):
        args["depth"] = dims.layers


def _fix_deepseek_vl_hybrid(data: dict[str, Any], dims: Dims) -> None:
    """DeepSeek-VL hybrid's SAM tower (``high_res_vision_config``): SAM's ``mlp_dim`` / ``output_channels``,
    and the model reads ``hidden_states[global_attn_indexes[0] + 1]`` while SAM's last recorded state is the
    channels-first neck output, so the first global block must come before the last block."""
    sam = data.get("high_res_vision_config") or {}
    _fix_got_ocr2({"vision_config": sam}, dims)
    depth, indexes = sam.get("num_hidden_layers"), sam.get("global_attn_indexes")
    if _is_int(depth) and depth >= 2 and isinstance(indexes, list) and indexes:
        sam["global_attn_indexes"] = sorted({min(max(int(i), 0), depth - 2) for i in indexes})


OVIS2_VISUAL_VOCAB = 512


def _fix_ovis2(data: dict[str, Any], dims: Dims) -> None:
    """Ovis2's LM head reads top-level ``hidden_size`` / ``vocab_size`` (1536 / 151643 by default, below the
    default text model's 4096 / 151936 and its image token ids): both follow the text config. The tower's
    visual vocabulary (16384 soft tokens) only sizes its head and the visual embedding table."""
    text = data.get("text_config") or {}
    for key in ("hidden_size", "vocab_size"):
        if _is_int(text.get(key)):
            data[key] = text[key]
    vision = data.get("vision_config") or {}
    if _is_int(vision.get("vocab_size")):
        vision["vocab_size"] = min(vision["vocab_size"], OVIS2_VISUAL_VOCAB)


def _fix_llama4(data: dict[str, Any], dims: Dims) -> None:
    """Llama 4: the vision ``intermediate_size`` is also the pixel-shuffled width (hidden / ratio**2), the
    projector widths (4096) meet the text width, dense layers use ``intermediate_size_mlp`` and experts
    ``intermediate_size``; ``moe_layers`` (layer indexes) is re-derived from ``interleave_moe_layer_step``."""
    vision, text = data.get("vision_config") or {}, data.get("text_config") or {}
    ratio = vision.get("pixel_shuffle_ratio")
    if _is_int(vision.get("hidden_size")) and isinstance(ratio, (int, float)) and 0 < ratio <= 1:
        vision["intermediate_size"] = round(vision["hidden_size"] / ratio**2)
    for key in ("projector_input_dim", "projector_output_dim", "vision_output_dim"):
        if _is_int(vision.get(key)):
            vision[key] = text.get("hidden_size", dims.text_hidden)
    if _is_int(text.get("intermediate_size_mlp")):
        text["intermediate_size_mlp"] = dims.text_ffn
    if _is_int(text.get("intermediate_size")):
        text["intermediate_size"] = dims.moe_ffn
    step, depth = text.get("interleave_moe_layer_step"), text.get("num_hidden_layers")
    if _is_int(step) and step > 0 and _is_int(depth):
        text["moe_layers"] = list(range(min(step, depth) - 1, depth, step))


def _fix_idefics2(data: dict[str, Any], dims: Dims) -> None:
    """Idefics2's perceiver works at the text width; its heads, depth and KV groups shrink like a text
    stack, while ``resampler_n_latents`` (= image tokens in the prompt) is kept."""
    perceiver = data.get("perceiver_config") or {}
    if not perceiver:
        return
    perceiver["hidden_size"] = (data.get("text_config") or {}).get("hidden_size", dims.text_hidden)
    perceiver.update(resampler_n_heads=dims.text_heads, resampler_head_dim=perceiver["hidden_size"] // dims.text_heads,
                     num_key_value_heads=dims.text_kv_heads, resampler_depth=dims.layers)


def _fix_mllama(data: dict[str, Any], dims: Dims) -> None:
    """Mllama's vision config spells heads ``attention_heads``, has a second (global) stack and taps
    hidden states whose concatenation sizes the projector; its text rotary needs a ``rope_type``."""
    vision = data.get("vision_config") or {}
    depth = vision.get("num_hidden_layers")
    if _is_int(depth):
        vision["attention_heads"] = dims.vision_heads
        vision["num_global_layers"] = dims.layers
        taps = vision.get("intermediate_layers_indices") or [depth - 1]
        vision["intermediate_layers_indices"] = remap_taps(taps, min(len(taps), depth), depth)
        vision["vision_output_dim"] = vision["hidden_size"] * (len(vision["intermediate_layers_indices"]) + 1)
    text = data.get("text_config") or {}
    if text and text.get("rope_scaling") is None:  # MllamaTextConfig's default does not build
        text["rope_scaling"] = {"rope_type": "default"}


# MobileNetV5 (Gemma 3n) always outputs 2048 channels (timm's MobileNetV5Encoder.num_features).
MOBILENETV5_WIDTH = 2048
# Scalars only: timm mutates ``block_args`` dicts while building (pops ``block_type``), so a shallower
# block list in config.json would not survive one instantiation. 1/16 of the width leaves ~7M
# parameters, most in the attention blocks, whose heads x key_dim the multiplier does not scale.
MOBILENETV5_TINY_ARGS = {"channel_multiplier": 0.0625, "stem_size": 16}


def _fix_gemma3n(data: dict[str, Any], dims: Dims) -> None:
    """Gemma 3n: timm vision tower narrowed through ``model_args`` (its output width is fixed), conformer
    audio, and text fields outside the generic names: per-layer FFN widths, the per-layer input width
    (x vocab x layers: 8 gives 4M parameters for a 262k vocabulary and two layers), LAuReL rank; KV sharing off,
    since a shallow stack has no earlier layer of each attention type to share from."""
    vision = data.get("vision_config") or {}
    if vision:
        vision["hidden_size"] = MOBILENETV5_WIDTH
        vision["model_args"] = {**(vision.get("model_args") or {}), **MOBILENETV5_TINY_ARGS}
    audio = data.get("audio_config") or {}
    if audio:
        audio.update(conf_num_attention_heads=dims.vision_heads, conf_num_hidden_layers=dims.layers,
                     sscp_conv_channel_size=[16, 8])
    text = data.get("text_config") or {}
    depth = text.get("num_hidden_layers")
    if _is_int(depth):
        text.update(intermediate_size=[dims.text_ffn] * depth, hidden_size_per_layer_input=8, laurel_rank=8,
                    num_kv_shared_layers=0)


# VQ image tokenizers normalise with GroupNorm(32): every channel count stays a multiple of 32.
VQ_CHANNELS = 32


def _shrink_vq(vq: dict[str, Any], dims: Dims) -> None:
    """Narrow a VQ-VAE (32 channels, ``layers`` res blocks per level) but keep its number of levels:
    the downsampling factor fixes the codes per image, and the codebook size the BPE mapping."""
    if _is_int(vq.get("base_channels")):
        vq["base_channels"] = VQ_CHANNELS
    if isinstance(vq.get("channel_multiplier"), list):
        vq["channel_multiplier"] = [1] * len(vq["channel_multiplier"])
    if _is_int(vq.get("num_res_blocks")):
        vq["num_res_blocks"] = min(vq["num_res_blocks"], dims.layers)
    if _is_int(vq.get("latent_channels")):
        vq["latent_channels"] = min(vq["latent_channels"], VQ_CHANNELS)


def _fix_vq_family(data: dict[str, Any], dims: Dims) -> None:
    """Chameleon / Emu3 / Janus: shrink the VQ tokenizer; Janus's aligners and generation head
    project to the text width (``projection_dim`` / ``image_token_embed_dim``)."""
    _shrink_vq(data.get("vq_config") or {}, dims)
    width = (data.get("text_config") or data).get("hidden_size", dims.text_hidden)
    for sub in (data.get("vision_config") or {}, data.get("vq_config") or {}):
        for key in ("projection_dim", "image_token_embed_dim"):
            if _is_int(sub.get(key)):
                sub[key] = width


QWEN_VL_RESAMPLER_HEAD = 128  # Qwen-VL's resampler has output_dim // 128 heads


def _fix_qwen_vl(data: dict[str, Any], dims: Dims) -> None:
    """Qwen-VL (remote code, ``model_type: qwen`` with a ``visual`` dict): the resampler's ``output_dim`` is the
    LM width (its features replace the image pads' embeddings) and it has ``output_dim // 128`` heads, so the LM
    keeps at least 128 (``kv_channels`` follows the heads)."""
    visual = data.get("visual")
    if not isinstance(visual, dict) or not _is_int(data.get("hidden_size")):
        return
    hidden = max(int(data["hidden_size"]), QWEN_VL_RESAMPLER_HEAD)
    data["hidden_size"] = visual["output_dim"] = hidden
    if _is_int(data.get("num_attention_heads")) and _is_int(data.get("kv_channels")):
        data["kv_channels"] = hidden // int(data["num_attention_heads"])


FAMILY_FIXES: dict[str, Callable[[dict[str, Any], Dims], None]] = {
    "qwen": _fix_qwen_vl,
    "qwen2_vl": _fix_qwen2_vl,
    "gemma3": _fix_gemma3,
    "aya_vision": _fix_swiglu_projector,
    "cohere2_vision": _fix_swiglu_projector,
    "paligemma": _fix_paligemma,
    "lfm2-vl": _fix_lfm2_vl,  # transformers 4.57.1 spells Lfm2VlConfig.model_type with a dash
    "lfm2_vl": _fix_lfm2_vl,
    "got_ocr2": _fix_got_ocr2,
    "perception_lm": _fix_perception_lm,
    "deepseek_vl_hybrid": _fix_deepseek_vl_hybrid,
    "ovis2": _fix_ovis2,
    "llama4": _fix_llama4,
    "idefics2": _fix_idefics2,
    "mllama": _fix_mllama,
    "gemma3n": _fix_gemma3n,
    "chameleon": _fix_vq_family,
    "emu3": _fix_vq_family,
    "janus": _fix_vq_family,
}


# Config ------------------------------------------------------------------------------------


def shrink_config_dict(data: dict[str, Any], dims: Dims) -> dict[str, Any]:
    """Return a shrunk copy of a config dict (as produced by ``PretrainedConfig.to_dict``)."""
    data = json.loads(json.dumps(data, default=_json_value))
    for key in DROP_KEYS:
        data.pop(key, None)
    levels = list(iter_levels(data))
    for lv in levels:
        for key in VOLATILE_KEYS:
            lv.data.pop(key, None)
    text_levels = [lv for lv in levels if lv.role == "text"]
    for lv in text_levels:
        shrink_text_level(lv.data, dims)
    text_hidden = dims.text_hidden if text_levels else dims.vision_hidden
    depths = [int(lv.data[k]) for lv in text_levels if (k := _first(lv.data, LAYER_KEYS))]
    text_layers = depths[0] if depths else dims.layers
    for lv in levels:
        if lv.role == "vision":
            shrink_vision_level(lv.data, dims, text_hidden, text_layers)
    _fix_feature_layers(levels)
    fix = FAMILY_FIXES.get(str(data.get("model_type")))
    if fix is not None:
        fix(data, dims)
    return data


def _json_value(value: Any) -> Any:
    """What config.json holds for a value ``to_dict()`` leaves as an object: remote code keeps
    ``torch.dtype`` objects in its configs (transformers converts only ``dtype``/``torch_dtype``)."""
    import torch

    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    raise TypeError(f"config value {value!r} ({type(value).__name__}) has no config.json form")


def _target_dtype(config: Any) -> Any:
    """Keep fp32 checkpoints in fp32; everything else is saved as bf16 (as released VLMs are)."""
    import torch

    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if dtype in (torch.float32, "float32"):
        return torch.float32
    return torch.bfloat16


def load_and_shrink_config(src: Path, dims: Dims, trust_remote_code: bool) -> tuple[Any, type | None]:
    """Read ``src/config.json`` as MindSpeed-MM does (AutoConfig, else the custom-model path) and rebuild the
    same config class, shrunk; with the model class when only the folder's code names it (custom path)."""
    from hooks.model.loading import load_config_and_class

    config, cls, custom = load_config_and_class(Path(src), trust_remote_code=trust_remote_code)
    data = shrink_config_dict(config.to_dict(), dims)
    return type(config).from_dict(data), cls if custom else None


# Model -------------------------------------------------------------------------------------


def _remote_class(config: Any, src: Path) -> Any | None:
    """The remote-code class named by ``architectures[0]`` in ``auto_map``, if any."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    auto_map = getattr(config, "auto_map", None) or {}
    arch = (getattr(config, "architectures", None) or [""])[0]
    refs = [v[0] if isinstance(v, (list, tuple)) else v for _, v in sorted(auto_map.items())]
    ref = next((r for r in refs if r and r.split(".")[-1] == arch), None)
    for key in ("AutoModelForImageTextToText", "AutoModelForVision2Seq", "AutoModelForCausalLM", "AutoModel"):
        ref = ref or auto_map.get(key)
    return get_class_from_dynamic_module(ref, str(src)) if ref else None


def model_class(config: Any, src: Path, trust_remote_code: bool) -> Any | None:
    """The class the checkpoint names in ``architectures``; None means "ask the Auto classes"."""
    import transformers

    if trust_remote_code and getattr(config, "auto_map", None):
        cls = _remote_class(config, src)
        if cls is not None:
            return cls
    arch = (getattr(config, "architectures", None) or [None])[0]
    return getattr(transformers, arch, None) if arch else None


def build_random_model(config: Any, src: Path, trust_remote_code: bool, seed: int, cls: type | None = None) -> Any:
    """Instantiate random weights with the real class; the seed makes them reproducible."""
    import torch
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(seed)
    cls = cls or model_class(config, src, trust_remote_code)
    if cls is None:
        model = AutoModelForImageTextToText.from_config(config, trust_remote_code=trust_remote_code)
    elif hasattr(cls, "_from_config"):
        model = cls._from_config(config)
    else:
        model = cls(config)
    dtype = _target_dtype(config)
    model = model.to(dtype)
    model.config.dtype = str(dtype).removeprefix("torch.")
    return model


# Files -------------------------------------------------------------------------------------


def is_weight_file(name: str) -> bool:
    """Weights and weight indexes are the only files a shrunk copy must not inherit."""
    return name.endswith(WEIGHT_SUFFIXES) or name.endswith(".index.json")


def _skip_in_subdir(_dir: str, names: list[str]) -> list[str]:
    """``copytree`` filter: weights can hide in sub-folders too (e.g. ``original/*.pth``)."""
    return [n for n in names if n.startswith(".") or is_weight_file(n)]


def copy_non_weight_files(src: Path, dest: Path) -> list[str]:
    """Copy tokenizer, processor, template, generation config and code files verbatim."""
    copied = []
    for item in sorted(src.iterdir()):
        name = item.name
        if name.startswith(".") or name == "config.json" or is_weight_file(name):
            continue
        if item.is_dir():
            shutil.copytree(item, dest / name, ignore=_skip_in_subdir, dirs_exist_ok=True)
        else:
            shutil.copy2(item, dest / name)
        copied.append(name)
    return copied


def keep_model_type(src: Path, out: Path) -> None:
    """Keep the source's ``model_type`` spelling (or its absence) in the shrunk ``config.json``.

    ``save_pretrained`` writes the config class's own spelling, which can differ from the
    Auto key the source uses: transformers 4.57.1 saves ``Lfm2VlConfig`` as ``lfm2-vl``,
    a name ``AutoConfig`` does not know, while ``lfm2_vl`` loads.
    """
    source = json.loads((src / "config.json").read_text())
    want = source.get("model_type")
    path = out / "config.json"
    data = json.loads(path.read_text())
    kept = dict(data)
    if want and data.get("model_type") != want:
        data["model_type"] = want
    elif not want and not source.get("auto_map"):  # a custom model stays one: AutoConfig must not load the copy
        data.pop("model_type", None)
        data.pop("auto_map", None)
    if data != kept:
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _publish(tmp: Path, dest: Path) -> None:
    """Move a finished copy into place; only replaces an empty dir or an earlier shrink output."""
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    if dest.exists():
        if any(dest.iterdir()) and not (dest / MARKER).is_file():
            raise FileExistsError(f"{dest} is not empty and is not a shrink output; refusing to overwrite")
        shutil.rmtree(dest)
    tmp.rename(dest)


@dataclass
class ShrinkReport:
    """What ``shrink_model_dir`` produced, for the CLI summary and the marker file."""

    params: int
    vocab_params: int
    seconds: float


def _count_params(model: Any) -> tuple[int, int]:
    """Total parameters and those in vocab-sized matrices (embeddings, LM head)."""
    vocab = getattr(model.config.get_text_config(), "vocab_size", None)
    total = sum(p.numel() for p in model.parameters())
    vocab_params = sum(p.numel() for p in model.parameters() if p.dim() == 2 and p.shape[0] == vocab)
    return total, vocab_params


def _save(model: Any, folder: Path) -> None:
    """``save_pretrained``; for a model that holds one module under two names without declaring it tied
    (Phi-3-vision's ``embed_tokens``, kept again as ``vision_embed_tokens.wte``), which transformers refuses to
    write as safetensors, the config and the weights under every name (a copy per name, as a published
    checkpoint stores them)."""
    try:
        model.save_pretrained(folder, safe_serialization=True)
    except RuntimeError as err:
        if "shared tensors" not in str(err):
            raise
        from safetensors.torch import save_file

        for item in folder.glob("*.safetensors*"):
            item.unlink()
        model.config.save_pretrained(folder)
        save_file({name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()},
                  str(folder / "model.safetensors"), metadata={"format": "pt"})


def _shrink(src: Path, dest: Path, trust_remote_code: bool, layers: int, seed: int) -> ShrinkReport:
    """Do the work of ``shrink_model_dir`` and report sizes and time."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()  # model modules import torchvision transitively
    start = time.perf_counter()
    if layers < 2:
        raise ValueError("layers must be >= 2 so every repeated block container keeps two entries")
    if not (src / "config.json").is_file():
        raise FileNotFoundError(f"{src}/config.json not found")
    config, custom_class = load_and_shrink_config(src, Dims(layers=layers), trust_remote_code)
    model = build_random_model(config, src, trust_remote_code, seed, custom_class)
    params, vocab_params = _count_params(model)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _save(model, tmp)
        keep_model_type(src, tmp)
        copy_non_weight_files(src, tmp)
        marker = {"source": str(src.resolve()), "layers": layers, "seed": seed, "version": SHRINK_VERSION,
                  "params": params}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        for item in tmp.iterdir():
            item.chmod(0o644 if item.is_file() else 0o755)
        _publish(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return ShrinkReport(params, vocab_params, time.perf_counter() - start)


def shrink_model_dir(
    src: Path, dest: Path, *, trust_remote_code: bool = False, layers: int = 2, seed: int = 0
) -> Path:
    """Write a tiny random-weight copy of the model directory ``src`` into ``dest``; return ``dest``.

    Only ``config.json`` is read from the source model (never its weights); every
    other non-weight file is copied verbatim so the tokenizer, processor and
    chat template are exactly the user's.
    """
    _shrink(Path(src), Path(dest), trust_remote_code, layers, seed)
    return Path(dest)


def _parser() -> argparse.ArgumentParser:
    """Command line of ``python -m hooks.model.shrink``."""
    p = argparse.ArgumentParser(prog="python -m hooks.model.shrink", description=__doc__.splitlines()[0])
    p.add_argument("src", type=Path, help="model directory (config.json + tokenizer/processor files)")
    p.add_argument("dest", type=Path, help="output directory for the tiny copy")
    p.add_argument("--trust-remote-code", action="store_true", help="allow the model's own *.py code")
    p.add_argument("--layers", type=int, default=2, help="layers per stack (>= 2)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    """Shrink and print a one-line summary."""
    args = _parser().parse_args(argv)
    report = _shrink(args.src, args.dest, args.trust_remote_code, args.layers, args.seed)
    print(
        f"shrunk {args.src} -> {args.dest}: {report.params / 1e6:.2f}M params "
        f"({report.vocab_params / 1e6:.2f}M in vocab-sized matrices), {report.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    exit_now(main())

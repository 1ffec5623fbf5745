"""The generic rules of ``hooks.model.shrink``: target sizes, the config field names grouped by meaning, the
walk over a config and its nested sub-configs, and what a text or a vision level becomes.

Keyed on well known field names, so that one rule serves every family; what a single family needs beyond
them is in ``hooks.model.shrink_families``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


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


def is_int(value: Any) -> bool:
    """A plain integer field (per-stage lists of multi-stage towers are left to family fixes)."""
    return isinstance(value, int) and not isinstance(value, bool)


def first_key(d: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` present in ``d`` with an integer value."""
    return next((k for k in keys if is_int(d.get(k))), None)


def _set_all(d: dict[str, Any], keys: tuple[str, ...], value: int) -> None:
    """Set every present integer key of a group, so aliases stay in agreement."""
    for key in keys:
        if is_int(d.get(key)):
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
    has_layers = first_key(data, LAYER_KEYS) is not None
    return "vocab_size" in data and has_layers and first_key(data, HIDDEN_KEYS) is not None


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
    if is_int(d.get("head_dim")) and d["head_dim"] > 0:
        return int(d["head_dim"])
    hidden, heads = first_key(d, HIDDEN_KEYS), first_key(d, HEAD_KEYS)
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
    heads_key = first_key(d, HEAD_KEYS)
    old_heads = int(d[heads_key]) if heads_key else None
    _set_all(d, HIDDEN_KEYS, hidden)
    _set_all(d, HEAD_KEYS, heads)
    for key in KV_HEAD_KEYS:
        if is_int(d.get(key)):
            d[key] = _kv_heads(int(d[key]), old_heads, heads, kv_target)
    if is_int(d.get("head_dim")):
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
    key = first_key(d, LAYER_KEYS)
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


def fix_feature_layers(levels: list[Level]) -> None:
    """Clamp hidden-state selectors (usually top-level) into the shrunk vision depth."""
    depth = next((lv.data[first_key(lv.data, LAYER_KEYS)] for lv in levels
                  if lv.role == "vision" and first_key(lv.data, LAYER_KEYS)), None)
    if depth is None:
        return
    for lv in levels:
        for name in FEATURE_LAYER_KEYS:
            if name in lv.data:
                lv.data[name] = clamp_feature_layer(lv.data[name], int(depth))

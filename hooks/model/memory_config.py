"""The sizes the activation estimate (``hooks.model.memory_activations``) reads from a transformers config:
the text config's widths, depth, heads, experts and vocabulary, and the vision config's, with the patches
each token stands for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ActivationDims:
    """What the activation estimate reads from the config (text config; vision config if any)."""

    hidden: int
    layers: int
    q_dim: int
    kv_dim: int
    intermediate: int  # per token active: dense intermediate, or top_k x moe_intermediate + shared
    top_k: int  # 0 for dense
    vocab: int
    num_experts: int = 0
    vision_hidden: int = 0
    vision_layers: int = 0
    vision_intermediate: int = 0
    patches_per_token: int = 1
    heads: int = 1
    kv_heads: int = 1
    moe_intermediate: int = 0  # one expert's width (MoE)
    shared_intermediate: int = 0  # shared experts' width per token (MoE)
    vision_heads: int = 0


def _get(cfg: Any, *names: str, default: Any = 0) -> Any:
    """The first of ``names`` the config sets. A per-layer list (Gemma 3n's ``intermediate_size``) counts as its
    largest entry: the widest layer bounds the activation estimate."""
    for n in names:
        v = getattr(cfg, n, None)
        if isinstance(v, list | tuple):
            v = max(v, default=None)
        if v is not None:
            return v
    return default


def dims_from_config(config: Any) -> ActivationDims:
    """Text (and vision) sizes from a transformers config; the text config is the language model's."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    h = int(_get(text, "hidden_size", "d_model", "n_embd"))
    heads = int(_get(text, "num_attention_heads", "n_head", default=1))
    head_dim = int(_get(text, "head_dim", default=h // max(heads, 1)) or h // max(heads, 1))
    kv = int(_get(text, "num_key_value_heads", default=heads))
    experts = int(_get(text, "num_experts", "n_routed_experts", "num_local_experts"))
    top_k = int(_get(text, "num_experts_per_tok", "moe_topk")) if experts else 0
    dense_i = int(_get(text, "intermediate_size", "ffn_hidden_size", default=4 * h))
    if experts:
        moe_i = int(_get(text, "moe_intermediate_size", "intermediate_size"))
        shared = int(_get(text, "shared_expert_intermediate_size")) or int(_get(text, "n_shared_experts")) * moe_i
        inter = top_k * moe_i + shared
    else:
        inter, moe_i, shared = dense_i, 0, 0
    vision = getattr(config, "vision_config", None)
    vh = vl = vi = vheads = 0
    merge = 1
    if vision is not None:
        # Qwen2-VL's vision config names its blocks' width embed_dim; its hidden_size is the merger's output
        vh = int(_get(vision, "embed_dim", "hidden_size", "width"))
        vl = int(_get(vision, "depth", "num_hidden_layers", "num_layers"))
        vi = int(_get(vision, "intermediate_size", default=4 * vh) or 4 * vh)
        vheads = int(_get(vision, "num_heads", "num_attention_heads", default=1))
        sms = _get(vision, "spatial_merge_size", default=None) or _get(config, "spatial_merge_size", default=None)
        ratio = _get(config, "downsample_ratio", default=None)
        if sms:
            merge = int(sms) ** 2
        elif ratio:
            merge = round(1 / float(ratio) ** 2)
    return ActivationDims(hidden=h, layers=int(_get(text, "num_hidden_layers", "n_layer", "num_layers")),
                q_dim=heads * head_dim, kv_dim=kv * head_dim, intermediate=inter, top_k=top_k,
                vocab=int(_get(text, "vocab_size", default=_get(config, "vocab_size"))), num_experts=experts,
                vision_hidden=vh, vision_layers=vl, vision_intermediate=vi, patches_per_token=merge, heads=heads,
                kv_heads=kv, moe_intermediate=moe_i, shared_intermediate=shared, vision_heads=vheads)

"""The activation estimate of ``hooks.model.memory`` (see its docstring: an ESTIMATE, per micro-batch of
``cutoff_len`` tokens): bytes one layer keeps per token (``LayerProfile``, ``layer_row_bytes``), the layer
structure read off the model's own modules (``profile_of``), and the per-sample total (``activations``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hooks.model.matching import module_name_match
from hooks.model.memory_config import ActivationDims
from hooks.model.plan import Plan

LOGIT_BYTES = 10  # per token and vocabulary entry: bf16 logits + fp32 upcast + saved fp32 log-softmax
ACT_BYTES = 2  # activations are bf16

NORM_RMS, NORM_RMS_FP32, NORM_LAYER = "rms", "rms_fp32", "layer"


@dataclass(frozen=True)
class LayerProfile:
    """One kind of layer (decoder layer or vision block) as its saved activations depend on it.

    Widths come from the config; the structure (which norm, how many, fused QKV, gated MLP, experts)
    from the layer's own modules (``profile_of``), read off the meta build, so the same arithmetic
    serves a published full-size config and its tiny copy.
    """

    hidden: int
    q: int
    kv: int
    heads: int
    kv_heads: int
    intermediate: int  # dense MLP width, or one expert's for MoE
    norm: str = NORM_RMS
    norms: int = 2  # layer-wide norms; two feed a projection, the rest (Gemma's, GLM's post-norms) the residual
    qk_norm: bool = False
    fused_qkv: bool = False  # one QKV projection (Qwen/GLM vision): V keeps the whole output alive
    gated: bool = True
    kv_repeated: bool = False  # GQA through repeat_kv (SDPA with a materialised mask): K, V kept at Q's width
    experts: int = 0
    top_k: int = 0
    shared_intermediate: int = 0

    @property
    def head_dim(self) -> int:
        return self.q // max(self.heads, 1)


def _norm_bytes(style: str, width: int, feeds_projection: bool) -> int:
    """Per row: what one norm keeps (HF RMSNorm upcasts: an fp32 copy, the bf16 normalised value; Gemma's
    keeps the normalised value in fp32; LayerNorm its bf16 input and per-row statistics), plus its output
    when a projection consumes it (a linear keeps its input)."""
    own = {NORM_RMS: 6 * width + 4, NORM_RMS_FP32: 8 * width + 4, NORM_LAYER: 2 * width + 4}[style]
    return own + (ACT_BYTES * width if feeds_projection else 0)


def layer_row_bytes(p: LayerProfile, rows: int = 1) -> int:
    """Activation bytes one layer keeps for ``rows`` tokens (or patches), without recompute (the formula).

    Attention (flash/SDPA, no ``s^2``): Q, K, V as the kernel gets them, its output (the output projection's
    input) and its fp32 log-sum-exp; a fused QKV keeps its whole output (V is a view of it) and the Qwen/GLM
    vision attention copies its output once more (concatenated over images) and recomputes fp32 rotary tables
    per block. MLP: gate, up, activation and product (gated), or the first projection and its activation. MoE:
    router probabilities, and per routed token copy its gathered input, expert MLP, weighted output; per
    expert hit, the copy of its weights the HF training loop indexes out (``gate_up_proj[expert_idx]``).
    """
    h, q, kv = p.hidden, p.q, p.kv
    kv_w = q if p.kv_repeated else kv
    per = _norm_bytes(p.norm, h, True) * 2 + _norm_bytes(p.norm, h, False) * max(p.norms - 2, 0)
    if p.qk_norm:
        per += _norm_bytes(p.norm, q, False) + _norm_bytes(p.norm, kv, False) + 4 * (p.heads + p.kv_heads) - 8
    per += ACT_BYTES * (2 * q + 2 * kv_w) + 4 * p.heads
    if p.fused_qkv:  # the rest of the QKV output around V, the output's copy, fp32 rotary tables
        per += ACT_BYTES * (q + kv + q) + 8 * p.head_dim
    if p.experts:
        k, i = p.top_k, p.intermediate
        per += 4 * p.experts + 12 * k + 4 + k * (ACT_BYTES * (3 * h + 4 * i) + 10)
        per += ACT_BYTES * 4 * p.shared_intermediate
        hit = min(p.experts, rows * k)
        return rows * per + hit * ACT_BYTES * 3 * h * i
    per += ACT_BYTES * (4 if p.gated else 2) * p.intermediate
    return rows * per


def recomputed_row_bytes(p: LayerProfile, rows: int = 1, act_bytes: int = ACT_BYTES) -> int:
    """With non-reentrant recompute a layer keeps only its input (``hidden`` wide, in the compute dtype)."""
    return rows * act_bytes * p.hidden


def text_profile(dims: ActivationDims) -> LayerProfile:
    """A decoder layer as the config alone describes it (Llama-style: HF RMSNorm, separate Q/K/V, gated MLP)."""
    moe_i = dims.moe_intermediate if dims.num_experts else dims.intermediate
    return LayerProfile(dims.hidden, dims.q_dim, dims.kv_dim, dims.heads, dims.kv_heads, moe_i,
                        experts=dims.num_experts, top_k=dims.top_k, shared_intermediate=dims.shared_intermediate)


def vision_profile(dims: ActivationDims) -> LayerProfile:
    vh, heads = dims.vision_hidden, dims.vision_heads or 1
    return LayerProfile(vh, vh, vh, heads, heads, dims.vision_intermediate)


def _norm_style(module: Any) -> str:
    import torch

    if isinstance(module, torch.nn.LayerNorm):
        return NORM_LAYER
    import inspect

    try:
        source = inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return NORM_RMS
    return NORM_RMS_FP32 if "1.0 + self.weight" in source or "(1 + self.weight" in source else NORM_RMS


def profile_of(layer: Any, base: LayerProfile, *, sliding: bool = False) -> LayerProfile:
    """``base`` (widths from the config) with the structure read off ``layer``'s modules (meta or real)."""
    import torch

    norms = [(n, m) for n, m in layer.named_modules() if n and type(m).__name__.endswith("Norm")
             and getattr(m, "weight", None) is not None and m.weight.dim() == 1]
    wide = [m for n, m in norms if m.weight.shape[0] == base.hidden]
    narrow = [m for n, m in norms if m.weight.shape[0] != base.hidden]
    linears = {n.rpartition(".")[2]: m for n, m in layer.named_modules() if isinstance(m, torch.nn.Linear)}
    fused = any(m.out_features == base.q + 2 * base.kv and m.in_features == base.hidden and "qkv" in n
                for n, m in linears.items())
    gated = any("gate" in n and "gate" != n for n in linears) or any(
        getattr(m, "gate_up_proj", None) is not None for m in layer.modules())
    return LayerProfile(base.hidden, base.q, base.kv, base.heads, base.kv_heads, base.intermediate,
                        norm=_norm_style(wide[0]) if wide else base.norm, norms=len(wide) or base.norms,
                        qk_norm=bool(narrow), fused_qkv=fused, gated=gated or bool(base.experts),
                        kv_repeated=sliding and base.kv != base.q, experts=base.experts, top_k=base.top_k,
                        shared_intermediate=base.shared_intermediate)


def model_profiles(model: Any, plan: Plan, dims: ActivationDims, config: Any) -> dict[str, LayerProfile]:
    """``{"text": ..., "vision": ...}``: the first decoder layer and vision block the plan recomputes."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    sliding = "sliding_attention" in (getattr(text, "layer_types", None) or [])
    out: dict[str, LayerProfile] = {}
    names = [n for n, _ in model.named_modules() if n and any(module_name_match(p, n) for p in plan.recompute_modules)]
    towers = list(plan.towers)  # encoder layers (images, audio) are costed alike
    for name in names:
        kind = "vision" if any(name == t or name.startswith(t + ".") for t in towers) else "text"
        if kind not in out:
            base = vision_profile(dims) if kind == "vision" else text_profile(dims)
            out[kind] = profile_of(model.get_submodule(name), base, sliding=sliding and kind == "text")
    return out


@dataclass
class Activations:
    """ESTIMATE (see the module docstring): bytes per device for one micro-batch."""

    text_per_sample: int
    vision_per_sample: int
    logits_per_sample: int

    def total(self, micro_batch: int) -> int:
        return micro_batch * (self.text_per_sample + self.vision_per_sample + self.logits_per_sample)


def activations(dims: ActivationDims, cutoff_len: int, *, recompute: bool, vision_frozen: bool,
                profiles: dict[str, LayerProfile] | None = None) -> Activations:
    """Per-sample activation estimate for ``cutoff_len`` tokens (``layer_row_bytes`` per layer)."""
    profiles = profiles or {}
    t = cutoff_len
    text = profiles.get("text") or text_profile(dims)
    full = layer_row_bytes(text, t)
    text_bytes = dims.layers * recomputed_row_bytes(text, t) + full if recompute else dims.layers * full
    vision = 0
    if dims.vision_layers and not vision_frozen:
        patches = t * dims.patches_per_token
        vp = profiles.get("vision") or vision_profile(dims)
        v_full = layer_row_bytes(vp, patches)
        vision = (dims.vision_layers * recomputed_row_bytes(vp, patches) + v_full if recompute
                  else dims.vision_layers * v_full)
    return Activations(text_bytes, vision, t * dims.vocab * LOGIT_BYTES)

"""Memory arithmetic: per-rank bytes under MindSpeed-MM's FSDP2 trainer, and the activation estimate.

Pure functions over parameter shapes (``ParamShape``: name, shape, owning FSDP unit, owning
expert module) read off a meta-device build, so plans for published full-size configs cost no
memory and no weights. What the trainer holds, and why (``mindspeed-mm-fsdp2-contract.md`` §4, §6):

* **Parameters** are fp32 master weights: ModelHub builds the model and calls ``.float()``; FSDP2
  keeps the shards in that dtype and only all-gathers in ``param_dtype`` (bf16). 4 bytes each.
* **Sharding follows ``torch.chunk``** along the shard dim: with ``c = ceil(d0 / world)`` rank
  ``r`` holds rows ``[r*c, min((r+1)*c, d0))`` (late ranks may hold 0 rows). FSDP2 allocates every
  rank's shard padded to ``c * rest`` elements (``_sharded_param_data``); ``p.to_local()`` is the
  unpadded view. Both are reported: ``*_local`` is what ``to_local()`` shows, ``*_padded`` what is
  allocated. Non-expert parameters shard over ``fully_shard_parallel_size`` (rank ``r % fsdp`` of
  the ``dp_shard`` mesh; beyond it, HSDP replicates).
* **Gradients** of trainable parameters are fp32 too (the reduce-scatter output is cast back to the
  parameter's dtype; with ``reduce_dtype: fp32`` no cast). Each unit's sharded grads are views of
  one buffer of the trainable parameters' padded shard sizes; ``to_local()`` shows the unpadded view.
* **Optimizer states**: AdamW keeps ``exp_avg`` and ``exp_avg_sq`` (``zeros_like`` of the local
  shard: unpadded, fp32) plus a 4-byte ``step`` tensor per trainable parameter (on the device with
  ``adam_fused: true``, MindSpeed-MM's default).
* **Frozen modules** (``model.freeze``, MindSpeed's ``module_name_match`` on every module name,
  root ``""`` included): their parameters are still fp32 shards, with no grads and no states.
* **Expert parallel** (``expert_parallel_size`` EP > 1, MoE only): parameters under an
  ``ep_plan`` module are split along dim 0 across the EP ranks (``distribute_tensor(Shard(0))``,
  chunk semantics; EP must divide the expert count), then ``fully_shard`` over
  ``expert_fully_shard_parallel_size`` (default ``world // EP``) with ``Shard(1)``, which FSDP2
  only allows when dim 1 divides evenly. Global rank ``r`` is EP rank ``r % EP`` and efsdp rank
  ``(r // EP) % efsdp`` (mesh ``(edp, efsdp, ep)``). Each expert module is then its own unit, so its
  all-gather holds only the rank's ``E / EP`` experts: EP does not shrink the sharded states (still
  ``1 / world`` each) but the transient all-gather of a MoE layer.
* **All-gather peak** (transient, bf16): ``2 B x (largest + second-largest unit)`` (the unit running
  and the one FSDP2 prefetches in backward) ``+ 6 B x`` the largest unit's trainable parameters (its
  bf16 unsharded grads and the fp32 reduce-scatter input), all at padded unsharded size. The root
  unit stays gathered from forward through backward (FSDP2 does not reshard the root after
  forward): ``2 B x`` its parameters, held the whole step.
* **Activations: an ESTIMATE**, per micro-batch of ``cutoff_len`` tokens, bf16, flash attention (no
  ``s^2`` term): ``layer_row_bytes`` per token and decoder layer, from the widths in the config and the
  structure of the layer's own modules (``LayerProfile``: HF RMSNorm's fp32 upcast, Gemma's fp32 norm, LayerNorm;
  post-norms, Q/K norms, fused QKV, gated MLP, GQA repeated under a materialised mask, MoE routing and the
  expert-weight copies HF's training loop indexes out), checked layer by layer against the bytes autograd saves
  on every CI tiny family (``hooks.model.saved``, tests/test_activations.py: within 4.7 %). The vision tower is
  costed the same way for ``cutoff_len x merge^2`` patches (worst case: every token an image token; ``merge``
  is ``spatial_merge_size`` or ``1 / downsample_ratio``), and costs nothing when frozen. With recompute
  (non-reentrant) each layer keeps only its input (2h per token), plus one layer's full activations.
  Logits: ``10 B x tokens x vocab``. Buffers and the framework's workspace are left to the headroom
  ``hooks.model.memory_plan`` keeps.

The settings search over these figures (which FSDP2 / EP / freeze / offload settings fit a cluster) is
``hooks.model.memory_plan``; the plan's Markdown table and the answers' summary are ``hooks.model.memory_text``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hooks.model.matching import module_name_match
from hooks.model.plan import ModuleTable, Plan, unit_owners

CUTOFF_LEN = 2048  # the generated YAML's basic_parameters.cutoff_len, at least (partials/config.yaml.jinja)

GIB = 1 << 30
FP32, BF16 = 4, 2
ADAM_STATES = 2  # exp_avg, exp_avg_sq
ADAM_STEP_BYTES = 4  # one fp32 0-dim ``step`` tensor per trainable parameter
LOGIT_BYTES = 10  # per token and vocabulary entry: bf16 logits + fp32 upcast + saved fp32 log-softmax
ACT_BYTES = 2  # activations are bf16


def size_text(n: float, digits: int = 1) -> str:
    """Bytes in the largest binary unit that keeps the figure at least 1: a tiny model's plan reads "24.0 KiB"
    where a fixed GiB column would print rows of "0.0 GiB" that say nothing."""
    for unit, scale in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return f"{n:.0f} B"


# --------------------------------------------------------------------------- shapes

@dataclass(frozen=True)
class ParamShape:
    """One parameter as ``named_parameters()`` lists it (shared ones once), with its owners."""

    name: str
    shape: tuple[int, ...]
    unit: str  # FSDP2 unit owning it without EP ("" = the root)
    expert_module: str | None = None  # the ep_plan module holding it, if any
    trainable: bool = True  # False for a parameter the model itself freezes (Qwen-VL's fixed sin-cos pos_embed)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def module(self) -> str:
        return self.name.rpartition(".")[0]


def shard_rows(d0: int, world: int, rank: int) -> int:
    """Rows rank ``rank`` holds when ``d0`` rows are split like ``torch.chunk(world)``."""
    c = -(-d0 // world)
    return max(0, min(c, d0 - rank * c))


def _rest(shape: tuple[int, ...], dim: int) -> int:
    return math.prod(shape) // shape[dim] if shape[dim] else 0


def shard_numel(shape: tuple[int, ...], world: int, rank: int, dim: int = 0) -> tuple[int, int]:
    """(local, padded) elements of one FSDP2 shard of ``shape`` along ``dim``."""
    if not shape:  # 0-dim parameters are viewed as one element
        shape = (1,)
    rest = _rest(shape, dim)
    return shard_rows(shape[dim], world, rank) * rest, -(-shape[dim] // world) * rest


def is_frozen(param_name: str, patterns: Sequence[str]) -> bool:
    """MindSpeed-MM's freeze: any enclosing module (root ``""`` included) matched by a pattern."""
    if not patterns:
        return False
    parts = param_name.split(".")[:-1]
    modules = [""] + [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(module_name_match(p, m) for p in patterns for m in modules)


@dataclass(frozen=True)
class Layout:
    """How ranks are laid out: world, FSDP shard size, EP and expert-FSDP sizes."""

    world: int
    fsdp: int | None = None  # fully_shard_parallel_size; None = world ("auto")
    ep: int = 1
    efsdp: int | None = None  # expert_fully_shard_parallel_size; None = world // ep

    @property
    def shard(self) -> int:
        return self.fsdp or self.world

    @property
    def expert_shard(self) -> int:
        return self.efsdp or self.world // self.ep


@dataclass
class ParamShard:
    local: int  # elements ``to_local()`` shows
    padded: int  # elements FSDP2 allocates
    unsharded_padded: int  # elements the unit's all-gather produces for it
    unit: str
    trainable: bool


def shard_param(p: ParamShape, layout: Layout, rank: int, trainable: bool) -> ParamShard:
    """One parameter's shard on global rank ``rank`` (see the module docstring for the rules)."""
    shape = p.shape or (1,)
    if p.expert_module is not None and layout.ep > 1:
        ep_rank, ef = rank % layout.ep, layout.expert_shard
        ef_rank = (rank // layout.ep) % ef
        ep_shape = (shard_rows(shape[0], layout.ep, ep_rank), *shape[1:])
        if len(shape) < 2 or shape[1] % ef:
            raise ValueError(f"{p.name} {shape}: expert FSDP shards dim 1 over {ef} ranks and needs it to divide")
        local, padded = shard_numel(ep_shape, ef, ef_rank, dim=1)
        return ParamShard(local, padded, padded * ef, p.expert_module, trainable)
    local, padded = shard_numel(shape, layout.shard, rank % layout.shard)
    return ParamShard(local, padded, padded * layout.shard, p.unit, trainable)


@dataclass
class RankBytes:
    """Bytes one rank holds after an optimizer step."""

    rank: int
    params_local: int
    params_padded: int
    grads_local: int
    grads_padded: int
    optimizer: int  # exp_avg + exp_avg_sq (local) + step tensors
    trainable_tensors: int

    @property
    def total(self) -> int:
        return self.params_padded + self.grads_padded + self.optimizer


def rank_bytes(shapes: Iterable[ParamShape], layout: Layout, rank: int = 0, *, freeze: Sequence[str] = (),
               param_bytes: int = FP32, grad_bytes: int | None = None, state_bytes: int = FP32,
               states: int = ADAM_STATES, step_bytes: int = ADAM_STEP_BYTES,
               no_grad: Collection[str] = ()) -> RankBytes:
    """Per-rank local bytes of parameters, gradients and AdamW states (exact FSDP2/EP arithmetic).

    ``no_grad``: trainable parameters the forward never used (LLaVA's last vision layer under
    ``vision_feature_layer: -2``, a VQ tokenizer entered through ``encode()``): they get no gradient,
    so AdamW keeps no state for them either.
    """
    grad_bytes = param_bytes if grad_bytes is None else grad_bytes
    out = RankBytes(rank, 0, 0, 0, 0, 0, 0)
    skipped = set(no_grad)
    for p in shapes:
        s = shard_param(p, layout, rank, p.trainable and not is_frozen(p.name, freeze) and p.name not in skipped)
        out.params_local += s.local * param_bytes
        out.params_padded += s.padded * param_bytes
        if s.trainable:
            out.grads_local += s.local * grad_bytes
            out.grads_padded += s.padded * grad_bytes
            out.optimizer += s.local * state_bytes * states + step_bytes
            out.trainable_tensors += 1
    return out


def unused_note(names: Sequence[str]) -> str:
    """The parameters that got no gradient (so no optimizer state), as the arithmetic took them."""
    if not names:
        return ""
    return (f"; {len(names)} trainable parameters got no gradient (the forward does not use them, so no optimizer "
            f"state either): {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}")


def local_numels(shapes: Iterable[ParamShape], layout: Layout, rank: int) -> dict[str, int]:
    """``to_local().numel()`` of every parameter on ``rank``: what the trainer's ranks can be checked against."""
    return {p.name: shard_param(p, layout, rank, True).local for p in shapes}


def unit_gathers(shapes: Iterable[ParamShape], layout: Layout,
                 freeze: Sequence[str] = ()) -> dict[str, tuple[int, int]]:
    """Unit -> (padded unsharded elements, of which trainable) that its all-gather materialises on rank 0."""
    units: dict[str, tuple[int, int]] = {}
    for p in shapes:
        s = shard_param(p, layout, 0, p.trainable and not is_frozen(p.name, freeze))
        n, t = units.get(s.unit, (0, 0))
        units[s.unit] = (n + s.unsharded_padded, t + (s.unsharded_padded if s.trainable else 0))
    return units


def param_shapes(model: Any, table: ModuleTable, plan: Plan | dict[str, Any]) -> list[ParamShape]:
    """``named_parameters()`` shapes of a (meta) model with their FSDP2 unit and expert module."""
    plan_d = plan.to_dict() if isinstance(plan, Plan) else plan
    owners = unit_owners(table, plan_d["apply_modules"])
    experts = [m for pattern in plan_d.get("ep_modules", []) for m in table.matching(pattern)]
    out = []
    for name, param in model.named_parameters():
        module = name.rpartition(".")[0]
        expert = next((e for e in experts if module == e or module.startswith(e + ".")), None)
        out.append(ParamShape(name, tuple(param.shape), owners.get(module, ""), expert, param.requires_grad))
    return out


def shapes_from_table(table: ModuleTable, plan: Plan | dict[str, Any]) -> list[ParamShape]:
    """Approximate shapes when only counts are known: each module's own parameters as one flat tensor.

    Totals are exact; the per-rank padding is not (real shapes pad per parameter along dim 0).
    """
    plan_d = plan.to_dict() if isinstance(plan, Plan) else plan
    owners = unit_owners(table, plan_d["apply_modules"])
    experts = [m for pattern in plan_d.get("ep_modules", []) for m in table.matching(pattern)]
    out = []
    for mod in table.modules:
        if mod.own_params:
            expert = next((e for e in experts if mod.name == e or mod.name.startswith(e + ".")), None)
            out.append(ParamShape(f"{mod.name}.params" if mod.name else "params", (mod.own_params,),
                                  owners.get(mod.name, ""), expert))
    return out


def measure_rank(model: Any, optimizer: Any) -> dict[str, Any]:
    """What this rank of a ``fully_shard``-ed model holds after a step, in ``rank_bytes``' terms.

    ``*_local``: ``to_local()`` numel x element size; ``*_padded``: the distinct storages behind
    them (FSDP2's padded shards; one reduce-scatter buffer per unit for the grads); ``optimizer``:
    every tensor in the optimizer state (local shards and ``step``). ``per_param``: local numels.
    """
    import torch

    def local(t: Any) -> Any:
        return t.to_local() if hasattr(t, "to_local") else t

    def storage_bytes(tensors: list[Any]) -> int:
        seen: dict[int, int] = {}
        for t in tensors:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        return sum(seen.values())

    out: dict[str, Any] = {"per_param": {}}
    params = [(n, local(p)) for n, p in model.named_parameters()]
    grads = [local(p.grad) for _, p in model.named_parameters() if p.grad is not None]
    out["per_param"] = {n: t.numel() for n, t in params}
    out["params_local"] = sum(t.numel() * t.element_size() for _, t in params)
    out["params_padded"] = storage_bytes([t for _, t in params])
    out["grads_local"] = sum(g.numel() * g.element_size() for g in grads)
    out["grads_padded"] = storage_bytes(grads)
    out["no_grad"] = sorted(n for n, p in model.named_parameters() if p.requires_grad and p.grad is None)
    out["optimizer"] = sum(local(v).numel() * local(v).element_size() for state in optimizer_states(optimizer)
                           for v in state.values() if isinstance(v, torch.Tensor))
    return out


def optimizer_states(optimizer: Any) -> list[dict[str, Any]]:
    """Every parameter's optimizer state, read without creating any.

    MindSpeed-MM's ``MultiOptimizer`` (EP + FSDP2: one optimizer for expert, one for other parameters)
    exposes ``state`` as a ``ChainMap`` of its members' ``defaultdict``s: reading a parameter through it
    asks the first member, which creates an empty entry and returns it. So a container is read member by
    member.
    """
    members = getattr(optimizer, "optimizers_dict", None)
    if isinstance(members, dict):
        return [state for member in members.values() for state in optimizer_states(member)]
    return list(optimizer.state.values())


# --------------------------------------------------------------------------- dims for activations

@dataclass(frozen=True)
class Dims:
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


def dims_from_config(config: Any) -> Dims:
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
        vh = int(_get(vision, "hidden_size", "embed_dim", "width"))
        vl = int(_get(vision, "depth", "num_hidden_layers", "num_layers"))
        vi = int(_get(vision, "intermediate_size", default=4 * vh) or 4 * vh)
        vheads = int(_get(vision, "num_heads", "num_attention_heads", default=1))
        sms = _get(vision, "spatial_merge_size", default=None) or _get(config, "spatial_merge_size", default=None)
        ratio = _get(config, "downsample_ratio", default=None)
        if sms:
            merge = int(sms) ** 2
        elif ratio:
            merge = round(1 / float(ratio) ** 2)
    return Dims(hidden=h, layers=int(_get(text, "num_hidden_layers", "n_layer", "num_layers")),
                q_dim=heads * head_dim, kv_dim=kv * head_dim, intermediate=inter, top_k=top_k,
                vocab=int(_get(text, "vocab_size", default=_get(config, "vocab_size"))), num_experts=experts,
                vision_hidden=vh, vision_layers=vl, vision_intermediate=vi, patches_per_token=merge, heads=heads,
                kv_heads=kv, moe_intermediate=moe_i, shared_intermediate=shared, vision_heads=vheads)


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


def text_profile(dims: Dims) -> LayerProfile:
    """A decoder layer as the config alone describes it (Llama-style: HF RMSNorm, separate Q/K/V, gated MLP)."""
    moe_i = dims.moe_intermediate if dims.num_experts else dims.intermediate
    return LayerProfile(dims.hidden, dims.q_dim, dims.kv_dim, dims.heads, dims.kv_heads, moe_i,
                        experts=dims.num_experts, top_k=dims.top_k, shared_intermediate=dims.shared_intermediate)


def vision_profile(dims: Dims) -> LayerProfile:
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


def model_profiles(model: Any, plan: Plan, dims: Dims, config: Any) -> dict[str, LayerProfile]:
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


def activations(dims: Dims, cutoff_len: int, *, recompute: bool, vision_frozen: bool,
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


# --------------------------------------------------------------------------- a model's facts

@dataclass
class ModelShapes:
    """Everything the plan needs about one model."""

    name: str
    shapes: list[ParamShape]
    dims: Dims
    # Every tower besides the language tower (``Plan.towers``: media encoders and connectors alike): their blocks
    # are costed as encoder layers, and freezing them is the plan's last resort before CPU offload.
    towers: list[str]
    ep_modules: list[str]
    apply_modules: list[str]
    notes: list[str] = field(default_factory=list)
    profiles: dict[str, LayerProfile] = field(default_factory=dict)  # "text"/"vision": from the layers' modules
    recomputable: bool = True  # False when the plan has no recompute block: the YAML then says recompute: false

    @property
    def total_params(self) -> int:
        return sum(p.numel for p in self.shapes)

    @property
    def expert_params(self) -> int:
        return sum(p.numel for p in self.shapes if p.expert_module is not None)


# --------------------------------------------------------------------------- probing a folder

def shapes_of(model: Any, table: ModuleTable, plan: Plan, config: Any, name: str, notes: list[str]) -> ModelShapes:
    """What the plan needs of a built (meta) model, its module table and its FSDP2/EP plan."""
    dims = dims_from_config(config)
    return ModelShapes(name=name, shapes=param_shapes(model, table, plan), dims=dims,
                       towers=list(plan.towers), ep_modules=plan.ep_modules,
                       apply_modules=plan.apply_modules, notes=notes,
                       profiles=model_profiles(model, plan, dims, config),
                       recomputable=bool(plan.recompute_modules))


# --------------------------------------------------------------------------- the answers' side of the plan

# The render stage reads these from this module (hooks/render/copier_ext.py, hooks/render/files.py): they stay
# here, not beside the search in hooks.model.memory_plan, because a re-export from there would close an import
# circle (memory_plan imports memory).

# What a copy freezes of a plan (answers' memory_plan): the YAML defaults, the verdict, the table.
SUMMARY_KEYS = ("yaml", "loading", "loading_reason", "verdict", "fits", "max_micro_batch", "settings", "nodes",
                "devices_per_node", "device_memory_gb", "markdown")
DEFAULT_CLUSTER = {"devices_per_node": 8, "device_memory_gb": 64.0, "nodes": 1}  # copier.yml's defaults


def sample_cutoff(facts: Any) -> int:
    """The sample length the YAML's ``cutoff_len`` and this plan's activations assume: 2048, or, where one
    small image alone takes over a quarter of that (Phi-3-vision's HD transform makes 17 crops, ~2.5k tokens,
    of any image), the next power of two that holds two such images and 512 tokens of text: a cutoff that
    cuts every image sample would train nothing."""
    processor = (facts.get("processor") or {}) if isinstance(facts, dict) else {}
    one_image = int(processor.get("one_image_tokens") or 0)
    if one_image * 4 <= CUTOFF_LEN:
        return CUTOFF_LEN
    return 1 << (2 * one_image + 512 - 1).bit_length()


__all__ = ["Layout", "ModelShapes", "ParamShape", "RankBytes", "activations", "dims_from_config", "is_frozen",
           "local_numels", "measure_rank", "param_shapes", "rank_bytes", "shard_numel", "shard_rows",
           "unit_gathers"]

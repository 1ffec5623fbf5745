"""Memory plan: per-device bytes under MindSpeed-MM's FSDP2 trainer, and the settings that make a model fit.

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
  Logits: ``10 B x tokens x vocab``. Buffers and the framework's workspace are left to the headroom below.
* **World size 1**: with ``fully_shard_parallel_size`` 1 and no meta init MindSpeed-MM casts the parameters
  to ``param_dtype`` (bf16) and wraps the model in DDP instead of FSDP2: bf16 parameters, bf16 grads plus
  DDP's bucket copy, AdamW states in bf16, and ``clip_grad_norm`` upcasting every grad to fp32 at once after
  backward (``ddp_mode``; 100.6 GiB predicted against 101.0 GiB measured for the 7B shape on one H200).
* **Fit**: the total must stay under ``USABLE_DEVICE_SHARE`` (90%) of device memory: allocator
  fragmentation, communication buffers and the runtime's own memory take the rest.
* **Settings, least intrusive first**: on the node count asked for, the ladder is plain FSDP2
  (``fully_shard_parallel_size`` = one node's devices when several nodes are asked for and that
  fits: HSDP, only the gradient all-reduce crosses nodes; else ``auto`` = world), then freezing
  the vision towers, then ``cpu_offload``, then both; for MoE each step tries EP sizes ascending
  (divisors of the expert count and of world whose expert FSDP splits dim 1 evenly). The first
  that fits at ``micro_batch_size`` 1 wins, unless the plain setting exceeds the usable memory by less than the
  plan's measured error (``PLAN_ERROR``): then it "fits with little margin" and the model stays whole. If none does,
  the verdict is "does not fit" with the
  smallest larger node count that fits *without* freezing or offload (its EP size and settings):
  scaling out is the answer there, and the notes name the smaller node count that freezing /
  offload (slow) would need. ``micro_batch_size`` stays as asked (1 by default) when it fits; the
  largest that fits is reported beside it. Recompute stays on (the templates' default); the plan
  says when it could be turned off, and what freezing the vision tower would save when it is not
  needed to fit.
* **CPU offload** keeps the sharded parameters, grads and optimizer states in pinned host memory:
  it fits only if ``ranks per node x`` those bytes stay under ``USABLE_HOST_SHARE`` (80%) of the
  host memory per node.
* **Loading**: without meta init ModelHub calls ``from_pretrained(dtype=float32, device_map="cpu")``
  on every rank, so a node's host memory must hold ``ranks per node x 4 B x parameters``. The
  plan keeps that (simplest, no checkpoint settings) when it is under ``USABLE_HOST_SHARE`` of the
  host memory per node; otherwise meta init plus ``training.load`` of the Hugging Face folder,
  which streams one tensor at a time into each rank's shards. DCP conversion is the alternative
  for repeated large runs (``LOADING_DCP``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hooks.model.matching import module_name_match
from hooks.model.plan import ModuleTable, Plan, unit_owners

CUTOFF_LEN = 2048  # the generated YAML's basic_parameters.cutoff_len, at least (partials/config.yaml.jinja)

GIB = 1 << 30
FP32, BF16 = 4, 2
ADAM_STATES = 2  # exp_avg, exp_avg_sq
ADAM_STEP_BYTES = 4  # one fp32 0-dim ``step`` tensor per trainable parameter
USABLE_DEVICE_SHARE = 0.9
USABLE_HOST_SHARE = 0.8
# The plan's measured error, the margin intrusive settings must clear: activations within 4.7 % of the bytes
# saved for backward, layer by layer, on every CI tiny family (tests/test_activations.py); shard bytes exact
# against real fully_shard and the trainer's ranks; the 7B world-size-1 total 100.6 GiB predicted against
# 101.0 GiB max_memory_allocated on one H200 (issue 23). 5 % covers the largest of these.
PLAN_ERROR = 0.05
PLAN_ERROR_SOURCE = ("activations within 4.7 % of the saved-tensor bytes per layer on the CI tiny families, "
                     "the 7B total within 0.4 % of max_memory_allocated on one H200")
LOGIT_BYTES = 10  # per token and vocabulary entry: bf16 logits + fp32 upcast + saved fp32 log-softmax
ACT_BYTES = 2  # activations are bf16
MAX_NODES = 128

LOADING_PLAIN = "from_pretrained on every rank"
LOADING_META = "meta init + training.load (HF folder)"
LOADING_DCP = (
    "Alternative for repeated runs: convert the weights once to a DCP checkpoint (one job with the meta "
    "init + HF load settings and training.save_format: dcp, saving after step 0), then training.load: "
    "<dcp dir> with load_format: dcp; every rank then reads only its own shards.")


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
    towers = plan.vision_towers
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


# --------------------------------------------------------------------------- the plan

@dataclass
class ModelShapes:
    """Everything the plan needs about one model."""

    name: str
    shapes: list[ParamShape]
    dims: Dims
    vision_towers: list[str]
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


@dataclass(frozen=True)
class Settings:
    nodes: int
    fully_shard_parallel_size: int
    expert_parallel_size: int = 1
    freeze: tuple[str, ...] = ()
    cpu_offload: bool = False

    def describe(self, world: int) -> str:
        fsdp = "auto" if self.fully_shard_parallel_size == world else self.fully_shard_parallel_size
        bits = [f"{self.nodes} node(s)", f"fully_shard_parallel_size {fsdp}"]
        if self.expert_parallel_size > 1:
            bits.append(f"expert_parallel_size {self.expert_parallel_size}")
        if self.freeze:
            bits.append(f"freeze {list(self.freeze)}")
        if self.cpu_offload:
            bits.append("cpu_offload")
        return ", ".join(bits)


@dataclass
class Breakdown:
    """Bytes per device (rank 0, the largest shard) for one setting."""

    params: int
    grads: int
    optimizer: int
    gather_peak: int  # transient all-gather / reduce-scatter of the largest units
    root_gathered: int
    largest_unit: str
    largest_unit_bytes: int  # bf16, gathered
    activations_per_sample: int  # with recompute
    activations_per_sample_no_recompute: int
    host_per_node: int  # offloaded states on one node's host (0 without offload)
    after_backward: int = 0  # transient once activations are freed: DDP's clip upcasts every grad to fp32
    mode: str = "fsdp2"  # or "ddp": one shard rank without meta init (the framework's DDP path)

    def device_total(self, micro_batch: int, *, recompute: bool = True) -> int:
        act = self.activations_per_sample if recompute else self.activations_per_sample_no_recompute
        fixed = self.params + self.grads + self.optimizer + self.gather_peak + self.root_gathered
        return fixed + max(micro_batch * act, self.after_backward)


def ddp_mode(s: Settings, meta_init: bool) -> bool:
    """MindSpeed-MM's ``fully_shard_parallel_modules``: with ``fully_shard_parallel_size == 1`` and no meta
    init it wraps the model in DDP instead of FSDP2, after casting every parameter to ``param_dtype``."""
    return s.fully_shard_parallel_size == 1 and not meta_init


def breakdown(model: ModelShapes, s: Settings, devices_per_node: int, cutoff_len: int, *,
              meta_init: bool = False) -> Breakdown:
    world = s.nodes * devices_per_node
    layout = Layout(world, s.fully_shard_parallel_size, s.expert_parallel_size)
    frozen_vision = bool(model.vision_towers) and all(
        any(module_name_match(f, v) for f in s.freeze) for v in model.vision_towers)
    act_r = activations(model.dims, cutoff_len, recompute=model.recomputable, vision_frozen=frozen_vision,
                        profiles=model.profiles)
    act_n = activations(model.dims, cutoff_len, recompute=False, vision_frozen=frozen_vision, profiles=model.profiles)
    if ddp_mode(s, meta_init):
        # bf16 parameters, bf16 grads plus DDP's bucket copy of them, AdamW states in the parameters' dtype;
        # clip_grad_norm then upcasts every grad to fp32 at once (``_local_pth_sum``): the step's peak.
        rb = rank_bytes(model.shapes, Layout(1), 0, freeze=s.freeze, param_bytes=BF16, state_bytes=BF16)
        return Breakdown(
            params=rb.params_padded, grads=2 * rb.grads_padded, optimizer=rb.optimizer, gather_peak=0,
            root_gathered=0, largest_unit="", largest_unit_bytes=0, activations_per_sample=act_r.total(1),
            activations_per_sample_no_recompute=act_n.total(1), host_per_node=0,
            after_backward=FP32 // BF16 * rb.grads_padded, mode="ddp")
    rb = rank_bytes(model.shapes, layout, 0, freeze=s.freeze)
    units = unit_gathers(model.shapes, layout, s.freeze)
    root = units.pop("", (0, 0))
    ranked = sorted(units.items(), key=lambda kv: kv[1][0], reverse=True)
    largest, (n1, t1) = ranked[0] if ranked else ("", (0, 0))
    n2 = ranked[1][1][0] if len(ranked) > 1 else 0
    gather = BF16 * (n1 + n2) + (BF16 + FP32) * max(t1, root[1])
    states = rb.params_padded + rb.grads_padded + rb.optimizer
    on_device = 0 if s.cpu_offload else 1
    return Breakdown(
        params=rb.params_padded * on_device, grads=rb.grads_padded * on_device, optimizer=rb.optimizer * on_device,
        gather_peak=gather, root_gathered=BF16 * root[0], largest_unit=largest, largest_unit_bytes=BF16 * n1,
        activations_per_sample=act_r.total(1), activations_per_sample_no_recompute=act_n.total(1),
        host_per_node=0 if on_device else states * devices_per_node)


def _ep_sizes(model: ModelShapes, world: int) -> list[int]:
    """EP sizes to try: 1, then divisors of the expert count and of world whose expert FSDP shards evenly."""
    experts = model.dims.num_experts
    if not experts or not model.ep_modules:
        return [1]
    sizes = [1]
    for ep in range(2, world + 1):
        if experts % ep or world % ep:
            continue
        efsdp = world // ep
        if all(len(p.shape) >= 2 and p.shape[1] % efsdp == 0 for p in model.shapes if p.expert_module):
            sizes.append(ep)
    return sizes


def _ladder(model: ModelShapes, nodes: int, devices_per_node: int) -> list[Settings]:
    """Settings to try at one node count, least intrusive first (see the module docstring)."""
    world = nodes * devices_per_node
    fsdps = [devices_per_node, world] if nodes > 1 else [world]
    freeze = tuple(model.vision_towers)
    levels = [((), False), (freeze, False), ((), True), (freeze, True)] if freeze else [((), False), ((), True)]
    out = []
    for frz, offload in levels:
        for fsdp in fsdps if not (frz or offload) else [world]:
            out += [Settings(nodes, fsdp, ep, frz, offload) for ep in _ep_sizes(model, world)]
    return list(dict.fromkeys(out))


@dataclass
class MemoryPlan:
    """The plan: inputs, chosen settings, per-device bytes, verdict and notes (GiB = 2**30 bytes)."""

    model: str
    total_params: int
    expert_params: int
    devices_per_node: int
    device_memory_gb: float
    nodes: int
    host_memory_gb: float
    cutoff_len: int
    micro_batch_size: int  # as asked
    fits: bool  # on the asked node count
    settings: Settings  # on the asked node count if it fits, else the smallest that does
    breakdown: Breakdown
    max_micro_batch: int
    recompute_needed: bool
    loading: str
    loading_reason: str
    verdict: str
    without_offload_or_freeze: Settings | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def world(self) -> int:
        return self.settings.nodes * self.devices_per_node

    @property
    def usable_bytes(self) -> int:
        return int(self.device_memory_gb * GIB * USABLE_DEVICE_SHARE)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["world"] = self.world
        data["device_total"] = self.breakdown.device_total(self.micro_batch_size_used)
        data["yaml"] = self.yaml_defaults()
        return data

    @property
    def micro_batch_size_used(self) -> int:
        return max(1, min(self.micro_batch_size, self.max_micro_batch))

    def yaml_defaults(self) -> dict[str, Any]:
        """Dotted YAML keys -> values for the generated config."""
        s = self.settings
        out: dict[str, Any] = {
            "parallel.fully_shard_parallel_size": "auto" if s.fully_shard_parallel_size == self.world
            else s.fully_shard_parallel_size,
            "parallel.expert_parallel_size": s.expert_parallel_size,
            "parallel.fsdp_plan.cpu_offload": s.cpu_offload,
            "model.freeze": list(s.freeze),
            "training.micro_batch_size": self.micro_batch_size_used,
            "features.recompute": True,
            "training.init_model_with_meta_device": self.loading == LOADING_META,
        }
        if self.loading == LOADING_META:
            out.update({"training.load": "<model_path>", "training.load_format": "hf",
                        "training.no_load_optim": True, "training.no_load_rng": True, "training.load_strict": True})
        return out

    def markdown(self) -> str:
        """The plan as a Markdown table plus notes, for MIGRATION.md."""
        b, mb = self.breakdown, self.micro_batch_size_used

        def gib(n: int) -> str:
            return f"{n / GIB:.1f} GiB"

        rows = [
            ("hardware", f"{self.nodes} node(s) x {self.devices_per_node} devices x {self.device_memory_gb:g} GiB, "
                         f"{self.host_memory_gb:g} GiB host per node"),
            ("parameters", f"{self.total_params:,}" + (f" ({self.expert_params:,} in experts)"
                                                        if self.expert_params else "")),
            ("verdict", self.verdict),
            ("settings", self.settings.describe(self.world)),
            *(_ddp_rows(b, gib) if b.mode == "ddp" else [
                ("parameters per device (fp32 shard)", gib(b.params)),
                ("gradients per device (fp32 shard)", gib(b.grads)),
                ("optimizer states per device (AdamW, fp32)", gib(b.optimizer))]),
            ("largest unit gathered (bf16)", f"{b.largest_unit or '(root)'}: {gib(b.largest_unit_bytes)}"),
            ("all-gather / reduce-scatter peak", gib(b.gather_peak)),
            ("root unit gathered all step (bf16)", gib(b.root_gathered)),
            (f"activations per sample, cutoff_len {self.cutoff_len} (ESTIMATE)",
             f"{gib(b.activations_per_sample)} with recompute, "
             f"{gib(b.activations_per_sample_no_recompute)} without"),
            (f"total per device at micro_batch_size {mb}",
             f"{gib(b.device_total(mb))} of {gib(self.usable_bytes)} usable "
             f"({USABLE_DEVICE_SHARE:.0%} of {self.device_memory_gb:g} GiB)"),
            ("largest micro_batch_size that fits", str(self.max_micro_batch)),
            *([("host memory for offloaded states per node", gib(b.host_per_node))] if self.settings.cpu_offload
              else []),
            ("loading", f"{self.loading}: {self.loading_reason}"),
        ]
        lines = ["| item | value |", "|---|---|"]
        lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in rows]
        lines += ["", *[f"- {n}" for n in self.notes]]
        return "\n".join(lines)


def _ddp_rows(b: Breakdown, gib: Any) -> list[tuple[str, str]]:
    """The world-size-1 rows: the framework's DDP path, not FSDP2 (``ddp_mode``)."""
    return [("parameters per device (DDP at one shard rank: bf16, param_dtype)", gib(b.params)),
            ("gradients + DDP bucket copy (bf16)", gib(b.grads)),
            ("optimizer states per device (AdamW, bf16 like the parameters)", gib(b.optimizer)),
            ("clip_grad_norm's fp32 copies of the grads (after backward, instead of activations)",
             gib(b.after_backward))]


def _max_micro_batch(b: Breakdown, usable: int, recompute: bool = True) -> int:
    fixed = b.device_total(0) - b.after_backward  # the states; the clip's transient replaces activations
    per = b.activations_per_sample if recompute else b.activations_per_sample_no_recompute
    if fixed + max(per, b.after_backward) > usable:
        return 0
    return int((usable - fixed) // per) if per else 1024


def _fits(b: Breakdown, usable: int, host_usable: int) -> bool:
    return b.device_total(1) <= usable and b.host_per_node <= host_usable


def _search(model: ModelShapes, nodes: range, devices_per_node: int, cutoff_len: int, usable: int,
            host_usable: int, *, intrusive: bool = True, meta_init: bool = False) -> tuple[Settings, Breakdown] | None:
    """The first setting that fits, over ``nodes`` in order and each node count's ladder."""
    for n in nodes:
        for s in _ladder(model, n, devices_per_node):
            if not intrusive and (s.freeze or s.cpu_offload):
                continue
            b = breakdown(model, s, devices_per_node, cutoff_len, meta_init=meta_init)
            if _fits(b, usable, host_usable):
                return s, b
    return None


def plan_memory(model: ModelShapes, *, devices_per_node: int = 8, device_memory_gb: float = 64, nodes: int = 1,
                host_memory_gb: float = 1024, cutoff_len: int = CUTOFF_LEN, micro_batch_size: int = 1) -> MemoryPlan:
    """Choose settings and compute per-device bytes; see the module docstring for every rule."""
    usable = int(device_memory_gb * GIB * USABLE_DEVICE_SHARE)
    host_usable = int(host_memory_gb * GIB * USABLE_HOST_SHARE)
    notes = list(model.notes)
    meta_init = FP32 * model.total_params * devices_per_node > host_usable  # the loading chosen below
    search = {"devices_per_node": devices_per_node, "cutoff_len": cutoff_len, "usable": usable,
              "host_usable": host_usable, "meta_init": meta_init}
    found = _search(model, range(nodes, nodes + 1), **search)
    plain = None
    close = None if found and not (found[0].freeze or found[0].cpu_offload) else _search(
        model, range(nodes, nodes + 1), **{**search, "usable": int(usable * (1 + PLAN_ERROR))}, intrusive=False)
    if close is not None:  # over the usable memory by less than the plan's own error: no reason to intrude
        s, b = close
        fits = True
        verdict = (f"fits with little margin on {nodes} node(s): {b.device_total(1) / GIB:.1f} GiB predicted of "
                   f"{usable / GIB:.1f} GiB usable, within the plan's measured error ({PLAN_ERROR:.0%})")
        notes.append(f"Fits with little margin: the prediction exceeds the usable memory by less than the plan's "
                     f"measured error ({PLAN_ERROR:.0%}, {PLAN_ERROR_SOURCE}), so the model stays whole (no freeze, "
                     "offload or more nodes); if the first steps run out of memory, freeze the vision tower or add "
                     "a node.")
    elif found is not None:
        s, b = found
        fits, verdict = True, f"fits on {nodes} node(s)"
        if s.freeze or s.cpu_offload:
            plain = (_search(model, range(nodes + 1, MAX_NODES + 1), **search, intrusive=False) or (None,))[0]
            if plain:
                notes.append("Without freezing or CPU offload it needs "
                             f"{plain.describe(plain.nodes * devices_per_node)}.")
    else:
        fits = False
        more = range(nodes + 1, MAX_NODES + 1)
        found = _search(model, more, **search, intrusive=False)
        if found is None:
            s = Settings(nodes, nodes * devices_per_node, max(_ep_sizes(model, nodes * devices_per_node)),
                         tuple(model.vision_towers), True)
            b = breakdown(model, s, devices_per_node, cutoff_len, meta_init=meta_init)
            verdict = f"does not fit on up to {MAX_NODES} nodes"
        else:
            s, b = found
            plain = s
            verdict = (f"does not fit on {nodes} node(s); smallest that fits: "
                       f"{s.describe(s.nodes * devices_per_node)}")
            squeezed = _search(model, range(nodes + 1, s.nodes), **search)
            if squeezed:
                notes.append(f"With freezing / CPU offload (slow) {squeezed[0].nodes} node(s) would do: "
                             f"{squeezed[0].describe(squeezed[0].nodes * devices_per_node)}.")
    world = s.nodes * devices_per_node
    max_mb = _max_micro_batch(b, usable)
    if micro_batch_size > max_mb and close is None:
        notes.append(f"micro_batch_size {micro_batch_size} does not fit; {max(max_mb, 1)} does "
                     "(raise gradient_accumulation_steps to keep the global batch).")
    recompute_needed = b.device_total(max(1, min(micro_batch_size, max_mb)), recompute=False) > usable
    if not recompute_needed:
        notes.append(f"Recompute could be turned off: without it up to micro_batch_size "
                     f"{_max_micro_batch(b, usable, recompute=False)} fits (faster, no re-run of forward).")
    if s.expert_parallel_size > 1:
        ep, experts = s.expert_parallel_size, model.dims.num_experts
        notes.append(f"Expert parallel {ep}: each rank holds {experts // ep} of {experts} experts, FSDP-sharded "
                     f"over {world // ep} ranks "
                     "(expert_fully_shard_parallel_size default); it shrinks the MoE layers' all-gather, not the "
                     "sharded states. Off NPU set ep_plan.use_npu_fused_ops: false.")
    if model.vision_towers and not s.freeze:
        frozen = breakdown(model, Settings(s.nodes, s.fully_shard_parallel_size, s.expert_parallel_size,
                                           tuple(model.vision_towers), s.cpu_offload), devices_per_node, cutoff_len,
                           meta_init=meta_init)
        saved = b.device_total(1) - frozen.device_total(1)
        notes.append(f"model.freeze stays [] (training the vision tower fits). Freezing {model.vision_towers} would "
                     f"save {saved / GIB:.1f} GiB per device (its grads, optimizer states and activations); "
                     "MindSpeed-MM's own Qwen3-VL examples freeze model.visual by choice, to fine-tune the "
                     "language side only.")
    if s.freeze:
        notes.append(f"model.freeze {list(s.freeze)} is proposed only because the model does not fit otherwise: "
                     "frozen towers get no gradients, no optimizer states and no saved activations.")
    if s.cpu_offload:
        notes.append("parallel.fsdp_plan.cpu_offload keeps parameters, gradients and optimizer states in pinned host "
                     f"memory ({b.host_per_node / GIB:.0f} GiB per node) and runs AdamW on the CPU: slow, only "
                     "because nothing else fits.")
    model_bytes = FP32 * model.total_params
    per_node = model_bytes * devices_per_node
    if per_node <= host_usable:
        loading = LOADING_PLAIN
        reason = (f"{devices_per_node} ranks x {model_bytes / GIB:.0f} GiB (fp32) = {per_node / GIB:.0f} GiB <= "
                  f"{USABLE_HOST_SHARE:.0%} of {host_memory_gb:g} GiB host memory per node")
    else:
        loading = LOADING_META
        reason = (f"{devices_per_node} ranks x {model_bytes / GIB:.0f} GiB (fp32) = {per_node / GIB:.0f} GiB > "
                  f"{USABLE_HOST_SHARE:.0%} of {host_memory_gb:g} GiB host memory per node; training.load streams "
                  "one tensor at a time into each rank's shards (load_format: hf, no_load_optim/no_load_rng: true, "
                  "load_strict: true so a missing key fails instead of training on uninitialised memory)")
        notes.append(LOADING_DCP)
    notes.append("Activations are an ESTIMATE: per token and layer what the layer's modules keep for backward "
                 "(norms' fp32 copies, Q/K/V, attention output, MLP), checked within 4.7 % of the saved bytes on "
                 "tiny models; only the layer inputs (2h) kept with recompute plus one full layer; vision tower for "
                 "cutoff_len x merge^2 patches unless frozen; logits 10 B x tokens x vocab.")
    return MemoryPlan(
        model=model.name, total_params=model.total_params, expert_params=model.expert_params,
        devices_per_node=devices_per_node, device_memory_gb=device_memory_gb, nodes=nodes,
        host_memory_gb=host_memory_gb, cutoff_len=cutoff_len, micro_batch_size=micro_batch_size, fits=fits,
        settings=s, breakdown=b, max_micro_batch=max_mb, recompute_needed=recompute_needed, loading=loading,
        loading_reason=reason, verdict=verdict, without_offload_or_freeze=plain, notes=notes)


# --------------------------------------------------------------------------- probing a folder

def shapes_of(model: Any, table: ModuleTable, plan: Plan, config: Any, name: str, notes: list[str]) -> ModelShapes:
    """What the plan needs of a built (meta) model, its module table and its FSDP2/EP plan."""
    dims = dims_from_config(config)
    return ModelShapes(name=name, shapes=param_shapes(model, table, plan), dims=dims,
                       vision_towers=plan.vision_towers, ep_modules=plan.ep_modules,
                       apply_modules=plan.apply_modules, notes=notes,
                       profiles=model_profiles(model, plan, dims, config),
                       recomputable=bool(plan.recompute_modules))


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


def summary(plan: MemoryPlan) -> dict[str, Any]:
    """The plan as the answers file keeps it."""
    data = {**plan.to_dict(), "markdown": plan.markdown()}
    return {k: data[k] for k in SUMMARY_KEYS if k in data}


__all__ = ["Layout", "MemoryPlan", "ModelShapes", "ParamShape", "RankBytes", "Settings", "activations",
           "dims_from_config", "is_frozen", "local_numels", "measure_rank", "param_shapes",
           "plan_memory", "rank_bytes", "shard_numel", "shard_rows", "unit_gathers"]

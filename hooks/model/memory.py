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
The activation estimate's arithmetic is ``hooks.model.memory_activations``, the config sizes it reads
``hooks.model.memory_config``; what a live rank holds, measured to check these figures, ``hooks.model.memory_measure``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hooks.model.matching import module_name_match
from hooks.model.memory_activations import LayerProfile, model_profiles
from hooks.model.memory_config import ActivationDims, dims_from_config
from hooks.model.plan import ModuleTable, Plan, unit_owners

CUTOFF_LEN = 2048  # the generated YAML's basic_parameters.cutoff_len, at least (partials/config.yaml.jinja)

GIB = 1 << 30
FP32, BF16 = 4, 2
ADAM_STATES = 2  # exp_avg, exp_avg_sq
ADAM_STEP_BYTES = 4  # one fp32 0-dim ``step`` tensor per trainable parameter


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


# --------------------------------------------------------------------------- a model's facts

@dataclass
class ModelShapes:
    """Everything the plan needs about one model."""

    name: str
    shapes: list[ParamShape]
    dims: ActivationDims
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


def sample_cutoff(one_image_tokens: int) -> int:
    """The sample length the YAML's ``cutoff_len`` and this plan's activations assume: 2048, or, where one
    small image alone takes over a quarter of that (Phi-3-vision's HD transform makes 17 crops, ~2.5k tokens,
    of any image), the next power of two that holds two such images and 512 tokens of text: a cutoff that
    cuts every image sample would train nothing."""
    one_image = int(one_image_tokens or 0)  # ProcessorFacts.one_image_tokens: one small image and a text
    if one_image * 4 <= CUTOFF_LEN:
        return CUTOFF_LEN
    return 1 << (2 * one_image + 512 - 1).bit_length()


__all__ = ["Layout", "ModelShapes", "ParamShape", "RankBytes", "is_frozen", "local_numels", "param_shapes",
           "rank_bytes", "shard_numel", "shard_rows", "unit_gathers"]

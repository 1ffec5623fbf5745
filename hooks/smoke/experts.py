"""Experts no token reaches: do they still get a gradient? FSDP2 needs every rank to reduce the same set.

FSDP2 reduce-scatters, per sharded unit, the gradients of the parameters that got one in backward, laid end to
end in parameter order (torch's ``FSDPParamGroup.post_backward``; MindSpeed-MM's own ``post_backward`` for torch
2.7.1 and 2.9.0, ``mindspeed_mm/fsdp/ops/fully_shard/fully_shard.py``, does the same). A mixture-of-experts layer
that runs only the experts its tokens were routed to leaves the others without a gradient, so two ranks whose
tokens reach different experts hand the collective different sets: gloo stops ("Received data size doesn't match
expected size"), NCCL and HCCL wait, and where the sizes happen to agree one expert's gradient is summed into
another's. transformers 4.57's Qwen3-Omni thinker and GLM-4.5V loop over the experts their tokens hit (an
``nn.ModuleList`` of per-expert MLPs); Qwen3-VL-MoE's experts are one stacked parameter per layer, which always
gets a gradient (zero rows for the experts without tokens); MindSpeed-MM's own qwen3omni plugin runs every expert
on every token, weighted by a routing matrix that is zero off the top-k.

``unrouted_experts`` finds out on the model itself, whatever its code: one token forward and backward in train mode
(it reaches its top-k experts of each layer, no more), then the modules the plan's expert patterns match
(``ep_modules``, e.g. ``model.layers.{*}.mlp.experts``) holding trainable parameters without a gradient beside
ones with a gradient. torch 2.13's ``FSDPModule.set_reduce_scatter_unused_params`` reduces zeros for such
parameters (the gradient they would get, so the objective is the same); older torch and MindSpeed-MM's trainer
have no such switch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hooks.model.matching import module_name_match

# What the ranks' logs say when their reduce-scatters disagree (gloo; NCCL/HCCL wait until their timeout instead).
MISMATCH_SIGN = "Received data size doesn't match expected size"


@dataclass(frozen=True)
class UnroutedExperts:
    """What one token's backward left without a gradient among the model's experts.

    ``checked``: expert modules the patterns matched; ``partial``: those where some trainable parameters got a
    gradient and others none (the experts the token was not routed to); ``example``: one such parameter;
    ``model``: the class checked; ``error``: why it could not be evaluated ("" when it was).
    """

    checked: int = 0
    partial: list[str] = field(default_factory=list)
    example: str = ""
    model: str = ""
    error: str = ""

    @property
    def hazard(self) -> bool:
        return bool(self.partial)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnroutedExperts:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def finding(self, remedy: str = "") -> str:
        """The smoke's WARNING line ("" when every expert gets a gradient or nothing was checked); ``remedy``:
        what this smoke itself did about it, if anything."""
        if self.error:
            return f"not verified: whether experts no token reaches get a gradient: {self.error}"
        if not self.hazard:
            return ""
        return (f"WARNING: experts no token reaches get no gradient: one token through {self.model} left the "
                f"experts it was not routed to without one ({self.example}; {len(self.partial)} of {self.checked} "
                "expert modules). FSDP2 reduce-scatters only the gradients a rank has, so ranks whose tokens reach "
                "different experts disagree: gloo stops, NCCL/HCCL hang, equal sizes add one expert's gradient to "
                "another's. MindSpeed-MM's trainer has no switch for unused parameters (its fully_shard patch for "
                "torch 2.7.1/2.9.0 skips them), so this scaffold can stop at any step once ranks route "
                "differently; train model code whose experts always get a gradient (one stacked parameter per "
                "layer, or every expert run on every token as MindSpeed-MM's qwen3omni plugin does)"
                + (f"; {remedy}" if remedy else ""))


def unrouted_experts(model: Any, patterns: Sequence[str]) -> UnroutedExperts:
    """One token's forward and backward through ``model`` (train mode, RNG restored, gradients cleared after),
    then the expert modules matched by ``patterns`` whose trainable parameters got a gradient only in part."""
    import torch

    name = type(model).__name__
    experts = [(n, m) for n, m in model.named_modules() if any(module_name_match(p, n) for p in patterns)]
    if not experts:
        return UnroutedExperts(model=name)
    trainable = [p for p in model.parameters() if p.requires_grad]
    if any(p.grad is not None for p in trainable):
        return UnroutedExperts(model=name, error="the model already holds gradients")
    was_training = model.training
    try:
        with torch.random.fork_rng(devices=[]):
            model.train()
            ids = torch.tensor([[_plain_token(model)]])
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
            logits = out.logits if hasattr(out, "logits") else out[0]
            logits.float().sum().backward()
        partial, example = [], ""
        for module_name, module in experts:
            named = [(f"{module_name}.{n}", p) for n, p in module.named_parameters() if p.requires_grad]
            missing = [n for n, p in named if p.grad is None]
            if missing and len(missing) < len(named):
                partial.append(module_name)
                example = example or missing[0]
        return UnroutedExperts(checked=len(experts), partial=partial, example=example, model=name)
    except Exception as err:  # noqa: BLE001 - never evidence: "could not evaluate" with its cause
        cause = (str(err).strip().splitlines() or [""])[-1][:200]
        return UnroutedExperts(model=name, error=f"one token through {name} raised {type(err).__name__}: {cause}")
    finally:
        for p in trainable:
            p.grad = None
        model.train(was_training)


def _plain_token(model: Any) -> int:
    """A token id no media placeholder uses (those would make forward wait for pixels or clips): the first id
    past the config's special ids, counted from 0."""
    config = getattr(model, "config", None)
    taken = set()
    for cfg in (config, getattr(config, "text_config", None)):
        for key, value in (vars(cfg).items() if cfg is not None else ()):
            if key.endswith(("token_id", "token_index")) and isinstance(value, int):
                taken.add(value)
    return next(i for i in range(len(taken) + 1) if i not in taken)


def mismatch_error(log_text: str) -> str:
    """The ranks' reduce-scatters disagreed, in words ("" when the log does not say so)."""
    if MISMATCH_SIGN not in log_text:
        return ""
    return (f"the ranks' FSDP2 gradient reduce-scatters differ in size (gloo: {MISMATCH_SIGN}): their parameter "
            "sets with a gradient differ")


def reduce_zeros_for(model: Any, found: UnroutedExperts) -> str:
    """On a model already under ``fully_shard``: the FSDP units that own the partly unrouted experts reduce-scatter
    zeros for parameters without a gradient (torch >= 2.13); what was done, in words, or why not."""
    if not found.hazard:
        return ""
    units = {id(unit): unit for unit in (_owning_unit(model, name) for name in found.partial) if unit is not None}
    if not units:
        return "no FSDP unit owns those experts"
    if not all(hasattr(unit, "set_reduce_scatter_unused_params") for unit in units.values()):
        import torch

        return (f"torch {torch.__version__} has no FSDPModule.set_reduce_scatter_unused_params, so this smoke "
                "stops too once its ranks route differently")
    for unit in units.values():
        unit.set_reduce_scatter_unused_params(True, recurse=False)
    return (f"this contract smoke has the {len(units)} FSDP unit(s) owning them reduce-scatter zeros instead "
            "(torch's FSDPModule.set_reduce_scatter_unused_params: the same gradient, so the same objective)")


def _owning_unit(model: Any, name: str) -> Any:
    """The nearest module at or above ``name`` that ``fully_shard`` made an FSDP unit (its parameter group)."""
    from torch.distributed.fsdp import FSDPModule

    parts = name.split(".")
    for end in range(len(parts), -1, -1):
        module = model.get_submodule(".".join(parts[:end]))
        if isinstance(module, FSDPModule):
            return module
    return None

"""How the contract smoke's rank distributes the model, as MindSpeed-MM's trainer does (reference §6.2), one job
per function in torchtitan's manner: ``apply_freeze`` (``model.freeze``), ``apply_recompute``
(``features.recompute_plan``), ``apply_fsdp`` (``fsdp_plan.apply_modules``, post-order, the root last), chained in
the trainer's order by ``parallelize``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from hooks.model.matching import module_name_match
from hooks.smoke.experts import UnroutedExperts, unrouted_experts

if TYPE_CHECKING:
    import torch
    from torch import nn


class ContractError(RuntimeError):
    """A violation of the MindSpeed-MM contract, reported verbatim as the smoke's error."""


def _post_order(module: nn.Module, prefix: str = "") -> Iterator[tuple[str, nn.Module]]:
    """Children before parents, as MindSpeed-MM walks the tree to pick FSDP units."""
    for name, child in module.named_children():
        yield from _post_order(child, f"{prefix}.{name}" if prefix else name)
    yield prefix, module


def apply_freeze(model: nn.Module, patterns: Sequence[str]) -> None:
    """``model.freeze``: every parameter under a matched module stops requiring grad (silent if none)."""
    for name, module in model.named_modules():
        if any(module_name_match(pattern, name) for pattern in patterns):
            for param in module.parameters():
                param.requires_grad_(False)


def apply_recompute(model: nn.Module, patterns: Sequence[str]) -> None:
    """``features.recompute_plan``: checkpoint matched modules as MindSpeed-MM's ``recompute_wrapper`` does.

    Its wrapper always passes ``past_key_values=None``, so a target whose ``forward`` takes neither
    that nor ``**kwargs`` fails here, as it would in the trainer.
    """
    from torch.utils.checkpoint import checkpoint

    for _, module in _matched(model.named_modules(), patterns, "recompute_plan"):
        module.forward = _checkpointed(module.forward, checkpoint)


def _checkpointed(forward: Any, checkpoint: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["past_key_values"] = None
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    return wrapper


def _matched(
    named: Iterator[tuple[str, nn.Module]], patterns: Sequence[str], field: str
) -> list[tuple[str, nn.Module]]:
    """Modules any pattern matches, in ``named``'s order; a pattern that matches nothing is an error naming it."""
    hits = dict.fromkeys(patterns, 0)
    matched = []
    for name, module in named:
        names = [p for p in patterns if module_name_match(p, name)]
        for pattern in names:
            hits[pattern] += 1
        if names:
            matched.append((name, module))
    missing = [p for p, count in hits.items() if count == 0]
    if missing:
        raise ContractError(f"{field} pattern(s) {missing} matched no module of the model")
    return matched


def _fsdp_units(model: nn.Module, patterns: Sequence[str]) -> list[nn.Module]:
    """Modules to shard, in post-order, after checking that every pattern names something."""
    units: list[nn.Module] = []
    seen: set[int] = set()
    for name, module in _matched(_post_order(model), patterns, "apply_modules"):
        if name and id(module) not in seen:
            seen.add(id(module))
            units.append(module)
    if not units:
        raise ContractError("apply_modules matched no module: only the root would be sharded")
    return units


def apply_fsdp(model: nn.Module, patterns: Sequence[str], mesh: Any, dtype: torch.dtype) -> None:
    """fully_shard each unit (post-order) then the root, with one config, as §6.2 does."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import DTensor

    config = {
        "mesh": mesh,
        "reshard_after_forward": True,
        "mp_policy": MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32),
    }
    for unit in _fsdp_units(model, patterns):
        fully_shard(unit, **config)
    fully_shard(model, **config)
    plain = [name for name, p in model.named_parameters() if not isinstance(p, DTensor)]
    if plain:
        raise ContractError(f"{len(plain)} parameter(s) are not DTensors after fully_shard, e.g. {plain[:3]}")


def parallelize(model: nn.Module, *, freeze: Sequence[str], recompute: Sequence[str], apply_modules: Sequence[str],
                mesh: Any, dtype: torch.dtype, experts: Sequence[str] = ()) -> UnroutedExperts | None:
    """Freeze, wrap the recompute targets, shard: the trainer's order. ``experts`` (the plan's ``ep_modules``) are
    checked for experts no token reaches (``hooks.smoke.experts``) on the frozen model before it is wrapped and
    sharded; None when the plan has none."""
    apply_freeze(model, freeze)
    found = unrouted_experts(model, experts) if experts else None  # same weights, same answer per rank
    apply_recompute(model, recompute)
    apply_fsdp(model, apply_modules, mesh, dtype)
    return found

"""What one rank of a ``fully_shard``-ed model holds after a step, measured on the live model and optimizer: the
figures ``hooks.model.memory``'s arithmetic is checked against (the smoke's observer and the contract smoke
call it in the trainer's ranks).
"""

from __future__ import annotations

from typing import Any


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

"""The contract smoke's batches: one sample per micro-batch, rank-strided, encoded by ``hooks.data.encoders``, kept to
what ``forward`` accepts and cast to ``param_dtype`` as MindSpeed-MM's ``move_to_device`` does.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hooks.data.encoders import encode, load_samples
from hooks.smoke.parallelize import ContractError

if TYPE_CHECKING:
    import torch
    from torch import nn


def accepted_kwargs(model: nn.Module) -> set[str] | None:
    """Names ``forward`` accepts, or None when it takes ``**kwargs`` (then every key is passed)."""
    params = inspect.signature(model.forward).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params}


def rank_batches(model_dir: str, data_json: str | None, media_root: str | None, trust_remote_code: bool, rank: int,
                 world: int) -> Iterator[dict[str, Any]]:
    """Micro-batches of one sample, rank-strided so ranks see different data, cycling forever."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir, trust_remote_code=trust_remote_code)
    samples = load_samples(data_json, media_root, processor)
    if not samples:
        raise ContractError("the data set is empty")
    index = rank
    while True:
        yield encode(processor, samples[index % len(samples)], Path(model_dir))
        index += world


def prepare_batch(batch: dict[str, Any], accepted: set[str] | None, dtype: torch.dtype) -> dict[str, Any]:
    """Keep what forward accepts and cast floating tensors to param_dtype, like ``move_to_device``."""
    import torch

    kept = {k: v for k, v in batch.items() if accepted is None or k in accepted}
    if "labels" not in kept:
        raise ContractError("forward does not accept 'labels'")
    return {
        k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for k, v in kept.items()
    }

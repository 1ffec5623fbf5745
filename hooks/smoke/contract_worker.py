"""One rank of the contract smoke (``hooks.smoke.contract``): the FSDP2 training loop MindSpeed-MM's trainer runs.

The rank joins the gloo group, loads the model in fp32, freezes, wraps and shards it
(``hooks.smoke.parallelize``), trains ``steps`` iterations on its share of the samples (``hooks.smoke.batches``)
and always leaves one JSON result: losses, gradient norms, label tokens, what it holds after the first step
against the memory plan's arithmetic, or the error it stopped on.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hooks.data import IGNORE_INDEX
from hooks.data.encoders import SampleError
from hooks.lifetime import follow_owner
from hooks.model.stages import TrainedStage
from hooks.smoke.batches import accepted_kwargs, prepare_batch, rank_batches
from hooks.smoke.experts import reduce_zeros_for
from hooks.smoke.parallelize import ContractError, parallelize
from hooks.smoke.ranks import RankResult

if TYPE_CHECKING:
    import torch
    from torch import nn

SEED = 1234
DTYPES = {
    "fp32": "float32",
    "float32": "float32",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
}

SHARD_KEYS = ("params_local", "grads_local", "optimizer")  # bytes per rank, as hooks.model.memory counts them


@dataclass
class WorkerArgs:
    """Everything a worker needs, written once as JSON by the parent."""

    model_dir: str
    apply_modules: list[str]
    freeze: list[str]
    recompute: list[str]
    data_json: str | None
    media_root: str | None
    steps: int
    trust_remote_code: bool
    param_dtype: str
    lr: float
    timeout_s: int
    store_path: str
    result_dir: str
    stage: dict[str, str] = field(default_factory=dict)  # the trained sub-model (ModelFacts.trained_submodule)
    experts: list[str] = field(default_factory=list)  # the plan's ep_modules: expert containers (hooks.smoke.experts)


# --------------------------------------------------------------------------------------------
# Worker side: one rank of the FSDP2 training loop.
# --------------------------------------------------------------------------------------------


def worker_main(args_path: Path) -> int:
    """Run one rank and always leave a result file, so the parent can tell what went wrong."""
    follow_owner()  # a copy that ends early (hooks.lifetime) takes its smoke ranks with it
    args = WorkerArgs(**json.loads(args_path.read_text()))
    rank = int(os.environ["RANK"])
    out = RankResult(rank=rank)
    code = 0
    try:
        _train(args, rank, int(os.environ["WORLD_SIZE"]), out)
    except Exception as exc:  # noqa: BLE001 - any failure is the smoke's finding, reported as such
        out.failed_at = time.time()
        out.error = str(exc) if isinstance(exc, (ContractError, SampleError)) else f"{type(exc).__name__}: {exc}"
        out.traceback = traceback.format_exc()
        traceback.print_exc()
        code = 1
    out.peak_rss_mb = _peak_rss_mb()
    (Path(args.result_dir) / f"result{rank}.json").write_text(json.dumps(asdict(out)))
    return code


def _train(args: WorkerArgs, rank: int, world: int, out: RankResult) -> None:
    """Set up the process group, build and shard the model, then run the training steps."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    import torch
    import torch.distributed as dist

    _seed_everything(SEED)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{args.store_path}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=args.timeout_s),
    )
    mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (world,))
    dtype = getattr(torch, DTYPES[args.param_dtype])
    model = load_model(Path(args.model_dir), args.trust_remote_code, TrainedStage.from_dict(args.stage))
    # requires_grad as the model's own __init__ left it: Qwen2-Audio's sinusoidal embed_positions is fixed
    shapes = [(name, tuple(p.shape), p.requires_grad) for name, p in model.named_parameters()]
    accepted = accepted_kwargs(model)  # the signature only: freezing, wrapping and sharding leave it as it is
    found = parallelize(model, freeze=args.freeze, recompute=args.recompute, apply_modules=args.apply_modules,
                        mesh=mesh, dtype=dtype, experts=args.experts)
    if found is not None:
        out.experts, out.experts_remedy = found.to_dict(), reduce_zeros_for(model, found)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ContractError(f"no trainable parameters: model.freeze {args.freeze} froze every parameter")
    optimizer = torch.optim.AdamW(params, lr=args.lr, foreach=False)
    batches = rank_batches(args.model_dir, args.data_json, args.media_root, args.trust_remote_code, rank, world)
    model.train()
    for step in range(args.steps):
        batch = prepare_batch(next(batches), accepted, dtype)
        out.label_tokens += int((batch["labels"] != IGNORE_INDEX).sum())
        measure = _shard_recorder(model, optimizer, out) if step == 0 else None
        loss, norm = _train_step(model, batch, params, optimizer, world, measure)
        out.losses.append(loss)
        out.grad_norms.append(norm)
        if rank == 0:
            print(f"step {step + 1}/{args.steps} loss {loss:.6f} grad norm {norm:.4f}", flush=True)
    out.planned = _planned_shards(shapes, args.freeze, rank, world, out.no_grad)


def _shard_recorder(model: nn.Module, optimizer: Any, out: RankResult) -> Callable[[], None]:
    """After the first optimizer step (gradients still there, AdamW states created): what this rank holds."""

    def record() -> None:
        from hooks.model.memory_measure import measure_rank

        measured = measure_rank(model, optimizer)
        out.shards = {k: measured[k] for k in SHARD_KEYS}
        out.no_grad = measured["no_grad"]

    return record


def _planned_shards(shapes: list[tuple[str, tuple[int, ...], bool]], freeze: Sequence[str], rank: int,
                    world: int, no_grad: Sequence[str]) -> dict[str, int]:
    """The memory plan's arithmetic for this rank (fp32 parameters, gradients and AdamW states)."""
    from hooks.model.memory import Layout, ParamShape, rank_bytes

    planned = rank_bytes([ParamShape(name, shape, "", trainable=trainable) for name, shape, trainable in shapes],
                         Layout(world=world), rank, freeze=freeze, no_grad=no_grad)
    return {k: getattr(planned, k) for k in SHARD_KEYS}


def _seed_everything(seed: int) -> None:
    """Same seed on every rank: weights missing from a checkpoint must initialise identically."""
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    with contextlib.suppress(ImportError):
        import numpy as np

        np.random.seed(seed)


def _peak_rss_mb() -> float:
    """Peak resident memory of this rank; ru_maxrss is KiB on Linux but bytes on macOS."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024, 1)


# ---- model -------------------------------------------------------------------------------------


def load_model(model_dir: Path, trust_remote_code: bool, stage: TrainedStage | None = None) -> nn.Module:
    """Load in fp32 like MindSpeed-MM; prefer sdpa, fall back to eager and to the config's class. ``stage``: the
    trained sub-model of a bundle, built from its sub-config with its weights (``hooks.model.stages``)."""
    import torch

    errors: list[str] = []
    if stage is not None:
        from hooks.model.stages import load_trained

        for attn in ("sdpa", "eager"):
            try:
                return load_trained(model_dir, stage, trust_remote_code=trust_remote_code, dtype=torch.float32,
                                    attn_implementation=attn)
            except (ValueError, ImportError, KeyError, TypeError, AttributeError, OSError) as exc:
                errors.append(f"{stage.class_name}(attn={attn}): {type(exc).__name__}: {exc}")
        raise ContractError("could not load the model: " + " | ".join(errors))
    from hooks.model.build import keep_frozen

    for name, cls in _model_classes(model_dir, trust_remote_code):
        for attn in ("sdpa", "eager"):
            try:
                return keep_frozen(cls.from_pretrained(
                    model_dir,
                    dtype=torch.float32,
                    trust_remote_code=trust_remote_code,
                    attn_implementation=attn,
                ))
            except (ValueError, ImportError, KeyError, TypeError, AttributeError, OSError) as exc:
                errors.append(f"{name}(attn={attn}): {type(exc).__name__}: {exc}")
    raise ContractError("could not load the model: " + " | ".join(errors))


def _model_classes(model_dir: Path, trust_remote_code: bool) -> Iterator[tuple[str, Any]]:
    """AutoModelForImageTextToText first, then the class that config.architectures[0] names."""
    import transformers

    yield "AutoModelForImageTextToText", transformers.AutoModelForImageTextToText
    config = json.loads((model_dir / "config.json").read_text())
    arch = (config.get("architectures") or [None])[0]
    if not arch:
        return
    if hasattr(transformers, arch):
        yield arch, getattr(transformers, arch)
        return
    auto_map = config.get("auto_map") or {}
    refs = [ref for ref in auto_map.values() if isinstance(ref, str) and ref.endswith(f".{arch}")]
    if trust_remote_code and refs:
        from transformers.dynamic_module_utils import get_class_from_dynamic_module

        yield arch, get_class_from_dynamic_module(refs[0], str(model_dir))


def _train_step(
    model: nn.Module,
    batch: dict[str, Any],
    params: list[torch.Tensor],
    optimizer: torch.optim.Optimizer,
    world: int,
    after_step: Callable[[], None] | None = None,
) -> tuple[float, float]:
    """Forward, backward, clip, step (then ``after_step``); return the DP-averaged loss and the total grad norm."""
    import torch
    import torch.distributed as dist

    out = model(**batch, use_cache=False)
    loss = getattr(out, "loss", None)
    if loss is None:
        raise ContractError("forward returned no .loss with labels")
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
    norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
    optimizer.step()
    if after_step is not None:
        after_step()
    optimizer.zero_grad()
    logged = loss.detach().float().clone()
    dist.all_reduce(logged, op=dist.ReduceOp.SUM)
    return float(logged) / world, float(norm)

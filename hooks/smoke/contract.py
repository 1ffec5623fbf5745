"""Contract smoke: train a real HF model under torch's own FSDP2 the way MindSpeed-MM would.

When the destination is not a MindSpeed-MM checkout we cannot run its trainer, but we can
still check the *contract* a generated scaffold relies on (reference §4.5, §6.2, §7): the
model loads in fp32, ``model.freeze`` patterns freeze matched modules, modules matched by a
``recompute_plan`` pattern get their ``forward`` replaced by a non-reentrant checkpoint that
passes ``past_key_values=None`` (``features/memory/recompute.py``, applied before sharding), every
module matched by an ``apply_modules`` pattern gets ``fully_shard`` in post-order and the root last, floating
batch tensors are cast to ``param_dtype``, ``model(**batch, use_cache=False).loss`` exists and
back-propagates, the gradient norm is clipped and AdamW steps, with the logged loss averaged
over the data-parallel ranks.

The parent launches ``nproc`` worker processes itself (one ``python -m hooks.smoke.contract
--worker ARGS`` per rank) joined through a gloo ``FileStore`` in a private temp dir: no port
has to be found free, nothing races for one, and each rank gets its own log file. The parent
watches the ranks, stops the survivors soon after one rank fails (a lone rank would otherwise
wait in a collective until the gloo timeout), reads one JSON result per rank and lets
``hooks.smoke.verdict.judge`` decide. Starting, watching and stopping the ranks is
``hooks.smoke.ranks``; the samples the ranks train on are encoded by ``hooks.data.encoders``.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import random
import re
import resource
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hooks import exit_now
from hooks.data.encoders import IGNORE_INDEX, SampleError, encode, load_samples
from hooks.lifetime import follow_owner
from hooks.model.matching import module_name_match
from hooks.smoke.experts import UnroutedExperts, mismatch_error, reduce_zeros_for, unrouted_experts
from hooks.smoke.ranks import RankResult, RankWorker, first_error, keep_logs, log_tail, read_rank_result, run_ranks
from hooks.smoke.verdict import Progress, SmokeResult, judge

if TYPE_CHECKING:
    import torch
    from torch import nn

SEED = 1234
_STEP_RE = re.compile(r"step (\d+)/(\d+) loss (\S+)")  # what rank 0 prints per step (_train)
_DTYPES = {
    "fp32": "float32",
    "float32": "float32",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
}

SHARD_KEYS = ("params_local", "grads_local", "optimizer")  # bytes per rank, as hooks.model.memory counts them


class ContractError(RuntimeError):
    """A violation of the MindSpeed-MM contract, reported verbatim as the smoke's error."""


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
# Parent side: launch, watch, collect, judge.
# --------------------------------------------------------------------------------------------


def run_contract_smoke(
    model_dir: Path,
    apply_modules: list[str],
    *,
    freeze: Sequence[str] = (),
    recompute: Sequence[str] = (),
    data_json: Path | None = None,
    media_root: Path | None = None,
    steps: int = 5,
    nproc: int = 2,
    trust_remote_code: bool = False,
    param_dtype: str = "fp32",
    lr: float = 1e-3,
    timeout_s: int = 600,
    fork: bool = False,
    progress: Progress | None = None,
    log_path: Path | None = None,
    stage: dict[str, str] | None = None,
    experts: Sequence[str] = (),
) -> SmokeResult:
    """Train ``model_dir`` for ``steps`` iterations under FSDP2 on ``nproc`` gloo ranks and judge it.

    ``fork=True`` forks the ranks from this process instead of starting fresh interpreters: a
    caller that has already imported torch and transformers (a test session smoking many models)
    saves their import time per rank. The CLI and the post-generation task start fresh processes.
    ``progress`` gets rank 0's iterations as they happen; ``log_path`` keeps every rank's log.
    ``stage``: the sub-model the trainer trains where the folder's class bundles several (Qwen-Omni's thinker).
    ``experts``: the plan's expert modules (``ep_modules``): whether experts no token reaches get a gradient is
    checked on the model (``hooks.smoke.experts``), reported, and where they get none their FSDP units reduce
    zeros for them, as torch >= 2.13 offers (MindSpeed-MM's trainer cannot: the finding says so).
    """
    result = SmokeResult(mode="contract", iterations_expected=steps)
    problem = _check_inputs(model_dir, data_json, steps, nproc, param_dtype)
    if problem:
        result.error = problem
        return judge(result)
    with tempfile.TemporaryDirectory(prefix="msmm-contract-smoke-") as tmp:
        work = Path(tmp)
        args = WorkerArgs(
            model_dir=str(Path(model_dir).resolve()),
            apply_modules=list(apply_modules),
            freeze=list(freeze),
            recompute=list(recompute),
            data_json=str(Path(data_json).resolve()) if data_json else None,
            media_root=str(Path(media_root or Path(data_json).parent).resolve()) if data_json else None,
            steps=steps,
            trust_remote_code=trust_remote_code,
            param_dtype=param_dtype,
            lr=lr,
            timeout_s=timeout_s,
            store_path=str(work / "store"),
            result_dir=str(work),
            stage=dict(stage or {}),
            experts=list(experts),
        )
        args_path = work / "args.json"
        args_path.write_text(json.dumps(asdict(args)))
        start = time.monotonic()
        tail = _RankZeroProgress(work / "rank0.log", progress)
        worker = RankWorker("hooks.smoke.contract", _worker_main)
        codes, timed_out = run_ranks(worker, args_path, work, nproc, timeout_s, fork=fork, on_poll=tail.poll)
        result.wall_s = round(time.monotonic() - start, 2)
        ranks = [read_rank_result(work, rank) for rank in range(nproc)]
        _fill_result(result, ranks, codes, timed_out, timeout_s, work)
        if log_path is not None:
            result.log_path = str(keep_logs(work, nproc, Path(log_path)))
    return judge(result)


class _RankZeroProgress:
    """Feeds rank 0's ``step i/N loss x`` lines to ``progress`` as they appear in its log."""

    def __init__(self, path: Path, progress: Progress | None) -> None:
        self.path, self.progress = path, progress
        self._offset, self._partial = 0, ""

    def poll(self) -> None:
        if self.progress is None or not self.path.is_file():
            return
        with self.path.open(errors="replace") as log:
            log.seek(self._offset)
            text = log.read()
            self._offset = log.tell()
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            match = _STEP_RE.match(line)
            if match:
                self.progress(int(match[1]), int(match[2]), float(match[3]))


def _check_inputs(model_dir: Path, data_json: Path | None, steps: int, nproc: int, param_dtype: str) -> str:
    """Catch caller mistakes before paying for process start-up."""
    if not Path(model_dir).is_dir():
        return f"model dir {model_dir} does not exist"
    if data_json is not None and not Path(data_json).is_file():
        return f"data JSON {data_json} does not exist"
    if steps < 1 or nproc < 1:
        return f"steps ({steps}) and nproc ({nproc}) must be at least 1"
    if param_dtype not in _DTYPES:
        return f"unknown param_dtype {param_dtype!r}; use one of {sorted(_DTYPES)}"
    return ""


def _fill_result(
    result: SmokeResult,
    ranks: list[RankResult | None],
    codes: list[int | None],
    timed_out: bool,
    timeout_s: int,
    work: Path,
) -> None:
    """Copy the measurements into ``result`` and name the first failure, if any."""
    rank0 = ranks[0]
    if rank0 is not None:
        result.losses, result.grad_norms = rank0.losses, rank0.grad_norms
    result.label_tokens = sum(r.label_tokens for r in ranks if r is not None)
    result.peak_rss_mb = [r.peak_rss_mb for r in ranks if r is not None]
    result.error = first_error(ranks, codes, timed_out, timeout_s)
    if not result.error:
        problems, verified = shard_findings([r for r in ranks if r is not None])
        result.error = "; ".join(problems)
        result.notes += verified
    experts = rank0.experts if rank0 is not None else {}
    if experts:
        found = UnroutedExperts.from_dict(experts)
        if line := found.finding(rank0.experts_remedy if rank0 is not None else ""):
            result.notes.append(line)
        if found.hazard and result.error:
            result.error = mismatch_error(log_tail(work, codes)) or result.error
            result.hint = ("experts no token reaches got no gradient, so the ranks' gradient reduce-scatters can "
                           "differ (the WARNING above)")
    if result.error:
        result.log_tail = log_tail(work, codes)


def shard_findings(ranks: list[RankResult]) -> tuple[list[str], list[str]]:
    """Each rank's measured bytes against the memory plan's arithmetic (to the byte), as the framework smoke checks."""
    problems, lines = [], []
    for r in ranks:
        if not r.shards:
            continue
        problems += [f"rank {r.rank} holds {r.shards[k]:,} bytes of {k}, the memory plan's arithmetic says "
                     f"{r.planned.get(k, 0):,}" for k in SHARD_KEYS if r.shards[k] != r.planned.get(k)]
        lines.append(f"rank {r.rank} " + ", ".join(f"{k.removesuffix('_local')} {r.shards[k]:,}" for k in SHARD_KEYS))
    if problems or not lines:
        return problems, []
    from hooks.model.memory import unused_note

    unused = next((r.no_grad for r in ranks if r.no_grad), [])
    return [], [f"verified: shard sizes equal the memory plan's arithmetic to the byte ({'; '.join(lines)})"
                + unused_note(unused)]


# --------------------------------------------------------------------------------------------
# Worker side: one rank of the FSDP2 training loop.
# --------------------------------------------------------------------------------------------


def _worker_main(args_path: Path) -> int:
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
    dtype = getattr(torch, _DTYPES[args.param_dtype])
    model = _load_model(Path(args.model_dir), args.trust_remote_code, args.stage)
    # requires_grad as the model's own __init__ left it: Qwen2-Audio's sinusoidal embed_positions is fixed
    shapes = [(name, tuple(p.shape), p.requires_grad) for name, p in model.named_parameters()]
    _apply_freeze(model, args.freeze)
    found = unrouted_experts(model, args.experts) if args.experts else None  # same weights, same answer per rank
    accepted = _accepted_kwargs(model)
    _apply_recompute(model, args.recompute)
    _apply_fsdp(model, args.apply_modules, mesh, dtype)
    if found is not None:
        out.experts, out.experts_remedy = found.to_dict(), reduce_zeros_for(model, found)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ContractError(f"no trainable parameters: model.freeze {args.freeze} froze every parameter")
    optimizer = torch.optim.AdamW(params, lr=args.lr, foreach=False)
    batches = _rank_batches(args, rank, world)
    model.train()
    for step in range(args.steps):
        batch = _prepare_batch(next(batches), accepted, dtype)
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


def _load_model(model_dir: Path, trust_remote_code: bool, stage: dict[str, str] | None = None) -> nn.Module:
    """Load in fp32 like MindSpeed-MM; prefer sdpa, fall back to eager and to the config's class. ``stage``: the
    trained sub-model of a bundle, built from its sub-config with its weights (``hooks.model.stages``)."""
    import torch

    errors: list[str] = []
    if stage and stage.get("name"):
        from hooks.model.stages import load_trained

        for attn in ("sdpa", "eager"):
            try:
                return load_trained(model_dir, stage, trust_remote_code=trust_remote_code, dtype=torch.float32,
                                    attn_implementation=attn)
            except (ValueError, ImportError, KeyError, TypeError, AttributeError, OSError) as exc:
                errors.append(f"{stage.get('class')}(attn={attn}): {type(exc).__name__}: {exc}")
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


def _post_order(module: nn.Module, prefix: str = "") -> Iterator[tuple[str, nn.Module]]:
    """Children before parents, as MindSpeed-MM walks the tree to pick FSDP units."""
    for name, child in module.named_children():
        yield from _post_order(child, f"{prefix}.{name}" if prefix else name)
    yield prefix, module


def _apply_freeze(model: nn.Module, patterns: Sequence[str]) -> None:
    """``model.freeze``: every parameter under a matched module stops requiring grad (silent if none)."""
    for name, module in model.named_modules():
        if any(module_name_match(pattern, name) for pattern in patterns):
            for param in module.parameters():
                param.requires_grad_(False)


def _apply_recompute(model: nn.Module, patterns: Sequence[str]) -> None:
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


def _apply_fsdp(model: nn.Module, patterns: Sequence[str], mesh: Any, dtype: torch.dtype) -> None:
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


def _accepted_kwargs(model: nn.Module) -> set[str] | None:
    """Names ``forward`` accepts, or None when it takes ``**kwargs`` (then every key is passed)."""
    params = inspect.signature(model.forward).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params}


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


# ---- data ------------------------------------------------------------------------------------


def _rank_batches(args: WorkerArgs, rank: int, world: int) -> Iterator[dict[str, Any]]:
    """Micro-batches of one sample, rank-strided so ranks see different data, cycling forever."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(args.model_dir, trust_remote_code=args.trust_remote_code)
    samples = load_samples(args.data_json, args.media_root, processor)
    if not samples:
        raise ContractError("the data set is empty")
    index = rank
    while True:
        yield encode(processor, samples[index % len(samples)], Path(args.model_dir))
        index += world


def _prepare_batch(batch: dict[str, Any], accepted: set[str] | None, dtype: torch.dtype) -> dict[str, Any]:
    """Keep what forward accepts and cast floating tensors to param_dtype, like ``move_to_device``."""
    import torch

    kept = {k: v for k, v in batch.items() if accepted is None or k in accepted}
    if "labels" not in kept:
        raise ContractError("forward does not accept 'labels'")
    return {
        k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for k, v in kept.items()
    }


# --------------------------------------------------------------------------------------------
# Command line.
# --------------------------------------------------------------------------------------------


def _split(value: str | None) -> list[str]:
    """Comma-separated patterns; empty items dropped."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _parser() -> argparse.ArgumentParser:
    """Command line of ``python -m hooks.smoke.contract`` (``--worker`` is handled before it)."""
    summary = __doc__.splitlines()[0]
    parser = argparse.ArgumentParser(prog="python -m hooks.smoke.contract", description=summary)
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--apply-modules", required=True, help="comma-separated fsdp_plan.apply_modules")
    parser.add_argument("--freeze", default="", help="comma-separated model.freeze patterns")
    parser.add_argument("--recompute", default="", help="comma-separated features.recompute_plan.apply_modules")
    parser.add_argument("--data", type=Path, help="MindSpeed-MM huggingface-format JSON list")
    parser.add_argument("--media-root", type=Path, help="root of the image paths (default: the JSON's dir)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--param-dtype", default="fp32", choices=sorted(_DTYPES))
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--timeout", type=int, default=600)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print the summary line; exit 0 on PASS, 1 on FAIL. ``--worker ARGS`` runs one rank."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        code = _worker_main(Path(argv[1]))
        exit_now(code)
    ns = _parser().parse_args(argv)
    result = run_contract_smoke(
        ns.model_dir,
        _split(ns.apply_modules),
        freeze=_split(ns.freeze),
        recompute=_split(ns.recompute),
        data_json=ns.data,
        media_root=ns.media_root,
        steps=ns.steps,
        nproc=ns.nproc,
        trust_remote_code=ns.trust_remote_code,
        param_dtype=ns.param_dtype,
        lr=ns.lr,
        timeout_s=ns.timeout,
    )
    print(result.summary())
    for note in result.notes:
        print(f"  {note}")
    if not result.passed:
        print(f"hint: {result.hint}\n{result.log_tail}", file=sys.stderr)
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())

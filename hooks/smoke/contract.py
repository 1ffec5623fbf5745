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
``hooks.smoke.ranks``; the samples the ranks train on are encoded by ``hooks.data.encoders``. One rank's
training loop is ``hooks.smoke.contract_worker``; the freeze, recompute and ``fully_shard`` it applies are
``hooks.smoke.parallelize``, the batches it feeds ``hooks.smoke.batches``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from hooks import exit_now
from hooks.model.stages import TrainedStage
from hooks.smoke.contract_worker import DTYPES, SHARD_KEYS, WorkerArgs, worker_main
from hooks.smoke.experts import UnroutedExperts, mismatch_error
from hooks.smoke.ranks import RankResult, RankWorker, first_error, keep_logs, log_tail, read_rank_result, run_ranks
from hooks.smoke.verdict import Progress, SmokeResult, judge

_STEP_RE = re.compile(r"step (\d+)/(\d+) loss (\S+)")  # what rank 0 prints per step (hooks.smoke.contract_worker)


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
    stage: TrainedStage | None = None,
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
            stage=stage.to_dict() if stage else {},
            experts=list(experts),
        )
        args_path = work / "args.json"
        args_path.write_text(json.dumps(asdict(args)))
        start = time.monotonic()
        tail = _RankZeroProgress(work / "rank0.log", progress)
        worker = RankWorker("hooks.smoke.contract", worker_main)
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
    if param_dtype not in DTYPES:
        return f"unknown param_dtype {param_dtype!r}; use one of {sorted(DTYPES)}"
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
        problems, verified = rank_shard_findings([r for r in ranks if r is not None])
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


def rank_shard_findings(ranks: list[RankResult]) -> tuple[list[str], list[str]]:
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
    parser.add_argument("--param-dtype", default="fp32", choices=sorted(DTYPES))
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--timeout", type=int, default=600)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print the summary line; exit 0 on PASS, 1 on FAIL. ``--worker ARGS`` runs one rank."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        code = worker_main(Path(argv[1]))
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

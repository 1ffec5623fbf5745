"""The contract smoke's rank processes: start them, watch them, stop them, read what they left.

Kept apart from the smoke itself (``hooks.smoke.contract``) because none of it is about training:
the parent starts ``nproc`` workers (fresh interpreters, or forks of the caller that has already paid
for importing torch), each with its own log file and environment, waits for all of them or stops
the survivors soon after one fails (a lone rank would otherwise wait in a collective until the gloo
timeout), and reads back one JSON ``RankResult`` per rank, the earliest error and the logs' tails.
Which worker runs is the caller's ``RankWorker``, so this module never imports the smoke.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hooks import env_with_hooks, exit_now
from hooks.lifetime import die_with_parent

_KILL_GRACE_S = 5.0  # let the other ranks write their own error before they are stopped
_LOG_TAIL_CHARS = 4000


@dataclass
class RankResult:
    """What one rank measured; rank 0's losses are already averaged over the ranks."""

    rank: int
    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    label_tokens: int = 0
    peak_rss_mb: float = 0.0
    error: str = ""
    traceback: str = ""
    failed_at: float = 0.0
    shards: dict[str, int] = field(default_factory=dict)  # measured after step 1 (memory_measure.measure_rank)
    planned: dict[str, int] = field(default_factory=dict)  # the memory plan's arithmetic for this rank
    no_grad: list[str] = field(default_factory=list)  # trainable parameters the forward left without a gradient
    experts: dict[str, Any] = field(default_factory=dict)  # hooks.smoke.experts.UnroutedExperts, as a dict
    experts_remedy: str = ""  # what the smoke did about experts without a gradient (hooks.smoke.experts)


@dataclass(frozen=True)
class RankWorker:
    """How one rank runs: ``python -m MODULE --worker ARGS`` in a fresh interpreter, ``main(ARGS)`` in a fork.

    The module is named, not derived from ``main``: run as ``python -m``, the smoke's functions live in
    ``__main__``, which a fresh interpreter could not import by that name.
    """

    module: str
    main: Callable[[Path], int]


def keep_logs(work: Path, nproc: int, log_path: Path) -> Path:
    """Every rank's log in one file that outlives the temporary work dir."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    parts = []
    for rank in range(nproc):
        path = work / f"rank{rank}.log"
        parts.append(f"--- rank {rank} ---\n" + (path.read_text(errors="replace") if path.is_file() else ""))
    log_path.write_text("\n".join(parts), encoding="utf-8")
    return log_path


def _worker_env(rank: int, nproc: int) -> dict[str, str]:
    """Environment of one rank: repo importable, offline, one thread each so ranks do not fight."""
    env = env_with_hooks()
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc))
    env.setdefault("OMP_NUM_THREADS", "1")
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        env.setdefault(key, "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_ranks(
    worker: RankWorker, args_path: Path, work: Path, nproc: int, timeout_s: int, *, fork: bool = False,
    on_poll: Callable[[], None] = lambda: None,
) -> tuple[list[int | None], bool]:
    """Start every rank and wait; no rank outlives this call, even on an interrupt."""
    start = _ForkedRank if fork else _start_rank
    procs = [start(worker, args_path, work, rank, nproc) for rank in range(nproc)]
    try:
        timed_out = _wait_ranks(procs, time.monotonic() + timeout_s, on_poll)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [p.returncode for p in procs], timed_out


def _start_rank(worker: RankWorker, args_path: Path, work: Path, rank: int, nproc: int) -> subprocess.Popen[bytes]:
    """One worker process whose stdout and stderr both go to ``rank{N}.log``."""
    cmd = [sys.executable, "-m", worker.module, "--worker", str(args_path)]
    with open(work / f"rank{rank}.log", "wb") as log:
        return subprocess.Popen(cmd, env=_worker_env(rank, nproc), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)


class _ForkedRank:
    """A rank forked from the calling process, with the ``Popen`` methods ``run_ranks`` uses."""

    def __init__(self, worker: RankWorker, args_path: Path, work: Path, rank: int, nproc: int) -> None:
        import multiprocessing

        env = _worker_env(rank, nproc)
        target_args = (worker.main, str(args_path), str(work / f"rank{rank}.log"), env)
        self._proc = multiprocessing.get_context("fork").Process(target=_forked_rank_main, args=target_args)
        self._proc.start()

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    def poll(self) -> int | None:
        return self._proc.exitcode

    def kill(self) -> None:
        self._proc.kill()

    def wait(self) -> int | None:
        self._proc.join()
        return self._proc.exitcode


def _forked_rank_main(main: Callable[[Path], int], args_path: str, log_path: str, env: dict[str, str]) -> None:
    """Child side of ``_ForkedRank``: the worker's environment and log, then the worker itself."""
    log = open(log_path, "w", buffering=1)  # noqa: SIM115 - lives until os._exit
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    os.environ.clear()
    os.environ.update(env)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)  # OMP_NUM_THREADS is read only at import time
    exit_now(main(Path(args_path)))


def _wait_ranks(procs: list[Any], deadline: float, on_poll: Callable[[], None]) -> bool:
    """Wait for all ranks, or for a short grace after the first failure; True on a timeout."""
    first_failure: float | None = None
    while any(p.poll() is None for p in procs):
        on_poll()
        now = time.monotonic()
        if now > deadline:
            return True
        if first_failure is None and any(p.returncode not in (None, 0) for p in procs):
            first_failure = now
        if first_failure is not None and now - first_failure > _KILL_GRACE_S:
            return False
        time.sleep(0.1)
    on_poll()
    return False


def read_rank_result(work: Path, rank: int) -> RankResult | None:
    """One rank's JSON result, or None when the rank died before writing it."""
    path = work / f"result{rank}.json"
    if not path.is_file():
        return None
    return RankResult(**json.loads(path.read_text()))


def first_error(
    ranks: list[RankResult | None], codes: list[int | None], timed_out: bool, timeout_s: int
) -> str:
    """The root cause: the earliest rank error, since later ones are usually its echo over gloo."""
    failed = sorted((r for r in ranks if r is not None and r.error), key=lambda r: r.failed_at)
    if failed:
        # Ranks that hit the same error (a bad plan fails everywhere) are reported as the lowest rank.
        first = min((r for r in failed if r.error == failed[0].error), key=lambda r: r.rank)
        return f"rank {first.rank}: {first.error}"
    if timed_out:
        return f"timed out after {timeout_s} s"
    for rank, (res, code) in enumerate(zip(ranks, codes, strict=True)):
        if res is None or code != 0:
            return f"rank {rank} exited with code {code} without a result (killed or crashed)"
    return ""


def log_tail(work: Path, codes: list[int | None]) -> str:
    """The ends of the logs of failed ranks (all ranks when none exited non-zero)."""
    chosen = [r for r, c in enumerate(codes) if c != 0] or list(range(len(codes)))
    parts = []
    for rank in chosen:
        path = work / f"rank{rank}.log"
        text = path.read_text(errors="replace") if path.is_file() else ""
        parts.append(f"--- rank {rank} (exit {codes[rank]}) ---\n{text[-_LOG_TAIL_CHARS:]}")
    return "\n".join(parts)

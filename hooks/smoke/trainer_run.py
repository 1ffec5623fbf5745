"""Smoke-test a generated scaffold through the REAL MindSpeed-MM trainer.

The framework smoke launches the unmodified ``mindspeed_mm/fsdp/train/trainer.py``
under ``torch.distributed.run`` with a derived, tiny config and judges the logged
losses. On a CPU-only machine the run-time bridges in ``hooks/smoke/bridges`` (a
``sitecustomize`` enabled by ``MSMM_CPU_BRIDGES=1``) stand in for the few places
where the framework assumes an accelerator; each bridge's docstring says why
it is needed. No file of the MindSpeed-MM checkout is edited.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from hooks.framework.environment import TRAINER_ENTRY, detect_device, framework_env, free_port
from hooks.model.stages import TrainedStage
from hooks.smoke.smoke_config import smoke_yaml
from hooks.smoke.verdict import Progress, SmokeResult, judge

LOG_TAIL_LINES = 60

_ITER_RE = re.compile(
    r"iteration\s+(\d+)/\s*(\d+) \| consumed samples:\s+(\d+) \| "
    r"elapsed time per iteration \(ms\): ([\d.]+) \| learning rate: (\S+) \| "
    r"global batch size:\s+(\d+) \|(.*)"
)
_PAIR_RE = re.compile(r" ([a-z_0-9 ]+): (\S+) \|")
_ERROR_LINE_RE = re.compile(r"^\s*(?:\[[^\]]*\]:?\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b.*)$")


# --- launching ------------------------------------------------------------------------------------


@dataclass
class TrainerRun:
    """What one trainer launch produced."""

    returncode: int
    log_text: str
    wall_s: float
    timed_out: bool = False
    peak_rss_mb: list[float] = field(default_factory=list)  # per local rank


def trainer_command(yaml_path: Path, *, nproc: int, python: str, port: int) -> list[str]:
    """The documented launch (``torchrun ... trainer.py <yaml>``), with the YAML as ``argv[1]``."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        str(nproc),
        "--master_port",
        str(port),
        TRAINER_ENTRY,
        str(Path(yaml_path).resolve()),
    ]


class _Output:
    """Where trainer output goes: all of it to the log file (as it arrives, so a hang stays readable)
    and to memory for parsing; each logged iteration to ``progress`` (the terminal shows only those)."""

    def __init__(self, log: TextIO, progress: Progress | None) -> None:
        self.log, self.progress = log, progress
        self.chunks: list[str] = []
        self._partial = ""

    def write(self, text: str) -> None:
        if not text:
            return
        self.log.write(text)
        self.log.flush()
        self.chunks.append(text)
        if self.progress is not None:
            *lines, self._partial = (self._partial + text).split("\n")
            for record in parse_iterations("\n".join(lines)):
                self.progress(record["iteration"], record["train_iters"], record["loss"])

    def text(self) -> str:
        return "".join(self.chunks)


def _tee(stream: TextIO, out: _Output) -> None:
    for line in stream:
        out.write(line)


def _rank_rss_mb(launcher_pid: int) -> dict[int, float]:
    """Current RSS of each rank process (direct children of the launcher), keyed by LOCAL_RANK."""
    import psutil

    try:
        children = psutil.Process(launcher_pid).children()
    except psutil.Error:
        return {}
    out: dict[int, float] = {}
    for index, child in enumerate(children):
        try:
            rank = int(child.environ().get("LOCAL_RANK", index))
            out[rank] = child.memory_info().rss / 2**20
        except (psutil.Error, ValueError):
            continue
    return out


def _watch(exit_code: Callable[[], int | None], launcher_pid: int, timeout_s: float,
           peaks: dict[int, float]) -> bool:
    """Poll a launch until it exits, keeping each rank's peak RSS; False if it ran past ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while exit_code() is None:
        if time.monotonic() > deadline:
            return False
        for rank, rss in _rank_rss_mb(launcher_pid).items():
            peaks[rank] = max(peaks.get(rank, 0.0), rss)
        time.sleep(0.25)
    return True


def _kill_group(pgid: int, exited: Callable[[], bool]) -> None:
    """Stop a launch and its ranks (they share the session it was started in): TERM, then KILL after 15 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 15
        while not exited() and time.monotonic() < deadline:
            time.sleep(0.1)
        if exited():
            return


def launch_trainer(
    mm_home: Path,
    yaml_path: Path,
    *,
    log_path: Path,
    nproc: int = 2,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    timeout_s: float = 900,
    progress: Progress | None = None,
) -> TrainerRun:
    """Run the real trainer from ``mm_home``, teeing output to ``log_path`` and sampling rank RSS.

    ``env=None`` means :func:`framework_env` for this machine (bridges only on CPU). The launch
    runs in a session of its own, so a timeout, an exception here (Ctrl-C) or the end of the
    copy that owns us (``hooks.lifetime``) stops its whole process group.
    """
    from hooks import lifetime

    if env is None:
        env = framework_env(Path(mm_home), None, cpu_bridges=detect_device() == "cpu")
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = trainer_command(yaml_path, nproc=nproc, python=python, port=free_port())
    peaks: dict[int, float] = {}
    start = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        out = _Output(log, progress)
        proc = subprocess.Popen(
            cmd,
            cwd=str(mm_home),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        lifetime.launched_group(proc.pid)
        reader = threading.Thread(target=_tee, args=(proc.stdout, out), daemon=True)
        reader.start()
        finished = False
        try:
            finished = _watch(proc.poll, proc.pid, timeout_s, peaks)
        finally:
            if not finished:
                _kill_group(proc.pid, lambda: proc.poll() is not None)
            lifetime.finished_group(proc.pid)
        proc.wait()
        reader.join(timeout=30)
    wall = time.monotonic() - start
    return TrainerRun(
        returncode=proc.returncode,
        log_text=out.text(),
        wall_s=wall,
        timed_out=not finished,
        peak_rss_mb=[round(peaks[r], 1) for r in sorted(peaks)],
    )


def _number(text: str) -> float:
    """Parse a logged number; the engine prints NaN/Inf as NAN/INF (loss) or nan/inf (grad norm)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def parse_iterations(log_text: str) -> list[dict[str, Any]]:
    """Parse TrainEngine's per-iteration lines (contract section 7.6) in log order.

    Each dict has ``iteration``, ``train_iters``, ``consumed_samples``,
    ``elapsed_ms``, ``lr``, ``gbs``, ``loss`` and ``grad_norm`` (None when not
    logged); further loss items (``mtp_0 loss``, ``aux loss``) keep their names.
    """
    records: list[dict[str, Any]] = []
    for line in log_text.splitlines():
        match = _ITER_RE.search(line)
        if match is None:
            continue
        it, total, consumed, ms, lr, gbs, rest = match.groups()
        record: dict[str, Any] = {
            "iteration": int(it),
            "train_iters": int(total),
            "consumed_samples": int(consumed),
            "elapsed_ms": float(ms),
            "lr": _number(lr),
            "gbs": int(gbs),
            "loss": None,
            "grad_norm": None,
        }
        for name, value in _PAIR_RE.findall(rest):
            record[name.strip().replace("grad norm", "grad_norm")] = _number(value)
        records.append(record)
    return records


def first_traceback(log_text: str) -> str:
    """Final line of the first traceback (the root cause; later ones are peers noticing the crash)."""
    in_traceback = False
    for line in log_text.splitlines():
        if "Traceback (most recent call last)" in line:
            in_traceback = True
            continue
        match = _ERROR_LINE_RE.match(line)
        if in_traceback and match and ":" in match.group(1) and "ChildFailedError" not in line:
            return match.group(1).strip()
    return ""


def _tail(text: str, n: int = LOG_TAIL_LINES) -> str:
    """The last ``n`` lines: where a traceback ends."""
    return "\n".join(text.splitlines()[-n:])


def _run_error(run: TrainerRun, timeout_s: float) -> str:
    """Why the launch failed, or "" when it exited cleanly."""
    if run.timed_out:
        return f"trainer timed out after {timeout_s:.0f} s"
    if run.returncode != 0:
        detail = first_traceback(run.log_text)
        return f"trainer exited with code {run.returncode}" + (f": {detail}" if detail else "")
    return ""


def _write_yaml(cfg: dict[str, Any], path: Path) -> Path:
    """Write a config the way ConfigManager reads it (safe_load; no anchors needed)."""
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def run_framework_smoke(
    mm_home: Path,
    generated_yaml_path: Path,
    *,
    model_dir: Path,
    data_json: Path,
    media_root: Path,
    work_dir: Path,
    iters: int = 5,
    nproc: int = 2,
    python: str = sys.executable,
    mindspeed_home: Path | None = None,
    timeout_s: float = 900,
    device: str | None = None,
    progress: Progress | None = None,
    sdpa: bool = True,
    ignored_settings: str = "stop",
    attributes: dict[str, Any] | None = None,
    stage: TrainedStage | None = None,
) -> SmokeResult:
    """Train ``iters`` steps of the tiny model through the real trainer and judge the losses.

    ``attributes``: what the model's own ``chat()`` sets on the model before ``forward`` (the code
    convention); the loss-equivalence reference sets them on its own build of the model's class.
    ``stage``: the trained sub-model (``ModelFacts.trained_submodule``) where the folder's class bundles several:
    the weight check reads the folder's ``<name>.*`` tensors, the reference builds that sub-model.
    """
    import yaml

    from hooks.framework.checkout import schema

    work_dir = Path(work_dir)
    device = device or detect_device()
    generated = yaml.safe_load(Path(generated_yaml_path).read_text(encoding="utf-8"))
    cfg = smoke_yaml(
        generated,
        model_dir=Path(model_dir).resolve(),
        data_json=Path(data_json).resolve(),
        media_root=Path(media_root).resolve(),
        work_dir=work_dir.resolve(),
        iters=iters,
        device=device,
        nproc=nproc,
        sdpa=sdpa,
        places=schema(mm_home),
    )
    yaml_path = _write_yaml(cfg, work_dir / "smoke_config.yaml")
    observed = work_dir / "observe"
    shutil.rmtree(observed, ignore_errors=True)
    spec = work_dir / "observe.json"
    prefix = f"{stage.name}." if stage else ""  # the trained sub-model's tensors in the folder
    from hooks.smoke.media_proof import media_hint, media_steps, prove_media

    spec.write_text(json.dumps({"model_dir": str(Path(model_dir).resolve()), "out": str(observed.resolve()),
                                "prefix": prefix, "media_steps": media_steps(cfg, Path(data_json), nproc)}))
    env = framework_env(Path(mm_home), mindspeed_home, cpu_bridges=device == "cpu", observe=spec.resolve())
    log_path = work_dir / "smoke_trainer.log"
    from hooks.smoke.reference_run import go_reference, loss_equivalence, read_experts, start_reference, stop_reference

    # The loss reference imports and builds the model's own class while the trainer runs (issue 24's cost).
    reference = start_reference(yaml_path, Path(model_dir).resolve(), observed, mm_home=Path(mm_home), python=python,
                                ranks=nproc, attributes=attributes, stage=stage)
    try:
        run = launch_trainer(Path(mm_home), yaml_path, log_path=log_path, nproc=nproc, python=python, env=env,
                             timeout_s=timeout_s, progress=progress)
    except BaseException:
        stop_reference(reference, observed)
        raise
    records = parse_iterations(run.log_text)
    experts = read_experts(observed, reference, cfg) if not records else {}  # before the reference is stopped
    if records:
        go_reference(observed)  # it replays the recorded steps
    else:
        stop_reference(reference, observed)
    result = SmokeResult(
        mode="framework",
        losses=[r["loss"] for r in records if r["loss"] is not None],
        grad_norms=[r["grad_norm"] for r in records if r["grad_norm"] is not None],
        iterations_expected=iters,
        wall_s=round(run.wall_s, 1),
        peak_rss_mb=run.peak_rss_mb,
        log_tail=_tail(run.log_text),
        log_path=str(log_path),
        notes=bridge_notes(run.log_text),
        error=_run_error(run, timeout_s),
    )
    from hooks.smoke.settings import load_error, settings_findings

    result.error = load_error(result.error, cfg, Path(model_dir))
    if records and not result.error:  # it trained: did every setting of the YAML take effect?
        # the reference first: it also wrote the model's shapes that the shard and memory checks read
        wrong, same, unknown = loss_equivalence(reference, observed, records)
        problems, verified = settings_findings(run.log_text, cfg, Path(mm_home), observed=observed,
                                               model_dir=Path(model_dir), nproc=nproc)
        problems, verified = problems + wrong, verified + same
        # every medium of the data reached forward on a real item and changed the loss: never waived
        untrained, media, media_unknown = prove_media(observed, cfg, Path(data_json), nproc)
        verified, unknown = verified + media, unknown + media_unknown
        result.notes += [f"verified: {line}" for line in verified] + [f"not verified: {line}" for line in unknown]
        result.memory_table = measured_memory(result, observed, cfg, Path(model_dir), nproc)  # issue 23
        errors = untrained[:]
        result.hint = media_hint(untrained) if untrained else ""
        if problems and ignored_settings == "stop":
            errors.insert(0, "; ".join(problems) + " (-d ignored_settings=warn trains on anyway)")
        result.error = "; ".join(errors)
        result.notes += [f"WARNING: {problem}" for problem in problems if ignored_settings != "stop"]
    elif records:
        stop_reference(reference, observed)
    expert_finding(result, experts or read_experts(observed, reference, cfg, timeout_s=0), run.log_text)
    return judge(result)


def expert_finding(result: SmokeResult, experts: dict[str, Any], log_text: str) -> None:
    """Whether experts no token reaches get a gradient (``hooks.smoke.experts``, found by the reference on the
    model's own class): a WARNING where they get none, and the cause of a run that stopped on it."""
    from hooks.smoke.experts import UnroutedExperts, mismatch_error

    if not experts:
        return
    found = UnroutedExperts.from_dict(experts)
    if line := found.finding():
        result.notes.append(line)
    if found.hazard and result.error:
        result.error = mismatch_error(log_text) or result.error
        result.hint = ("experts no token reaches got no gradient, so the ranks' gradient reduce-scatters can "
                       "differ (the WARNING above)")


def measured_memory(result: SmokeResult, observed: Path, cfg: dict[str, Any], model_dir: Path, nproc: int) -> str:
    """Each rank's measured activations and peak memory beside the plan (``hooks.smoke.memory_check``): notes
    for the verdict, the table for REPORT.md. Reported, never judged: a failure here is a note."""
    from hooks.smoke.memory_check import memory_notes, memory_rows, memory_table

    try:
        rows = memory_rows(observed, cfg, model_dir, nproc)
    except Exception as err:  # noqa: BLE001 - the smoke's verdict does not rest on it
        result.notes.append(f"memory not compared with the plan: {type(err).__name__}: {err}")
        return ""
    result.notes += memory_notes(rows)
    return memory_table(rows)


def bridge_notes(log_text: str) -> list[str]:
    """What the CPU bridges said they did (``[msmm-bridges] ...`` lines, once each, in log order)."""
    prefix = "[msmm-bridges] "
    return list(dict.fromkeys(line.partition(prefix)[2] for line in log_text.splitlines() if prefix in line))

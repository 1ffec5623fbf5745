"""A migrated model's system test in MindSpeed-MM's ``tests/st`` format: its files, its baseline, the comparison.

MindSpeed-MM's CI runs ``tests/st/shell_scripts/finetune_<case>.sh``, parses the log with
``tests/st/test_tools/acquire_json.py`` and compares it with ``tests/st/baseline_results/finetune_<case>.json``
in ``tests/st/test_tools/test_ci_st.py`` (loss ``approx(rel=0.01)`` per step, time at most 5 % slower after
``warm_up``, memory at most 10 % higher). Every copy writes that triple for its model (the script is rendered
with the scaffold; the run config and the baseline are written from the smoke, which runs exactly that config).

Baselines are measured, never invented: the losses, times and memory lines are read off the smoke's own trainer
log with the parser's own patterns (so a re-run parses the same way), times and memory only where the device has
an allocator (on CPU the trainer's memory line reads a CUDA allocator that is not there, and CPU times say nothing
about an NPU). Beside the baseline, ``finetune_<case>.provenance.json`` says where it came from (device, dtype,
ranks, torch/transformers versions, framework revision, the run config's hash): ``test_ci_st.py`` reads only the
baseline file, so the record cannot disturb the comparator, and ``hooks.check`` reads it to say which device
each baseline came from and whether it is stale.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

LOSS_REL_TOL = 0.01  # test_ci_st.py's margin_loss: pytest.approx(rel=0.01) per step
WARM_UP = 2  # the upstream finetune baselines' warm_up: times of the first two steps are not compared
ST_ITERS = 5  # upstream ST configs train 5 iterations
ALLOCATOR_DEVICES = ("cuda", "npu")  # devices whose allocator the trainer's memory line reads

# acquire_json.py's patterns (MindSpeed-MM 57069cd5, tests/st/test_tools/acquire_json.py), kept identical so the
# baseline holds what the comparator will parse from a re-run of the same log lines.
_LOG_PATTERN = re.compile(r"elapsed time per iteration \(ms\):\s+([0-9.]+)\s+\|.*?loss:\s+([0-9.]+E[+-][0-9]+)")
_MEMORY_PATTERN = re.compile(
    r"\[Rank (\d+)\] \(after \d+ iterations\) memory \(MB\) \| allocated: ([0-9.]+) \| max allocated: ([0-9.]+)")


@dataclass
class Measured:
    """What a trainer log holds in the comparator's terms: per-step losses and times, the memory line per rank."""

    loss: list[float] = field(default_factory=list)
    time: list[float] = field(default_factory=list)
    memory: list[dict[str, float]] = field(default_factory=list)


def parse_log(text: str) -> Measured:
    """The log lines ``acquire_json.transfer_logs_as_json`` reads, read the same way."""
    found = _LOG_PATTERN.findall(text)
    memory = [{"rank": int(rank), "allocated memory": float(alloc), "max allocated memory": float(peak)}
              for rank, alloc, peak in _MEMORY_PATTERN.findall(text)]
    return Measured(loss=[float(loss) for _, loss in found], time=[float(ms) for ms, _ in found],
                    memory=sorted(memory, key=lambda row: row["rank"]))


def baseline_json(measured: Measured, device: str) -> dict[str, Any]:
    """The baseline in upstream's shape; time and memory only where ``device`` has an allocator (else empty:
    the comparator's time and memory tests then stop on the length check, and only ``-k loss`` applies)."""
    timed = device in ALLOCATOR_DEVICES
    return {"loss": measured.loss, "time": measured.time if timed else [],
            "memo info": measured.memory if timed else [], "warm_up": WARM_UP}


@dataclass
class Provenance:
    """Where a baseline was recorded (``finetune_<id>.provenance.json``)."""

    device: str  # cpu | cuda | npu
    device_name: str  # what the host calls it ("cpu (2 gloo ranks through the CPU bridges)", a GPU's name)
    label: str  # how the baseline may be used, in words
    ranks: int
    param_dtype: str  # the run config's parallel.fsdp_plan.param_dtype (the smoke computes fp32 on CPU)
    reduce_dtype: str
    torch: str
    transformers: str
    framework_revision: str  # hooks.framework.checkout.revision of the checkout it ran in
    template_version: str  # the answers' _commit
    run_config_sha256: str  # of tests/st/run_configs/finetune_<id>/<id>_config.yaml as recorded
    recorded_with: str = "python -m hooks.smoke"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


def device_label(device: str) -> str:
    """What a baseline from ``device`` is good for."""
    if device == "cpu":
        return ("CPU baseline: losses only, recorded through the CPU run-time bridges; not an NPU baseline (record "
                "one on the NPU host with python -m hooks.smoke ANSWERS --record-baseline before submitting)")
    if device == "cuda":
        return "GPU baseline: losses, times and memory of this GPU; not an NPU baseline"
    return "NPU baseline: losses, times and memory of this NPU"


def interpreter_versions(python: str) -> dict[str, str]:
    """torch and transformers of the training interpreter (metadata only: no torch import, well under a second)."""
    code = ("import importlib.metadata as m, json\n"
            "out = {}\n"
            "for name in ('torch', 'transformers'):\n"
            "    try:\n        out[name] = m.version(name)\n"
            "    except m.PackageNotFoundError:\n        out[name] = 'not installed'\n"
            "print(json.dumps(out))")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"torch": "unknown", "transformers": "unknown"}


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass
class Comparison:
    """Losses of a new run against a recorded baseline, per step, in the comparator's tolerance."""

    expected: list[float]
    actual: list[float]
    max_rel: float  # max over steps of |actual - expected| / |expected|
    first_step: int  # 1-based first step outside the tolerance, 0 when none
    error: str = ""  # why they could not be compared (length, nothing logged)

    @property
    def within(self) -> bool:
        return not self.error and self.first_step == 0

    def line(self) -> str:
        """One line for a table or a report."""
        if self.error:
            return f"not comparable: {self.error}"
        if self.within:
            return f"ok (max rel diff {self.max_rel:.2%} over {len(self.actual)} steps, tolerance {LOSS_REL_TOL:.0%})"
        step = self.first_step
        old, new = self.expected[step - 1], self.actual[step - 1]
        return (f"REGRESSION at step {step}: loss {old:.6g} -> {new:.6g} ({_rel(old, new):+.2%}; max rel diff "
                f"{self.max_rel:.2%}, tolerance {LOSS_REL_TOL:.0%})")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "within": self.within, "line": self.line()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Comparison:
        """A comparison written by ``to_dict`` (``within`` and ``line`` are computed again, not read)."""
        return cls(list(data["expected"]), list(data["actual"]), float(data["max_rel"]), int(data["first_step"]),
                   str(data.get("error", "")))


def _rel(expected: float, actual: float) -> float:
    if expected == 0:
        return 0.0 if actual == 0 else math.inf
    return (actual - expected) / abs(expected)


def compare_losses(expected: list[float], actual: list[float], rel: float = LOSS_REL_TOL) -> Comparison:
    """``test_ci_st.py``'s loss test (``actual == approx(expected, rel=rel)`` per step), with the figures a
    reviewer needs: the largest relative difference and the first step outside the tolerance."""
    if not actual:
        return Comparison(expected, actual, math.nan, 0, "the new run logged no loss")
    if len(expected) != len(actual):
        return Comparison(expected, actual, math.nan, 0,
                          f"{len(actual)} steps logged, the baseline has {len(expected)}")
    diffs = [abs(_rel(e, a)) for e, a in zip(expected, actual, strict=True)]
    # pytest.approx(rel=r) accepts |a - e| <= r * |e| (its default abs=1e-12 is below any logged loss)
    first = next((i + 1 for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                  if abs(a - e) > max(rel * abs(e), 1e-12)), 0)
    return Comparison(expected, actual, max(diffs), first)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file's object, or None when absent or unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None

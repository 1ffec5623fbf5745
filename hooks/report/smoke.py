"""The smoke on a scaffold that is already written, with its report (run by ``python -m hooks.smoke ANSWERS``).

The same run as copier's post-generation task ends with (``hooks.report.postgen``): the smoke
(``hooks.smoke.run``), ``smoke_result.json`` beside its log, the model's system test (``tests/st/``: recorded
from the first smoke, compared with by every later one), REPORT.md written whole with the data check's section,
then the verdict, printed last. ``--record-baseline`` records the system test's baseline from this run (on the
device it runs on).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hooks.report.document import Report, smoke_section
from hooks.smoke.baseline import Comparison, read_json
from hooks.smoke.run import run_smoke
from hooks.smoke.verdict import SmokeResult, print_iteration
from hooks.terminal import echo


def smoke_and_report(
    dest: Path, answers: dict[str, Any], *, parity: str | None = None, iters: int = 5, record_baseline: bool = False
) -> SmokeResult:
    """Run the smoke with progress on the terminal; write ``smoke_result.json`` and, given the data check's section
    (``parity``; None: ``--no-report``), REPORT.md whole.

    Then the model's system test (``hooks.report.st``): recorded from this run when the checkout has none yet (or
    ``record_baseline``), else this run's losses compared with it; the comparison goes into ``smoke_result.json``
    (``hooks.update`` reads it) and a regression fails the result. The verdict is printed by the caller
    (``hooks.report.summary.print_summary``), last, so that nothing buries it.
    """
    from hooks.report.st import after_smoke, st_section

    result, inputs, note = run_smoke(dest, answers, iters=iters, progress=print_iteration)
    outcome = after_smoke(dest, answers, result, inputs.work_dir / "smoke_config.yaml",
                          record_baseline=record_baseline, first_record=parity is not None)
    echo(outcome.note)
    if outcome.regressed and result.passed:  # a smoke that failed on its own keeps its cause as the verdict
        result.passed = False
        result.reason = f"losses moved from the recorded baseline: {outcome.comparison.line()}"
        result.hint = ("a numerical change in the framework, the template or the data since the baseline was recorded; "
                       "if it is intended, re-record it with --record-baseline")
    if parity is not None:
        Report(answers["model_id"], parity, smoke_section(result, inputs, note),
               st_section(dest, answers, outcome)).write(dest)
    SmokeRecord(passed=result.passed, mode=result.mode, summary=result.summary(), wall_s=result.wall_s,
                peak_rss_mb=result.peak_rss_mb, log=result.log_path, notes=result.notes, losses=result.losses,
                device=result.device, baseline=outcome.comparison, st=outcome.note, recorded=outcome.recorded,
                regressed=outcome.regressed, hint=result.hint).write(result_file(inputs.work_dir))
    return result


@dataclass
class SmokeRecord:
    """What a smoke leaves beside its log, ``smoke_result.json``: the smoke verdict as the next stage reads it.

    ``hooks.update`` fills its table from this record (never from the smoke's terminal output); the copy's
    benchmark reads it too. The file is JSON so that a reviewer can open it.
    """

    passed: bool  # the verdict (a loss regression against the recorded baseline fails it)
    mode: str  # "framework" (the real trainer) or "contract" (torch fully_shard)
    summary: str  # the verdict line, ``SmokeResult.summary()``: "smoke[framework] PASS: 5/5 iterations, loss ..."
    wall_s: float = 0.0
    peak_rss_mb: list[float] = field(default_factory=list)  # per rank, when known
    log: str = ""  # the full log of the run
    notes: list[str] = field(default_factory=list)  # what the run reported about itself (CPU bridges used)
    losses: list[float] = field(default_factory=list)
    device: str = ""  # cpu | cuda | npu
    baseline: Comparison | None = None  # this run's losses against the system test's baseline, when there was one
    st: str = ""  # the system test's one-line note ("system test: baseline recorded ...")
    recorded: bool = False  # this run recorded the baseline (there was none, or --record-baseline)
    regressed: bool = False  # the losses moved from the baseline beyond the comparator's tolerance
    hint: str = ""  # what to do about a failure

    def write(self, path: Path) -> None:
        data = {**asdict(self), "baseline": self.baseline.to_dict() if self.baseline else None}
        Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> SmokeRecord | None:
        """The record at ``path``, or None when no smoke left one (absent or unreadable)."""
        data = read_json(path)
        if data is None:
            return None
        given = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        given["baseline"] = Comparison.from_dict(data["baseline"]) if data.get("baseline") else None
        given.setdefault("regressed", bool(given["baseline"] and not given["baseline"].within))
        return cls(**given)


def result_file(work_dir: Path) -> Path:
    """Where a smoke leaves its record (``hooks.update`` reads the losses and the baseline comparison there)."""
    return Path(work_dir) / "smoke_result.json"

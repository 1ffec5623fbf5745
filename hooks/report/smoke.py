"""The smoke on a scaffold that is already written, with its report (run by ``python -m hooks.smoke ANSWERS``).

The same run as copier's post-generation task ends with (``hooks.report.postgen``): the smoke
(``hooks.smoke.run``), its section in MIGRATION.md and ``smoke_result.json`` beside its log, the model's
system test (``tests/st/``: recorded from the first smoke, compared with by every later one), then the verdict,
printed last. ``--record-baseline`` records the system test's baseline from this run (on the device it runs on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hooks import scaffold
from hooks.report.migration import write_section, write_smoke_section
from hooks.smoke.run import run_smoke
from hooks.smoke.verdict import SmokeResult, print_iteration
from hooks.terminal import echo


def smoke_and_report(
    dest: Path, answers: dict[str, Any], *, iters: int = 5, report: bool = True, record_baseline: bool = False
) -> SmokeResult:
    """Run the smoke with progress on the terminal; write its MIGRATION.md section and ``smoke_result.json``.

    Then the model's system test (``hooks.report.st``): recorded from this run when the checkout has none yet (or
    ``record_baseline``), else this run's losses compared with it; the comparison goes into ``smoke_result.json``
    (``hooks.update`` reads it) and a regression fails the result. The verdict is printed by the caller
    (``hooks.report.summary.print_summary``), last, so that nothing buries it.
    """
    from hooks.report.st import after_smoke, st_section

    result, inputs, note = run_smoke(dest, answers, iters=iters, progress=print_iteration)
    outcome = after_smoke(dest, answers, result, inputs.work_dir / "smoke_config.yaml",
                          record_baseline=record_baseline, first_record=report)
    echo(outcome.note)
    if outcome.regressed and result.passed:  # a smoke that failed on its own keeps its cause as the verdict
        result.passed = False
        result.reason = f"losses moved from the recorded baseline: {outcome.comparison.line()}"
        result.hint = ("a numerical change in the framework, the template or the data since the baseline was recorded; "
                       "if it is intended, re-record it with --record-baseline")
    migration = dest / scaffold.migration_md(answers["model_id"])
    if report:
        write_smoke_section(migration, result, inputs, note)
        write_section(migration, "st", st_section(dest, answers, outcome))
    record = {"passed": result.passed, "mode": result.mode, "wall_s": result.wall_s, "peak_rss_mb": result.peak_rss_mb,
              "summary": result.summary(), "log": result.log_path, "notes": result.notes, "losses": result.losses,
              "device": result.device, "baseline": outcome.comparison.to_dict() if outcome.comparison else None,
              "st": outcome.note, "recorded": outcome.recorded}
    result_file(inputs.work_dir).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return result


def result_file(work_dir: Path) -> Path:
    """Where a smoke leaves its record (``hooks.update`` reads the losses and the baseline comparison there)."""
    return Path(work_dir) / "smoke_result.json"

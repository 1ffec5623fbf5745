"""The smoke on a scaffold that is already written, with its report: ``python -m hooks.smoke ANSWERS``.

The same run as copier's post-generation task ends with (``hooks.report.postgen``): the smoke
(``hooks.smoke.run``), its section in MIGRATION.md and ``smoke_result.json`` beside its log, then the
verdict, printed last.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hooks import load_answers, scaffold
from hooks.report.migration import write_smoke_section
from hooks.report.summary import print_summary
from hooks.smoke.run import run_smoke
from hooks.smoke.verdict import SmokeResult, print_iteration


def smoke_and_report(
    dest: Path, answers: dict[str, Any], *, iters: int = 5, report: bool = True
) -> SmokeResult:
    """Run the smoke with progress on the terminal; write its MIGRATION.md section and ``smoke_result.json``.

    The verdict is printed by the caller (``hooks.report.summary.print_summary``), last, so that nothing buries it.
    """
    result, inputs, note = run_smoke(dest, answers, iters=iters, progress=print_iteration)
    if report:
        write_smoke_section(dest / scaffold.migration_md(answers["model_id"]), result, inputs, note)
    record = {"passed": result.passed, "mode": result.mode, "wall_s": result.wall_s, "peak_rss_mb": result.peak_rss_mb,
              "summary": result.summary(), "log": result.log_path, "notes": result.notes}
    (inputs.work_dir / "smoke_result.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.smoke", description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path, help=".copier-answers/<model_id>.yml in the checkout")
    parser.add_argument("--dest", type=Path, default=Path.cwd(), help="checkout root (default: cwd)")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--no-report", action="store_true", help="do not update MIGRATION.md")
    args = parser.parse_args(argv)
    dest = args.dest.resolve()
    answers_path = args.answers if args.answers.is_absolute() else dest / args.answers
    answers = load_answers(answers_path)
    result = smoke_and_report(dest, answers, iters=args.iters, report=not args.no_report)
    print_summary(result, report="" if args.no_report else str(scaffold.migration_md(answers["model_id"])))
    return 0 if result.passed else 1

"""``python -m hooks.smoke ANSWERS [--dest CHECKOUT] [--record-baseline]``: re-run a generated model's smoke in its
checkout, write its report (MIGRATION.md, the system test) and print the summary.

A command, not a stage module: it puts the smoke (``hooks.smoke.run``) and its report (``hooks.report.smoke``,
``hooks.report.summary``) together, so it sits here, where ``python -m`` finds it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hooks import exit_now, load_answers, scaffold
from hooks.report.smoke import smoke_and_report
from hooks.report.summary import print_summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.smoke",
                                     description="re-run a migrated model's smoke in its checkout, with its report")
    parser.add_argument("answers", type=Path, help=".copier-answers/<model_id>.yml in the checkout")
    parser.add_argument("--dest", type=Path, default=Path.cwd(), help="checkout root (default: cwd)")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--no-report", action="store_true", help="do not update MIGRATION.md")
    parser.add_argument("--record-baseline", action="store_true",
                        help="record the system test's baseline (tests/st/) from this run, on this device")
    args = parser.parse_args(argv)
    dest = args.dest.resolve()
    answers_path = args.answers if args.answers.is_absolute() else dest / args.answers
    answers = load_answers(answers_path)
    result = smoke_and_report(dest, answers, iters=args.iters, report=not args.no_report,
                              record_baseline=args.record_baseline)
    print_summary(result, report="" if args.no_report else str(scaffold.migration_md(answers["model_id"])))
    return 0 if result.passed else 1


if __name__ == "__main__":
    exit_now(main())

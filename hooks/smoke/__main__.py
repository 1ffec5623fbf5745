"""``python -m hooks.smoke ANSWERS [--dest CHECKOUT] [--record-baseline]``: re-run a generated model's smoke in its
checkout (after the data check, as a copy does), write its report (REPORT.md, the system test) and print the summary.

A command, not a stage module: it puts the data check (``hooks.report.data_check``), the smoke (``hooks.smoke.run``)
and its report (``hooks.report.smoke``, ``hooks.report.summary``) together, so it sits here, where ``python -m``
finds it. ``--no-report`` (``hooks.update``'s review, ``hooks.check --smoke``) runs the smoke alone and writes nothing
into the checkout.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hooks import exit_now, load_answers, scaffold
from hooks.report.data_check import check_data
from hooks.report.document import Report
from hooks.report.smoke import smoke_and_report
from hooks.report.summary import print_summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.smoke",
                                     description="re-run a migrated model's smoke in its checkout, with its report")
    parser.add_argument("answers", type=Path, help=".copier-answers/<model_id>.yml in the checkout")
    parser.add_argument("--dest", type=Path, default=Path.cwd(), help="checkout root (default: cwd)")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--no-report", action="store_true", help="the smoke alone: no data check, REPORT.md left as is")
    parser.add_argument("--record-baseline", action="store_true",
                        help="record the system test's baseline (tests/st/) from this run, on this device")
    args = parser.parse_args(argv)
    dest = args.dest.resolve()
    answers_path = args.answers if args.answers.is_absolute() else dest / args.answers
    answers = load_answers(answers_path)
    parity = None
    if not args.no_report:
        data = check_data(dest, answers)
        if not data.go_on:
            Report(answers["model_id"], data.section, "Not run: data parity stopped the stage.").write(dest)
            return 1
        parity = data.section
    result = smoke_and_report(dest, answers, parity=parity, iters=args.iters, record_baseline=args.record_baseline)
    print_summary(result, report="" if args.no_report else str(scaffold.report_md(answers["model_id"])))
    return 0 if result.passed else 1


if __name__ == "__main__":
    exit_now(main())

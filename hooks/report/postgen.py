"""copier's post-generation task: show the probe's plan, check the data path, run the smoke, write REPORT.md.

Runs in the destination checkout with the hooks interpreter the user chose.
The plan was derived at question time and frozen into the answers file, so no
probe runs here; a remote-code model's own files were copied next to its plugin by the task before this one
(``hooks.render.remote_code``). ``--no-smoke`` (question ``run_smoke: false``) stops after the
summary; ``copier copy --skip-tasks`` skips this task entirely.

``python -m hooks.report.postgen .copier-answers/<model_id>.yml [--no-smoke]``
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hooks import FINDINGS_SHOWN, exit_now, load_answers, scaffold
from hooks.data.candidates import DataEvidence
from hooks.lifetime import follow_owner
from hooks.model.facts import ModelFacts
from hooks.model.facts_text import ignored_media_text, render_table
from hooks.report.data_check import check_data
from hooks.report.document import Report
from hooks.report.smoke import smoke_and_report
from hooks.report.summary import print_summary
from hooks.terminal import echo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.report.postgen", description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path)
    parser.add_argument("--no-smoke", action="store_true")
    args = parser.parse_args(argv)
    follow_owner()  # copier's process: if it goes (Ctrl-C, kill), so do we and the trainer we launched
    dest = Path.cwd()
    answers = load_answers(args.answers)
    facts = ModelFacts.from_dict(answers["model_facts"])
    echo(f"msmm-migrate: {answers['model_id']} ({facts.architecture}), data branch {answers['data_branch']}")
    evidence = DataEvidence.from_dict(answers.get("data_evidence"))
    if evidence:
        echo(f"recommended data branch {evidence.recommended.branch}: {evidence.recommended.reason}")
    if os.environ.get(FINDINGS_SHOWN) != "1":  # an interactive copy showed them above the branch question
        echo(render_table(facts))
    if facts.plan.problems:
        echo("error: the derived plan has problems (listed above); the scaffold is written, fix the YAML by hand",
              file=sys.stderr)
        return 1
    if facts.unused_media and answers.get("parity_mismatch", "stop") == "stop":
        echo(f"error: {ignored_media_text(facts)}; a smoke would pass on the wrong data. Use a transformers "
              "release whose forward passes them on, or copy again with -d parity_mismatch=warn to train anyway",
              file=sys.stderr)
        echo(_after_failure(args.answers, answers))
        return 1
    data = check_data(dest, answers)
    if not data.go_on:
        Report(answers["model_id"], data.section, "Not run: data parity stopped the copy.").write(dest)
        echo(_after_failure(args.answers, answers))
        return 1
    if args.no_smoke:
        Report(answers["model_id"], data.section).write(dest)
        return _skipped(args.answers, answers)
    result = smoke_and_report(dest, answers, parity=data.section)
    print_summary(result, report=str(scaffold.report_md(answers["model_id"])),
                  after_failure=_after_failure(args.answers, answers))  # last: nothing printed after it buries it
    return 0 if result.passed else 1


def _rerun_command(answers_path: Path, answers: dict) -> str:
    template = answers.get("_src_path", "<msmm-migrate>")
    return f"PYTHONPATH={template} python -m hooks.smoke {answers_path}"


def _after_failure(answers_path: Path, answers: dict) -> str:
    """What the failed copy left in the checkout, and the two ways on: fix and re-run, or remove."""
    written = [str(answers_path)] + [f"{path}/" if not path.suffix else str(path) for path in
                                     scaffold.written(answers["model_id"], answers.get("data_branch", ""))[1:]]
    return (f"the scaffold is written ({', '.join(written)}); fix the cause and re-run the smoke with\n"
            f"  {_rerun_command(answers_path, answers)}\n"
            f"or remove it with: rm -r {' '.join(written)}")


def _skipped(answers_path: Path, answers: dict) -> int:
    echo(f"smoke skipped (run_smoke=false); run it later with: {_rerun_command(answers_path, answers)}")
    return 0


if __name__ == "__main__":
    exit_now(main())

"""copier's post-generation task: show the probe's plan, run the smoke, write the report.

Runs in the destination checkout with the hooks interpreter the user chose.
The plan was derived at question time and frozen into the answers file, so no
probe runs here. ``--no-smoke`` (question ``run_smoke: false``) stops after the
summary; ``copier copy --skip-tasks`` skips this task entirely.

``python -m hooks.postgen .copier-answers/<model_id>.yml [--no-smoke]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hooks.probe import ModelFacts, render_table
from hooks.smoke import is_mindspeed_mm_checkout, load_answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.postgen", description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path)
    parser.add_argument("--no-smoke", action="store_true")
    args = parser.parse_args(argv)
    dest = Path.cwd()
    answers = load_answers(args.answers)
    facts = ModelFacts(**answers["model_facts"])
    print(f"msmm-migrate: {answers['model_id']} ({facts.architecture}), data branch {answers['data_branch']}")
    print(render_table(facts))
    if facts.plan["problems"]:
        print("error: the derived plan has problems (listed above); the scaffold is written, fix the YAML by hand",
              file=sys.stderr)
        return 1
    if not is_mindspeed_mm_checkout(dest):
        print(f"note: {dest} is not a MindSpeed-MM checkout; the contract smoke will run instead of the trainer")
    if args.no_smoke:
        print("smoke skipped (run_smoke=false); run it later with: python -m hooks.smoke " + str(args.answers))
        return 0
    from hooks.smoke import main as smoke_main

    return smoke_main([str(args.answers), "--dest", str(dest)])


if __name__ == "__main__":
    raise SystemExit(main())

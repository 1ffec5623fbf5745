"""After a plain ``copier update``: the framework must be the one the model was rendered for.

``copier update`` replays the recorded answers, the ``framework`` facts included, so after the checkout's
MindSpeed-MM was upgraded it keeps rendering for the old framework and exits 0 ("Keeping template version
..."): a silent no-op exactly when users reach for it. ``python -m hooks.update`` carries models across (it
passes the upgraded checkout's facts with ``-d``, and runs copier with ``--skip-tasks``, so this check never
runs under it). This task of a plain update compares the recorded revision with the checkout's and, when
they differ, ends the update non-zero naming that command.

``python -m hooks.render.stale .copier-answers/<model_id>.yml`` (from the checkout root).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hooks import load_answers
from hooks.framework.checkout import recorded_revision, revision


def stale(dest: Path, answers: dict) -> str:
    """Why the answers no longer fit the checkout's framework ("" when they do)."""
    recorded = recorded_revision(answers)
    now = revision(dest)
    if not recorded or not now or recorded == now:
        return ""
    return (f"the checkout's framework is at {now[:12]}, and {answers.get('model_id', 'this model')} was rendered "
            f"for {recorded[:12]}: copier update keeps the recorded framework; carry the model across with "
            f"PYTHONPATH=<msmm-migrate> python -m hooks.update {dest}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m hooks.render.stale``: 1 (and one line on stderr) when the framework moved."""
    parser = argparse.ArgumentParser(prog="python -m hooks.render.stale", description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path)
    args = parser.parse_args(argv)
    why = stale(Path.cwd(), load_answers(args.answers))
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

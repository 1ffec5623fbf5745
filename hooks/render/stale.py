"""Before a plain ``copier update`` writes anything: the framework must be the one the model was rendered for.

``copier update`` replays the recorded answers, the ``framework`` facts included, so after the checkout's
MindSpeed-MM was upgraded it keeps rendering for the old framework: a silent no-op exactly when users reach for
it. ``python -m hooks.update`` carries models across (it passes the upgraded checkout's facts with ``-d``). This
check is copier's first before-stage migration (``copier.yml``), which runs after copier's replay of the old
version in a temporary folder and before it renders anything in the checkout: when the recorded revision and the
checkout's differ it ends the update non-zero naming that command, with every file as it was. (As a task it ran
after the render, and the model's files were left rewritten without the user's committed edits.)
``hooks.update`` sets ``MSMM_HOOKS_UPDATE`` (``UNDER_HOOKS_UPDATE``) for its own copier runs, which this check
lets through.

``python -m hooks.render.stale .copier-answers/<model_id>.yml`` (from the checkout root).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hooks import load_answers
from hooks.framework.checkout import recorded_revision, revision

UNDER_HOOKS_UPDATE = "MSMM_HOOKS_UPDATE"  # set by hooks.update for the copier runs it starts with the live facts


def stale(dest: Path, answers: dict) -> str:
    """Why the answers no longer fit the checkout's framework ("" when they do)."""
    recorded = recorded_revision(answers)
    now = revision(dest)
    if not recorded or not now or recorded == now:
        return ""
    return (f"the checkout's framework is at {now[:12]}, and {answers.get('model_id', 'this model')} was rendered "
            f"for {recorded[:12]}: copier update would keep the recorded framework, so it stopped before changing "
            f"any file; carry the model across with PYTHONPATH=<msmm-migrate> python -m hooks.update {dest}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m hooks.render.stale``: 1 (and one line on stderr) when the framework moved."""
    parser = argparse.ArgumentParser(prog="python -m hooks.render.stale", description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path)
    args = parser.parse_args(argv)
    if os.environ.get(UNDER_HOOKS_UPDATE):  # hooks.update's own run: it passed the checkout's facts
        return 0
    why = stale(Path.cwd(), load_answers(args.answers))
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

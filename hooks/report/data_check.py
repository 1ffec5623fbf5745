"""The report stage's first step: data parity of the generated scaffold, before any smoke.

A healthy loss on the wrong format is the worst outcome, so the generated data path is compared with the model's own
format (``hooks.data.parity``) before the smoke trains on it, on every run of the stage (a copy, ``python -m
hooks.smoke`` after a fix, ``python -m hooks.update`` after a framework upgrade).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from hooks import scaffold
from hooks.report.document import parity_section
from hooks.terminal import echo


@dataclass(frozen=True)
class DataCheck:
    """The parity step's outcome as the rest of the stage uses it."""

    go_on: bool  # False: the smoke must not run (a mismatch under parity_mismatch=stop, or a data path that raises)
    section: str  # REPORT.md's "Data parity" section


def check_data(dest: Path, answers: dict) -> DataCheck:
    """Data parity of the generated scaffold, printed, with REPORT.md's section; ``go_on`` False stops the stage.

    A mismatch stops it before the smoke unless the ``parity_mismatch`` answer is ``warn``. A data path that raises
    on the model's own samples cannot be built, so it stops the stage whatever that answer says (the smoke and every
    training run would fail the same way); a check that could not run for another reason only warns.
    """
    from hooks.data.parity import parity_for_answers

    result, why = parity_for_answers(dest, answers)
    if result is None:
        echo(f"data parity: not checked ({why})")
        return DataCheck(True, f"Not checked: {why}.")
    echo(result.summary())
    section = parity_section(result)
    if result.verdict == "mismatch" and answers.get("parity_mismatch", "stop") == "stop":
        echo(f"error: data parity: {result.first_difference()}; the data path would train on another format than "
             "the model's own. Choose another data branch (see MIGRATION.md's candidates), or copy again with "
             "-d parity_mismatch=warn to train anyway", file=sys.stderr)
        return DataCheck(False, section)
    if result.verdict == "error" and result.data_path_raises:
        echo(f"error: data parity: {result.first_difference()}; this data path cannot be built for the model. "
             "Choose another data branch (see MIGRATION.md's candidates; data_branch=c writes a dataset plugin "
             "around the model's own processor)", file=sys.stderr)
        return DataCheck(False, section)
    if not result.ok:
        echo(f"WARNING: the data path is not proven to reproduce the model's own format; see the Data parity "
             f"section of {scaffold.report_md(answers['model_id'])} before training", file=sys.stderr)
    return DataCheck(True, section)

"""What a person reads at the end of a smoke: a short summary, wrapped at word boundaries to the terminal.

A smoke proves many things (settings, units, weights, shard bytes, loss equivalence, every medium's gradient) and
each proof is a long line with its figures. At an 80-column terminal ~30 such lines wrapped mid-word
(``apply_\\nmodules``) bury the verdict. So a terminal gets the verdict, the losses, one short line per proof and
where the report is (at most ``SUMMARY_LINES`` lines); the figures stay in REPORT.md and, where the output is
not a terminal (a CI log, a pipe), are printed in full before the summary, unwrapped, so logs keep every figure
on one searchable line.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from hooks.smoke.verdict import SmokeResult
from hooks.terminal import terminal_width, wrap

SUMMARY_LINES = 15  # a summary longer than this folds its proofs into one paragraph
_PARENS = re.compile(r" ?\([^()]*\)")


def headline(note: str) -> str:
    """A proof's claim without its figures: parentheses dropped, cut at its first ``;`` or ``, ``.

    ``verified: weights: 4 tensors equal the model folder's files (a, b), loaded through x`` becomes
    ``verified: weights: 4 tensors equal the model folder's files``.
    """
    short = note
    while (shorter := _PARENS.sub("", short)) != short:
        short = shorter
    return re.split(r"; |, ", short, maxsplit=1)[0].rstrip(" .:")


def verdict_line(result: SmokeResult) -> str:
    """The verdict with the first and last loss (every loss is in REPORT.md and the details)."""
    state = "PASS" if result.passed else "FAIL"
    done = f"{len(result.losses)}/{result.iterations_expected} iterations"
    if result.passed:
        return f"smoke[{result.mode}] {state}: loss {result.losses[0]:.4f} -> {result.losses[-1]:.4f} over {done}"
    return f"smoke[{result.mode}] {state} after {done}: {result.reason}"


def summary_lines(result: SmokeResult, *, report: str = "", after_failure: str = "",
                  width: int | None = None) -> list[str]:
    """The end of a copy for a person, as printed at ``width`` columns: verdict, one short line per proof, warnings,
    where the report and log are; at most ``SUMMARY_LINES`` lines where the proofs fold into one paragraph.

    ``report`` is REPORT.md's path as the user sees it ('' when it was not written); ``after_failure`` says
    what a failed copy left behind and how to re-run or remove it.
    """
    proofs, others = [], []
    for note in result.notes:
        if note.startswith("memory, rank "):
            continue  # the per-rank table is REPORT.md's
        (proofs if note.startswith(("verified: ", "not verified: ")) else others).append(headline(note))
    if any(note.startswith("memory, rank ") for note in result.notes):
        others.append("memory: each rank's measurement beside the plan's, in the report")
    tail = [f"hint: {result.hint}"] if not result.passed and result.hint else []
    tail += after_failure.splitlines() if not result.passed and after_failure else []
    tail += [f"report: {report}"] if report else []
    tail += [f"full log: {result.log_path}"] if result.log_path else []
    lines = [part for line in (verdict_line(result), *proofs, *others, *tail) for part in wrap(line, width)]
    if len(lines) > SUMMARY_LINES and proofs:  # fold the proofs into one paragraph
        verified = [p.removeprefix("verified: ") for p in proofs if p.startswith("verified: ")]
        unverified = [p for p in proofs if not p.startswith("verified: ")]
        folded = (verdict_line(result), "verified: " + "; ".join(verified), *unverified, *others, *tail)
        lines = [part for line in folded for part in wrap(line, width)]
    return lines


def print_summary(result: SmokeResult, *, report: str = "", after_failure: str = "",
                  file: TextIO | None = None) -> None:
    """The smoke's end, printed last so nothing buries it: at a terminal the summary alone, wrapped; elsewhere the
    full verdict and every note first (a log keeps every figure), then the same summary."""
    stream = file or sys.stdout
    width = terminal_width(stream)
    if width is None:
        print(result.summary(), file=stream)
        for note in result.notes:
            print(f"  {note}", file=stream)
    for line in summary_lines(result, report=report, after_failure=after_failure, width=width):
        print(line, file=stream)
    stream.flush()

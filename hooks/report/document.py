"""REPORT.md: the report stage's own file, written whole each time the stage runs.

copier renders MIGRATION.md: the decisions, the plans, the data path, the memory plan, all known before anything
runs. What the report stage measures after rendering (the generated data path's parity, the smoke, the system test)
goes into REPORT.md beside it, rewritten whole from this run's results: no file is edited between markers, and
``copier update``'s three-way merge of MIGRATION.md never meets a measured figure. copier never renders REPORT.md;
``python -m hooks.smoke`` runs the stage again (parity, smoke, system test) and rewrites it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hooks import scaffold
from hooks.smoke.verdict import SmokeResult


@dataclass
class Report:
    """REPORT.md's three sections, each Markdown; a section this run did not reach says why and how to run it."""

    model_id: str
    parity: str  # the generated data path against the model's own format (``parity_section``), or why not checked
    smoke: str = ""  # the smoke's verdict, proofs and measured memory (``smoke_section``); '' before the smoke ran
    st: str = ""  # the system test: its files, the baseline's provenance, the last comparison (``hooks.report.st``)

    def markdown(self) -> str:
        rerun = (f"`python -m hooks.smoke {scaffold.answers_file(self.model_id)}` (from the template folder on "
                 "PYTHONPATH)")
        return "\n".join([
            f"# Verification report: {self.model_id}",
            "",
            "Written whole by msmm-migrate's report stage after the copy rendered the scaffold (the decisions and "
            f"plans are in `MIGRATION.md` beside this file). Run the stage again with {rerun}.",
            "",
            "## Data parity (the generated data path, whole batch)",
            self.parity,
            "",
            "## Smoke",
            self.smoke or f"Not run: {rerun} runs it in a MindSpeed-MM checkout.",
            "",
            "## System test (MindSpeed-MM's `tests/st` format)",
            "The shell script, its run config and its baseline, compared by MindSpeed-MM's "
            "`tests/st/test_tools/test_ci_st.py` (loss within 1 % per step; time and memory where the baseline was "
            "recorded on a device with an allocator).",
            self.st or "Not recorded: the smoke records it.",
            "",
        ])

    def write(self, dest: Path) -> Path:
        """Write REPORT.md into the checkout ``dest``, whole; returns its path."""
        path = dest / scaffold.report_md(self.model_id)
        path.write_text(self.markdown(), encoding="utf-8")
        return path


def _rss(peaks: list[float]) -> str:
    return f"; peak RSS per rank: {', '.join(f'{x:.0f} MB' for x in peaks)}" if peaks else ""


def smoke_section(result: SmokeResult, inputs, note: str) -> str:  # noqa: ANN001 - hooks.smoke.SmokeInputs
    """Markdown lines for the smoke result (the judge's verdict, not a raw log)."""
    losses = ", ".join(f"{x:.4f}" for x in result.losses) or "none"
    lines = [
        f"- mode: {note}",
        f"- model: {inputs.model_note}",
        f"- data: {inputs.data_note}",
        f"- result: **{'PASS' if result.passed else 'FAIL'}**, {len(result.losses)}/{result.iterations_expected} "
        f"iterations, loss {losses} ({result.reason})",
        f"- wall time: {result.wall_s:.1f} s" + _rss(result.peak_rss_mb),
    ]
    lines += [f"- {note}" for note in result.notes if not note.startswith("memory, rank ")]
    if not result.passed and result.hint:
        lines.append(f"- hint: {result.hint}")
    if result.memory_table:
        lines += ["", "Measured memory beside the plan (the plan's arithmetic for this shrunk model and the smoke's "
                  "settings; activations for the tokens and patches each layer saw):", "", result.memory_table]
    return "\n".join(lines)


def parity_section(result) -> str:  # noqa: ANN001 - hooks.data.parity.ParityResult
    """The generated data path's parity verdict and what it rests on, as Markdown."""
    return "\n".join([f"- {result.candidate}: **{result.verdict}**", *(f"- {d}" for d in result.details)])

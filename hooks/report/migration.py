"""Write results into the generated MIGRATION.md, between fixed markers.

Only the smoke section is rewritten, so a later ``copier update`` three-way merge
sees one stable block that the template itself leaves as a placeholder.
"""

from __future__ import annotations

from pathlib import Path

from hooks.smoke.verdict import SmokeResult


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


def write_section(migration_md: Path, name: str, body: str) -> bool:
    """Replace the block between ``<!-- msmm-<name>:begin/end -->``; False (no write) when the markers are gone."""
    begin, end_marker = f"<!-- msmm-{name}:begin -->", f"<!-- msmm-{name}:end -->"
    if not migration_md.is_file():
        return False
    text = migration_md.read_text()
    start, end = text.find(begin), text.find(end_marker)
    if start < 0 or end < start:
        return False
    migration_md.write_text(text[: start + len(begin)] + "\n" + body + "\n" + text[end:])
    return True


def write_smoke_section(migration_md: Path, result: SmokeResult, inputs, note: str) -> bool:  # noqa: ANN001
    return write_section(migration_md, "smoke", smoke_section(result, inputs, note))


def parity_section(result) -> str:  # noqa: ANN001 - hooks.data.parity.ParityResult
    """The generated data path's parity verdict and what it rests on, as Markdown."""
    return "\n".join([f"- {result.candidate}: **{result.verdict}**", *(f"- {d}" for d in result.details)])

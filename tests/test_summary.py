"""The end of a smoke as a person reads it: at most 15 lines, wrapped at word boundaries, figures left to the report."""

from __future__ import annotations

import io

from hooks.report.summary import SUMMARY_LINES, headline, print_summary, summary_lines
from hooks.smoke.verdict import SmokeResult
from hooks.terminal import wrap

# Notes as a real tier-2 smoke of the tiny Qwen2.5-VL wrote them (figures shortened where they do not matter).
NOTES = [
    "fully_shard: CPU stand-in applied, torch's own fully_shard (torch 2.13.0+cpu; MindSpeed-MM's patch needs "
    "2.7.1/2.9.0)",
    "verified: recompute applied to 4 modules, every features.recompute_plan.apply_modules pattern matched",
    "verified: loss type 'default' at features.loss_cfg, one the trainer implements (default, per_sample_loss, "
    "per_token_loss, raw)",
    "verified: FSDP2 applied to 9 modules, every parallel.fsdp_plan.apply_modules pattern matched",
    "verified: weights: 4 tensors equal the model folder's files (model.visual.patch_embed.proj.weight, "
    "lm_head.weight), loaded through model.model_name_or_path",
    "verified: shard sizes equal the memory plan's arithmetic to the byte (rank 0 params 1,135,040, grads "
    "1,135,040, optimizer 2,270,308)",
    "verified: no YAML setting ignored by the trainer",
    "verified: loss equivalence: step-1 loss 8.128845 = the model's own 8.128845 (relative error 5.9e-08, fp32; "
    "reduction default: each rank's micro-batch token mean); steps 1-3 losses equal a plain AdamW loop's",
    "verified: step-1 gradients: 57 parameters equal the model's own within 1e-04 (worst 9.8e-08, "
    "model.language_model.layers.1.input_layernorm.weight)",
    "verified: image reached forward (pixel_values [16, 1176] on rank 0, 2 ranks in all) and model.visual got a "
    "gradient (norm 1.7e-01) at step 1",
    "verified: audio reached forward (input_features [1, 128, 3000] on rank 0) and audio_tower got a gradient "
    "(norm 7.6e-01) at step 1",
    *(f"memory, rank {r}: activations saved for backward, 2 decoder layers (48 rows each, recompute, fp32): "
      "24.00 KiB predicted, 24.00 KiB measured (0.0% off, worst layer 0.0%)" for r in (0, 1)),
    "WARNING: experts no token reaches get no gradient: model.layers.0.mlp.experts.3 (and 5 more); a remedy",
]


def _result(**kw) -> SmokeResult:
    base = dict(mode="framework", losses=[8.1288, 8.0938, 8.0631, 8.0350, 8.0052], iterations_expected=5,
                notes=list(NOTES), passed=True, reason="finite, non-zero, changing loss",
                log_path="/root/.cache/msmm-migrate/smoke/tq/smoke_trainer.log")
    return SmokeResult(**{**base, **kw})


def test_headline_keeps_the_claim_and_drops_the_figures() -> None:
    assert headline(NOTES[4]) == "verified: weights: 4 tensors equal the model folder's files"
    assert headline(NOTES[7]) == "verified: loss equivalence: step-1 loss 8.128845 = the model's own 8.128845"
    assert headline(NOTES[9]) == "verified: image reached forward and model.visual got a gradient at step 1"
    assert headline(NOTES[0]) == "fully_shard: CPU stand-in applied"


def test_the_summary_fits_fifteen_lines_of_eighty_columns() -> None:
    for width in (79,):
        lines = summary_lines(_result(), report="examples/tq/REPORT.md", width=width)
        assert len(lines) <= SUMMARY_LINES, "\n".join(lines)
        assert all(len(line) <= width for line in lines), "\n".join(lines)
        assert lines[0] == "smoke[framework] PASS: loss 8.1288 -> 8.0052 over 5/5 iterations"
        assert lines[-2:] == ["report: examples/tq/REPORT.md",
                              "full log: /root/.cache/msmm-migrate/smoke/tq/smoke_trainer.log"]
        text = " ".join(lines)
        assert "WARNING: experts no token reaches get no gradient" in text  # a warning is never dropped
        assert "KiB" not in text and "1,135,040" not in text  # figures are the report's


def test_a_short_summary_lists_one_proof_per_line() -> None:
    lines = summary_lines(_result(notes=NOTES[:5]), report="examples/tq/REPORT.md", width=79)
    assert "verified: FSDP2 applied to 9 modules" in lines


def test_a_failure_ends_with_the_hint_the_way_on_and_the_log() -> None:
    failed = _result(passed=False, losses=[], reason="only 0 of 5 iterations logged", hint="read the first "
                     "traceback in the full log", notes=[])
    lines = summary_lines(failed, after_failure="the scaffold is written; re-run with\n  python -m hooks.smoke x",
                          width=79)
    assert lines[0] == "smoke[framework] FAIL after 0/5 iterations: only 0 of 5 iterations logged"
    assert lines[1].startswith("hint: ") and lines[-1].startswith("full log: ")


def test_a_log_keeps_every_figure_on_one_line() -> None:
    """Not a terminal (a CI log, a pipe): the full verdict and every note first, unwrapped, then the summary."""
    out = io.StringIO()
    print_summary(_result(), report="examples/tq/REPORT.md", file=out)
    text = out.getvalue()
    assert "  " + NOTES[9] + "\n" in text and "  " + NOTES[11] + "\n" in text
    assert text.rstrip().endswith("full log: /root/.cache/msmm-migrate/smoke/tq/smoke_trainer.log")


def test_wrap_never_splits_a_word() -> None:
    """Rows join back into the text: at spaces, or inside a path right after a slash."""
    text = ("  verified: FSDP2 applied to 9 modules, every parallel.fsdp_plan.apply_modules pattern matched and "
            "/a/very/long/path/that/is/longer/than/the/width/of/the/terminal/itself/model.safetensors too")
    lines = wrap(text, 40)
    assert all(len(line) <= 40 for line in lines) and lines[0].startswith("  verified")
    assert all(line.startswith("    ") for line in lines[1:])
    joined = lines[0]
    for line in lines[1:]:
        joined += ("" if joined.endswith("/") else " ") + line.strip()
    assert joined == text


class _Terminal(io.StringIO):
    """A stream that says it is a terminal (``hooks.terminal`` wraps only for one)."""

    def isatty(self) -> bool:
        return True


def test_the_update_table_becomes_wrapped_paragraphs_at_a_narrow_terminal(monkeypatch) -> None:
    """``hooks.update``'s table is wider than 80 columns with its losses column: at such a terminal each model is one
    wrapped paragraph, no word split; a log keeps the aligned table."""
    import shutil

    from hooks.update import Row, print_table

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): __import__("os").terminal_size((80, 24)))
    rows = [Row("first_vl", "a" * 40, "b" * 40, "0.2.0", "0.2.0", ["f"] * 4, check="ok", smoke="PASS",
                losses="ok (max rel diff 0.00% over 5 steps, tolerance 1%)")]
    shown = _Terminal()
    print_table(rows, shown)
    lines = shown.getvalue().splitlines()
    assert lines[0].startswith("first_vl: framework aaaaaaaa -> bbbbbbbb; template 0.2.0 -> 0.2.0;")
    assert all(len(line) <= 79 for line in lines) and len(lines) <= 4
    logged = io.StringIO()
    print_table(rows, logged)
    assert logged.getvalue().splitlines()[0].split() == ["model", "framework", "template", "files", "conflicts",
                                                         "check", "smoke", "losses", "vs", "baseline"]

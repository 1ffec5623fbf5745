"""Judge whether a smoke run showed a real training signal.

A smoke passes only when the loss is finite, non-zero and not constant over the
iterations, and the labels carried unmasked tokens. Everything else is a
failure with a reason and a hint; NaN, Inf and a flat loss never pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

Progress = Callable[[int, int, "float | None"], None]  # (iteration, total, loss) as a smoke trains


@dataclass
class SmokeResult:
    """What a smoke run measured, in a form both smoke modes share."""

    mode: str  # "framework" (real MindSpeed-MM trainer) or "contract" (torch fully_shard)
    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    label_tokens: int | None = None  # unmasked label tokens seen, when known
    iterations_expected: int = 0
    wall_s: float = 0.0
    peak_rss_mb: list[float] = field(default_factory=list)  # per rank, when known
    log_tail: str = ""
    log_path: str = ""  # the full log, kept after the run
    notes: list[str] = field(default_factory=list)  # what the run reported about itself (e.g. CPU bridges used)
    memory_table: str = ""  # measured memory beside the plan (hooks.smoke.memory_check), Markdown
    error: str = ""
    passed: bool = False
    reason: str = ""
    hint: str = ""  # what to do about a failure; a run that knows its error's cause sets it with the error
    device: str = ""  # where it ran: cpu | cuda | npu (the framework smoke; a baseline records it)
    ranks: int = 0  # how many ranks it launched

    def summary(self) -> str:
        """One line a reviewer can read in REPORT.md or a CI log."""
        state = "PASS" if self.passed else "FAIL"
        losses = ", ".join(f"{x:.4f}" for x in self.losses) or "none"
        return (
            f"smoke[{self.mode}] {state}: {len(self.losses)}/{self.iterations_expected} "
            f"iterations, loss {losses} ({self.reason})"
        )


def judge(result: SmokeResult, *, rel_tol: float = 1e-6) -> SmokeResult:
    """Fill ``passed``/``reason``/``hint`` from the measured losses."""
    losses = result.losses
    verdict: tuple[bool, str, str]
    if result.error:
        verdict = (False, result.error, result.hint or "read the first traceback in the full log")
    elif len(losses) < max(result.iterations_expected, 2):
        verdict = (
            False,
            f"only {len(losses)} of {result.iterations_expected} iterations logged",
            "the run stopped early; read the first traceback in the full log",
        )
    elif not all(math.isfinite(x) for x in losses):
        verdict = (
            False,
            "non-finite loss (NaN/Inf)",
            "check dtype settings (param_dtype/attn_implementation) and the shrunk config",
        )
    elif all(x == 0.0 for x in losses):
        verdict = (False, "loss is zero", "labels are probably all masked (-100)")
    elif max(losses) - min(losses) <= rel_tol * max(abs(x) for x in losses):
        verdict = (
            False,
            "loss is constant across iterations",
            "parameters are not updated: check model.freeze, lr and that the optimizer got parameters",
        )
    elif result.label_tokens is not None and result.label_tokens <= 0:
        verdict = (False, "no unmasked label tokens", "check the chat template and the data sample")
    else:
        verdict = (True, "finite, non-zero, changing loss", "")
    result.passed, result.reason, result.hint = verdict
    return result


def print_iteration(iteration: int, total: int, loss: float | None) -> None:
    """Progress for a terminal while a smoke trains: one short line per iteration, nothing else."""
    print(f"  iteration {iteration}/{total}  loss {'?' if loss is None else f'{loss:.4f}'}", flush=True)

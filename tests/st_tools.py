"""Run a migrated model's system test the way MindSpeed-MM's CI does (a helper for the tests, not a test double).

The generated shell script trains through the real trainer (on CPU through the run-time bridges, as the smoke
does: the script passes its environment on to torchrun), its output is the log, and MindSpeed-MM's own comparator
``tests/st/test_tools/test_ci_st.py`` (with ``acquire_json.py`` and ``tests/conftest.py``, run unmodified) compares
it with the recorded baseline.

The comparator is not in the vendored snapshots (they are trimmed to ``mindspeed_mm/`` and ``examples/``), so it
is found through ``MSMM_ST_TOOLS`` (a MindSpeed-MM ``tests/st`` folder, e.g. one laid out with
``../shared/tools/extract-tree`` from a fetched MindSpeed-MM at 57069cd5) or ``$MINDSPEED_MM_HOME/tests/st`` when
the framework checkout has it; tests that need it skip, with that reason, where neither is there (CI has no network).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hooks.framework.environment import framework_env, free_port
from hooks.scaffold import StPaths

# Another loss reduction: the token mean over every position (masked ones included) instead of the trained ones.
REDUCTION = ("alpha = loss_mask.sum()  # scalar", "alpha = torch.ones_like(loss_mask).sum()  # injected")
LOSS_FILE = "mindspeed_mm/fsdp/loss/loss_func.py"


def st_tools() -> Path:
    """The framework's ``tests/st`` with ``test_tools/test_ci_st.py``, or skip saying how to provide it."""
    candidates = [os.environ.get("MSMM_ST_TOOLS", "")]
    if os.environ.get("MINDSPEED_MM_HOME"):
        candidates.append(str(Path(os.environ["MINDSPEED_MM_HOME"]) / "tests" / "st"))
    for candidate in filter(None, candidates):
        if (Path(candidate) / "test_tools" / "test_ci_st.py").is_file():
            return Path(candidate)
    pytest.skip("MindSpeed-MM's tests/st comparator not found: set MSMM_ST_TOOLS to a MindSpeed-MM tests/st folder")


def run_script(checkout: Path, model_id: str, log: Path) -> subprocess.CompletedProcess[str]:
    """``bash tests/st/shell_scripts/finetune_<id>.sh`` from the checkout root, its output saved as ``log`` (as
    ``st_run.sh`` tees it); torchrun is the test interpreter's, on CPU with the smoke's bridges."""
    home = os.environ.get("MINDSPEED_HOME")
    env = framework_env(checkout, Path(home) if home else None, cpu_bridges=True)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["MASTER_PORT"] = str(free_port())
    done = subprocess.run(["bash", str(StPaths(model_id).script)], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    return done


def comparator(tools: Path, checkout: Path, model_id: str, log: Path, *,
               only_loss: bool) -> subprocess.CompletedProcess[str]:
    """``test_ci_st.py`` on ``log`` against the recorded baseline, as ``st_run.sh`` runs it (``-k loss`` for a
    baseline recorded on CPU: it holds losses only)."""
    out = log.with_suffix(".json")
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tools)}
    cmd = [sys.executable, "-m", "pytest", str(tools / "test_tools" / "test_ci_st.py"), "-p", "no:cacheprovider",
           "--rootdir", str(tools.parent), "--color=no", *(["-k", "loss"] if only_loss else []),
           "--baseline-json", str(checkout / StPaths(model_id).baseline), "--generate-log", str(log),
           "--generate-json", str(out)]
    return subprocess.run(cmd, cwd=tools.parent, env=env, capture_output=True, text=True, timeout=300, check=False)


@contextmanager
def injected(checkout: Path, change: tuple[str, str] = REDUCTION) -> Iterator[None]:
    """The framework copy in ``checkout`` with one line changed, restored afterwards."""
    path = checkout / LOSS_FILE
    text = path.read_text(encoding="utf-8")
    assert text.count(change[0]) == 1, f"{LOSS_FILE} no longer has {change[0]!r}"
    path.write_text(text.replace(change[0], change[1]), encoding="utf-8")
    try:
        yield
    finally:
        path.write_text(text, encoding="utf-8")

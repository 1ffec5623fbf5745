"""The README's demo command end to end: build a tiny VLM, copier copy with tasks, smoke, report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TEMPLATE_ROOT


def run_demo(dest: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hooks.demo", "--dest", str(dest)], cwd=TEMPLATE_ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False)


def test_demo_without_mindspeed_runs_contract_smoke(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MINDSPEED_MM_HOME"}
    done = run_demo(tmp_path / "demo", env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "smoke[contract] PASS: 5/5" in done.stdout
    report = (tmp_path / "demo/checkout/examples/demo_qwen2_5_vl/REPORT.md").read_text()
    assert "**PASS**" in report and "contract smoke (destination is not a MindSpeed-MM checkout)" in report


@pytest.mark.tier2
def test_demo_with_mindspeed_runs_framework_smoke(tmp_path: Path, mm_home: Path) -> None:
    done = run_demo(tmp_path / "demo", dict(os.environ))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "smoke[framework] PASS: 5/5" in done.stdout
    changed = done.stdout.split("changed paths in the destination:")[1].split("report:")[0].split()
    assert {p for p in changed if p != "??"} == {".copier-answers/", "examples/demo_qwen2_5_vl/",
                                                 "mindspeed_mm/fsdp/models/demo_qwen2_5_vl/", "tests/"}  # tests/st

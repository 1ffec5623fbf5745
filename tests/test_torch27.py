"""Tier 2 on the users' torch: copier in this interpreter, the hooks and the real trainer on torch 2.7.1.

On torch 2.7.1 MindSpeed-MM's own ``fully_shard`` patch loads (the CPU bridge's stand-in is only
for other versions), so this leg trains with the framework's FSDP2 code as NPU users get it. The
interpreter comes from ``MSMM_TORCH27_PYTHON`` (``make test-torch27`` builds ``.venv-torch27``).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.copier_run import copy, mm_checkout

pytestmark = [pytest.mark.tier2, pytest.mark.torch27]


@pytest.fixture(scope="module")
def torch27() -> str:
    return os.environ["MSMM_TORCH27_PYTHON"]


@pytest.fixture(scope="module")
def checkout(mm_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mm_checkout(mm_home, tmp_path_factory.mktemp("mm27"))


def test_the_interpreter_is_torch_2_7_1(torch27: str) -> None:
    version = subprocess.run([torch27, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert version.startswith("2.7.1"), version


@pytest.mark.parametrize(("arch", "model_id"), [("qwen2_5_vl", "qwen2_5_vl_t27"), ("qwen3_vl_moe", "qwen3_vl_moe_t27")])
def test_copy_trains_with_mindspeed_mm_fully_shard(arch: str, model_id: str, checkout: Path, tiny_models,
                                                   template_src: Path, torch27: str) -> None:
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch),
                data_branch="a", python=torch27)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    summary = re.search(r"smoke\[framework\] PASS: (\d+)/(\d+) iterations", done.stdout)
    assert summary and int(summary.group(1)) >= 5, done.stdout[-2000:]
    assert "fully_shard: MindSpeed-MM's own patch applied (torch 2.7.1" in done.stdout
    assert "data parity: MATCH" in done.stdout

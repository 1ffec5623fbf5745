"""Accelerator hosts (issue 23): ranks from the devices present, and the fully_shard stand-in alone off CPU.

Tier 1 with a fake device count (``smoke_ranks`` is a pure function of the device kind and count) and a fake
framework tree whose ``fully_shard`` module fails the way MindSpeed-MM's does on a torch it does not know.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hooks.framework.environment import BRIDGES_DIR, smoke_ranks, world_size_one_note
from tests.model_facts import stand_in_answers_facts
from tests.test_trainer_run import _fake_framework


@pytest.mark.parametrize(("device", "count", "ranks"), [
    ("cpu", 0, 2), ("cpu", 8, 2), ("cuda", 1, 1), ("cuda", 2, 2), ("cuda", 8, 2), ("npu", 1, 1), ("npu", 16, 2),
    ("cuda", 0, 1),
])
def test_smoke_ranks_follow_the_devices_present(device: str, count: int, ranks: int) -> None:
    assert smoke_ranks(device, count) == ranks


def test_a_one_rank_smoke_says_what_it_cannot_show() -> None:
    assert world_size_one_note(2) == ""
    note = world_size_one_note(1)
    assert "DDP" in note and "not exercised" in note and "2 ranks" in note


def test_run_smoke_asks_for_the_ranks_of_the_devices_present(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A one-GPU host (faked): the trainer is launched with one rank and the mode note says so."""
    from hooks.smoke import run, trainer_run
    from hooks.smoke.verdict import SmokeResult

    seen = {}
    monkeypatch.setattr(run, "framework_unavailable", lambda dest: ("", None))
    monkeypatch.setattr(run, "detect_device", lambda: "cuda")
    monkeypatch.setattr(run, "visible_devices", lambda device: 1)
    monkeypatch.setattr(run, "prepare_inputs", lambda answers, model_id: run.SmokeInputs(
        tmp_path, "m", tmp_path / "d.json", tmp_path, "d", tmp_path))
    monkeypatch.setattr(trainer_run, "run_framework_smoke",
                        lambda *a, **k: seen.update(k) or SmokeResult(mode="framework"))
    _, _, note = run.run_smoke(tmp_path, {"model_id": "x", "model_facts": stand_in_answers_facts()})
    assert seen["nproc"] == 1 and seen["device"] == "cuda"
    assert "1 rank on cuda" in note and "not exercised" in note


STANDIN_PROBE = """
import torch
from mindspeed_mm.fsdp.ops.fully_shard.fully_shard import apply_fully_shard_patch, fully_shard
apply_fully_shard_patch()
import torch.distributed.fsdp as fsdp
print(fsdp.fully_shard is fully_shard)
from mindspeed_mm.fsdp.utils.device import get_dist_comm_backend
try:
    get_dist_comm_backend()
except RuntimeError as err:
    print("cpu-only bridges off:", err)
"""


def test_the_fully_shard_stand_in_alone_off_cpu(tmp_path: Path) -> None:
    """``MSMM_FULLY_SHARD_STANDIN=1`` (what ``framework_env`` sets for CUDA/NPU): the refused ``fully_shard`` module
    becomes torch's own, announced; the CPU-only bridges (gloo backend here) stay off."""
    import torch

    if any(v in torch.__version__ for v in ("2.7.1", "2.9.0")):
        pytest.skip("MindSpeed-MM's own patch runs on this torch")
    root = _fake_framework(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BRIDGES_DIR), str(root)]), MSMM_FULLY_SHARD_STANDIN="1")
    env.pop("MSMM_CPU_BRIDGES", None)
    done = subprocess.run([sys.executable, "-c", STANDIN_PROBE], env=env, capture_output=True, text=True,
                          timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True", "cpu-only bridges off: no backend"]
    assert "[msmm-bridges] fully_shard: CPU stand-in applied, torch's own fully_shard" in done.stderr

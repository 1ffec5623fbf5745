"""The same answers give the right scaffold on each framework (issue 12, first acceptance).

Tiny Qwen2.5-VL and Qwen3-VL-MoE are copied with ``--defaults`` into the older vendored MindSpeed-MM
snapshots (d0610012 of 2026-04-25: recompute and ``loss_cfg`` under ``parallel``/``model``, no
``load_format``, ``collate_param.model_name``; a650ff81 of 2026-06-09: ``features`` but
``model_name``) and must pass the real trainer's smoke with recompute verified where that checkout
reads it, FSDP units and weights verified. 57069cd5 is what the rest of tier 2 runs on.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml

from tests.copier_run import copy, mm_checkout
from tests.framework_snapshots import unpack, vendor_dir

# CI: the oldest snapshot (its recompute plan in ``parallel``); the newer one, whose ``features`` section the pinned
# head shares, and the other pairings under --full-matrix
CASES = [("d0610012", "qwen3_vl_moe", "parallel"),
         pytest.param("a650ff81", "qwen2_5_vl", "features", marks=pytest.mark.full_matrix),
         pytest.param("d0610012", "qwen2_5_vl", "parallel", marks=pytest.mark.full_matrix),
         pytest.param("a650ff81", "qwen3_vl_moe", "features", marks=pytest.mark.full_matrix)]


def _older(revision: str) -> Path:
    vendor = vendor_dir()
    archive = vendor / f"MindSpeed-MM-{revision}.tar.gz" if vendor else None
    if archive is None or not archive.is_file():
        pytest.skip(f"no vendored MindSpeed-MM-{revision} (set MSMM_VENDOR)")
    return unpack(archive, Path(tempfile.gettempdir()) / "msmm-framework")


@pytest.mark.tier2
@pytest.mark.parametrize(("revision", "arch", "recompute_in"), CASES)
def test_copy_follows_an_older_framework(revision: str, arch: str, recompute_in: str, mm_home: Path, tiny_models,
                                         template_src: Path, tmp_path: Path) -> None:
    dest = mm_checkout(_older(revision), tmp_path)
    done = copy(dest, skip_tasks=False, template=template_src, model_id=f"m_{arch}", model_path=tiny_models(arch))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "smoke[framework] PASS" in done.stdout
    for line in (f"every {recompute_in}.recompute_plan.apply_modules pattern matched", "verified: FSDP2 applied to",
                 "verified: weights:", "verified: no YAML setting ignored by the trainer"):
        assert line in done.stdout, done.stdout[-3000:]
    config = yaml.safe_load((dest / "examples" / f"m_{arch}" / f"m_{arch}_config.yaml").read_text())
    assert config[recompute_in]["recompute"] is True
    collate = config["data"]["dataloader_param"]["collate_param"]
    assert "model_name" in collate and "collator_id" not in collate
    answers = yaml.safe_load((dest / ".copier-answers" / f"m_{arch}.yml").read_text())
    assert answers["framework"]["recompute_in"] == recompute_in

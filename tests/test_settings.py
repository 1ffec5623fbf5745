"""Every setting takes effect (issue 12, second part): the smoke reads the trainer's log against its config.

Tier 1 on log text in the framework's own wording; tier 2 edits a generated YAML as a user upgrading
from an older framework would (a key this checkout does not know) and re-runs the smoke: it fails
naming the key, where before it passed on the loss alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hooks.smoke.settings import ignored_keys, settings_findings
from tests.copier_run import TEMPLATE_ROOT, copy, mm_checkout

CFG = {"features": {"recompute": True, "recompute_plan": {"apply_modules": ["model.layers.{*}"]}},
       "model": {"freeze": ["model.visual"]}}
RECOMPUTED = ("INFO => Applying recompute to module: model.layers.0\n"
              "INFO => Applying recompute to module: model.layers.1\n"
              "INFO => freezing module model.visual...\n")


def test_settings_that_took_effect_are_verified() -> None:
    problems, verified = settings_findings(RECOMPUTED, CFG)
    assert problems == []
    assert verified == ["recompute applied to 2 modules, every pattern matched", "freeze applied to 1 modules",
                        "no YAML setting ignored by the trainer"]


def test_an_unknown_settings_key_is_named_but_data_keys_and_read_extras_are_not() -> None:
    log = ("[INFO] Automatically registered YAML field: parallel.recompute_granularity (type: str, value: full)\n"
           "[INFO] Automatically registered YAML field: features.recompute (type: bool, value: True)\n"
           "[INFO] Automatically registered YAML field: data.dataset_param.data_fields.images (type: str)\n"
           "Field 'enable_preload' is not defined in DataLoaderParam. Adding as dynamic attribute.\n")
    assert ignored_keys(log, {"recompute"}) == ["parallel.recompute_granularity", "enable_preload (DataLoaderParam)"]
    problems, _ = settings_findings(log + RECOMPUTED, CFG)
    assert any("parallel.recompute_granularity" in p for p in problems)


def test_recompute_and_freeze_patterns_that_reach_nothing_fail() -> None:
    cfg = {**CFG, "features": {"recompute": True, "recompute_plan": {"apply_modules": ["model.blocks.{*}"]}},
           "model": {"freeze": ["model.vision"]}}
    problems, verified = settings_findings(RECOMPUTED, cfg)
    assert "recompute pattern 'model.blocks.{*}' reached no module in the trainer (features.recompute_plan)" in problems
    assert "the trainer recomputed model.layers.0, which no recompute pattern names" in problems
    assert "freeze pattern 'model.vision' froze no module in the trainer (model.freeze)" in problems
    assert verified == []


@pytest.mark.tier2
def test_a_key_the_checkout_does_not_know_fails_the_smoke(mm_home: Path, tiny_models, template_src: Path,
                                                         tmp_path: Path) -> None:
    dest = mm_checkout(mm_home, tmp_path)
    done = copy(dest, skip_tasks=False, template=template_src, model_id="keys", model_path=tiny_models("qwen2_5_vl"))
    assert done.returncode == 0, done.stdout[-3000:]
    assert "verified: no YAML setting ignored by the trainer" in done.stdout
    path = dest / "examples" / "keys" / "keys_config.yaml"
    config = yaml.safe_load(path.read_text())
    config["parallel"]["recompute_granularity"] = "full"  # an April-framework habit, unknown to this checkout
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(TEMPLATE_ROOT)}
    rerun = subprocess.run([sys.executable, "-m", "hooks.smoke", ".copier-answers/keys.yml"], cwd=dest, env=env,
                           capture_output=True, text=True, timeout=900, check=False)
    assert rerun.returncode != 0
    assert "smoke[framework] FAIL" in rerun.stdout and "parallel.recompute_granularity" in rerun.stdout

"""The probe on full-size configs (meta device, no weights) and on tiny real models."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hooks.model.loading import ProbeError
from hooks.model.matching import module_name_match
from hooks.probe import probe
from tests.conftest import FULL_CONFIGS

# examples/qwen3vl/qwen3vl_30B_config_v1.yaml at MindSpeed-MM 57069cd5 (the human-written plan);
# compared with the live file as well when MINDSPEED_MM_HOME is set.
HUMAN_QWEN3VL_30B = {
    "apply_modules": [
        "model.visual.blocks.{*}", "model.visual.merger", "model.visual.deepstack_merger_list.{*}", "model.visual",
        "model.language_model.embed_tokens", "model.language_model.layers.{*}", "model.language_model", "lm_head",
    ],
    "ep_modules": ["model.language_model.layers.{*}.mlp.experts"],
    "recompute_modules": ["model.visual.blocks.{*}", "model.language_model.layers.{*}"],
}


def human_plan() -> dict[str, list[str]]:
    home = os.environ.get("MINDSPEED_MM_HOME")
    if not home:
        return HUMAN_QWEN3VL_30B
    import yaml

    cfg = yaml.safe_load((Path(home) / "examples/qwen3vl/qwen3vl_30B_config_v1.yaml").read_text())
    return {
        "apply_modules": cfg["parallel"]["fsdp_plan"]["apply_modules"],
        "ep_modules": cfg["parallel"]["ep_plan"]["apply_modules"],
        "recompute_modules": cfg["features"]["recompute_plan"]["apply_modules"],
    }


@pytest.fixture(scope="module")
def qwen3vl_30b():
    return probe(FULL_CONFIGS / "Qwen3-VL-30B-A3B-Instruct", with_processor=False)


def test_qwen3vl_30b_matches_human_plan_pattern_for_pattern(qwen3vl_30b) -> None:
    plan = qwen3vl_30b.plan
    human = human_plan()
    assert plan.apply_modules == human["apply_modules"]
    assert plan.ep_modules == human["ep_modules"]
    assert plan.recompute_modules == human["recompute_modules"]
    assert plan.problems == []
    assert qwen3vl_30b.num_parameters > 30_000_000_000


def test_qwen2_5_vl_7b_covers_the_human_patterns_that_exist_in_it() -> None:
    from transformers import AutoConfig

    from hooks.model.build import build_meta_model
    from hooks.model.facts import module_table
    from hooks.model.loading import resolve_model_class

    model_dir = FULL_CONFIGS / "Qwen2.5-VL-7B-Instruct"
    facts = probe(model_dir, with_processor=False)
    config = AutoConfig.from_pretrained(model_dir)
    cls = resolve_model_class(config, model_dir, trust_remote_code=False)
    names = [m.name for m in module_table(build_meta_model(cls, config)).modules]
    relevant = [p for p in human_plan()["apply_modules"] if any(module_name_match(p, n) for n in names)]
    assert set(relevant) <= set(facts.plan.apply_modules)
    assert all(rep.matched >= 1 for rep in facts.plan.reports)
    from hooks.data.candidates import recommend

    choice = recommend(facts, None)
    assert facts.plan.problems == [] and (choice.branch, choice.template) == ("a", "qwen2vl")


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"])
def test_plan_patterns_match_the_real_model(arch: str, tiny_models) -> None:
    """Built for real (not meta): every fsdp/recompute/ep pattern matches at least one module."""
    from transformers import AutoModelForImageTextToText

    facts = probe(tiny_models(arch))
    names = [n for n, _ in AutoModelForImageTextToText.from_pretrained(tiny_models(arch)).named_modules()]
    plan = facts.plan
    for pattern in plan.apply_modules + plan.recompute_modules + plan.ep_modules:
        assert any(module_name_match(pattern, n) for n in names), pattern
    assert facts.returns_loss and facts.processor.class_name.endswith("Processor")
    assert "pixel_values" in facts.processor.output_keys


def test_probe_json_is_deterministic(tiny_models) -> None:
    one = probe(tiny_models("qwen2_5_vl")).to_json(with_timings=False)
    two = probe(tiny_models("qwen2_5_vl")).to_json(with_timings=False)
    assert one == two and json.loads(one)["architecture"] == "Qwen2_5_VLForConditionalGeneration"


def test_bad_model_dirs(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="model_path: .* is not a directory"):
        probe(tmp_path / "missing")
    with pytest.raises(ProbeError, match="model_path: .* has no config.json"):
        probe(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "x", "auto_map": {"AutoConfig": "a.B"}}))
    with pytest.raises(ProbeError, match="trust_remote_code"):
        probe(tmp_path)


def test_cli_output_survives_the_fast_exit(tiny_models, tmp_path: Path) -> None:
    """``python -m hooks.probe`` leaves through ``exit_now`` (no interpreter teardown): everything it
    printed still reaches the pipe, and its exit code is the CLI's."""
    import subprocess
    import sys

    from hooks import env_with_hooks

    model = tiny_models("qwen2_5_vl")
    done = subprocess.run([sys.executable, "-m", "hooks.probe", str(model), "--json", "--no-timings"],
                          capture_output=True, text=True, env=env_with_hooks(), check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == json.loads(probe(model).to_json(with_timings=False))
    bad = subprocess.run([sys.executable, "-m", "hooks.probe", str(tmp_path)], capture_output=True, text=True,
                         env=env_with_hooks(), check=False)
    assert bad.returncode == 2 and "model_path:" in bad.stderr and "has no config.json" in bad.stderr

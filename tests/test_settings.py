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

from hooks.smoke.settings import ignored_keys, load_error, settings_findings
from tests.copier_run import TEMPLATE_ROOT, copy, mm_checkout

CFG = {"features": {"recompute": True, "recompute_plan": {"apply_modules": ["model.layers.{*}"]}},
       "model": {"freeze": ["model.visual"]}}
RECOMPUTED = ("INFO => Applying recompute to module: model.layers.0\n"
              "INFO => Applying recompute to module: model.layers.1\n"
              "INFO => freezing module model.visual...\n")


def naming(lines: list[str], *facts: str) -> str:
    """The one line of ``lines`` that names every one of ``facts`` (a key, a pattern, a count, the fix's target).

    The findings are sentences for a person; what the smoke's verdict rests on is which finding there is and what
    it names, so that is what is checked, not the sentence around it."""
    found = [line for line in lines if all(fact in line for fact in facts)]
    assert len(found) == 1, (facts, lines)
    return found[0]


def test_settings_that_took_effect_are_verified() -> None:
    problems, verified = settings_findings(RECOMPUTED, CFG)
    assert problems == []
    assert len(verified) == 3, verified  # recompute, freeze, and no key ignored
    naming(verified, "recompute", "2 modules", "features.recompute_plan.apply_modules")
    naming(verified, "freeze", "1 modules")
    naming(verified, "ignored")


APRIL_PARAMS = '''
class RecomputePlanConfig:
    apply_modules: List[str] = field(default_factory=list)

class ParallelArguments:
    recompute: bool = False
    recompute_plan: RecomputePlanConfig = field(default_factory=RecomputePlanConfig)

class Arguments:
    parallel: ParallelArguments = field(default_factory=ParallelArguments)
'''


def test_recompute_is_checked_where_the_checkout_reads_it(tmp_path: Path) -> None:
    """Before the features section (2026-04-27) recompute lived under parallel; after it, parallel's is ignored."""
    (tmp_path / "mindspeed_mm" / "fsdp" / "params").mkdir(parents=True)
    (tmp_path / "mindspeed_mm" / "fsdp" / "params" / "argument.py").write_text(APRIL_PARAMS)
    april = {"parallel": CFG["features"], "model": CFG["model"]}
    problems, verified = settings_findings(RECOMPUTED, april, tmp_path)
    assert problems == []
    naming(verified, "recompute", "2 modules", "parallel.recompute_plan.apply_modules")
    assert not any("features." in line for line in verified)
    problems, _ = settings_findings(RECOMPUTED, CFG, tmp_path)
    assert len(problems) == 1, problems
    naming(problems, "features.recompute_plan", "under parallel:")  # the key, and where this checkout reads it
    problems, _ = settings_findings(RECOMPUTED, {**CFG, **april})  # no checkout: the pinned framework's place
    assert any("parallel.recompute" in p and "move them under features:" in p for p in problems)


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
    assert len(problems) == 4, problems  # the pattern, the two modules it leaves unnamed, the freeze pattern
    naming(problems, "features.recompute_plan.apply_modules", "'model.blocks.{*}'", "no module")
    for stray in ("model.layers.0", "model.layers.1"):  # applied by the trainer, named by no pattern
        naming(problems, "features.recompute_plan.apply_modules", stray)
    naming(problems, "model.freeze", "'model.vision'", "no module")
    assert verified == []


@pytest.mark.tier2
def test_a_key_the_checkout_does_not_know_fails_the_smoke(mm_home: Path, tiny_models, template_src: Path,
                                                         tmp_path: Path) -> None:
    dest = mm_checkout(mm_home, tmp_path)
    done = copy(dest, template=template_src, model_id="keys", model_path=tiny_models("qwen2_5_vl"))  # no smoke yet:
    assert done.returncode == 0, done.stdout[-3000:]  # test_framework_versions checks the clean run's verified line
    config = _config(dest, "keys")
    config["parallel"]["recompute_granularity"] = "full"  # an April-framework habit, unknown to this checkout
    rerun = _smoke_again(dest, "keys", config)
    assert rerun.returncode != 0
    assert "smoke[framework] FAIL" in rerun.stdout and "parallel.recompute_granularity" in rerun.stdout


@pytest.mark.tier2
def test_expert_parallel_two_applies_and_shards_as_planned(mm_home: Path, tiny_models, template_src: Path,
                                                            tmp_path: Path) -> None:
    """EP 2 on the smoke's two ranks: the trainer's EP apply lines name every planned expert module, and each
    rank's shards (experts split over EP, the rest over FSDP, two optimizers) equal the plan's arithmetic."""
    dest = mm_checkout(mm_home, tmp_path)
    done = copy(dest, template=template_src, model_id="moe_ep", model_path=tiny_models("qwen3_vl_moe"))
    assert done.returncode == 0, done.stdout[-3000:]
    config = _config(dest, "moe_ep")
    config["parallel"]["expert_parallel_size"] = 2
    rerun = _smoke_again(dest, "moe_ep", config)
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    for line in ("smoke[framework] PASS", "verified: expert parallel applied to 2 modules",
                 "verified: shard sizes equal the memory plan's arithmetic to the byte"):
        assert line in rerun.stdout, rerun.stdout[-3000:]


def _config(dest: Path, model_id: str) -> dict:
    return yaml.safe_load((dest / "examples" / model_id / f"{model_id}_config.yaml").read_text())


def _smoke_again(dest: Path, model_id: str, config: dict) -> subprocess.CompletedProcess[str]:
    """Write the edited YAML back and re-run the model's smoke as a user would."""
    (dest / "examples" / model_id / f"{model_id}_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(TEMPLATE_ROOT)}
    return subprocess.run([sys.executable, "-m", "hooks.smoke", f".copier-answers/{model_id}.yml"], cwd=dest,
                          env=env, capture_output=True, text=True, timeout=900, check=False)


def _perturbed_copy(model: Path, dest: Path) -> Path:
    """Another tiny model's folder: the same architecture and names, other weights."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(model, dest)
    for path in dest.glob("*.safetensors"):
        save_file({k: v + 0.01 for k, v in load_file(str(path)).items()}, str(path), metadata={"format": "pt"})
    return dest


@pytest.mark.tier2
def test_the_smoke_proves_units_weights_and_shards_and_fails_on_another_models_weights(
        mm_home: Path, tiny_models, template_src: Path, tmp_path: Path) -> None:
    """Issue 13: meta init + HF load, the weights checked against the files before step 1, each rank's shards
    against the memory plan's arithmetic; training.load pointed at another model's folder fails naming it."""
    dest = mm_checkout(mm_home, tmp_path)
    model = tiny_models("qwen2_5_vl")
    done = copy(dest, skip_tasks=False, template=template_src, model_id="wts", model_path=model,
                weights_loading="meta_load")
    assert done.returncode == 0, done.stdout[-3000:]
    for line in ("verified: FSDP2 applied to", "verified: weights: 4 tensors equal the model folder's files",
                 "loaded through training.load", "verified: shard sizes equal the memory plan's arithmetic"):
        assert line in done.stdout, done.stdout[-3000:]
    migration = (dest / "examples" / "wts" / "REPORT.md").read_text()
    assert "weights: 4 tensors equal the model folder's files" in migration
    config = _config(dest, "wts")
    training = config["training"]
    assert training["init_model_with_meta_device"] is True and training["load_format"] == "hf"
    assert training["load_strict"] is True
    config["training"]["load"] = str(_perturbed_copy(model, tmp_path / "other_vl"))
    rerun = _smoke_again(dest, "wts", config)
    assert rerun.returncode != 0
    assert "smoke[framework] FAIL" in rerun.stdout and "the trained weights are not the model's" in rerun.stdout
    assert "training.load" in rerun.stdout
    config["training"]["load"] = str(tiny_models("qwen2_vl"))  # another family: keys do not match, load_strict stops
    rerun = _smoke_again(dest, "wts", config)
    assert rerun.returncode != 0 and "load_strict" in rerun.stdout
    assert f"the trainer loads the weights through training.load ({tiny_models('qwen2_vl')})" in rerun.stdout


def test_a_strict_load_failure_names_training_load() -> None:
    cfg = {"training": {"init_model_with_meta_device": True, "load": "/m/other"}}
    error = "RuntimeError: 12 parameter key(s) absent from the HF checkpoint (load_strict=True): ['a.weight']"
    message = load_error(error, cfg, Path("/m/own"))
    assert message.startswith(error)  # the trainer's own error, then where the weights came from and the fix
    assert "training.load (/m/other)" in message.removeprefix(error) and "/m/own" in message.removeprefix(error)
    assert load_error("RuntimeError: out of memory", cfg, Path("/m/own")) == "RuntimeError: out of memory"
    assert load_error(error, {"training": {"load": "/m/other"}}, Path("/m/own")) == error  # from_pretrained


def test_units_and_expert_parallel_are_read_off_the_trainers_apply_lines() -> None:
    from hooks.smoke.settings import unit_findings

    cfg = {"parallel": {"fsdp_plan": {"apply_modules": ["model.layers.{*}", "lm_head"]}, "expert_parallel_size": 1,
                        "ep_plan": {"apply_modules": ["model.layers.{*}.mlp.experts"]}}}
    log = ("DEBUG [x] => [FSDP2]: Apply fsdp2 to module <model.layers.0>\n"
           "DEBUG [x] => [FSDP2]: Apply fsdp2 to module <model.layers.1>\n")
    problems, verified = unit_findings(log, cfg)
    assert len(problems) == 1 and "FSDP2" not in " ".join(verified), (problems, verified)
    naming(problems, "parallel.fsdp_plan.apply_modules", "'lm_head'", "no module")
    assert len(verified) == 1
    naming(verified, "expert parallel", "inactive", "expert_parallel_size 1")
    problems, verified = unit_findings(log + "DEBUG [x] => [FSDP2]: Apply fsdp2 to module <lm_head>\n", cfg)
    assert problems == []
    naming(verified, "FSDP2", "3 modules", "parallel.fsdp_plan.apply_modules")


def test_weights_that_are_not_the_models_fail_naming_where_they_came_from() -> None:
    from hooks.smoke.settings import weight_findings

    cfg = {"training": {"init_model_with_meta_device": True, "load": "/elsewhere"}}
    bad = {0: {"weights": {"folder": "/tiny", "checked": [], "mismatch": ["lm_head.weight"], "error": ""}}}
    problems, _ = weight_findings(bad, cfg)
    assert problems and "lm_head.weight differ from the files in /tiny" in problems[0]
    assert "training.load (/elsewhere)" in problems[0]
    good = {0: {"weights": {"folder": "/tiny", "checked": ["a", "b"], "mismatch": [], "error": ""}}}
    assert weight_findings(good, {"model": {"model_name_or_path": "/tiny"}})[1] == [
        "weights: 2 tensors equal the model folder's files (a, b), loaded through model.model_name_or_path"]


@pytest.mark.tier2
def test_tied_embeddings_survive_meta_init_and_load(mm_home: Path, tiny_models, template_src: Path,
                                                    tmp_path: Path) -> None:
    """Gemma 3 ties lm_head to embed_tokens: after meta init, fully_shard and the strict HF load they still share one
    weight, and the weights equal the files (issue 13)."""
    dest = mm_checkout(mm_home, tmp_path)
    done = copy(dest, skip_tasks=False, template=template_src, model_id="tied", model_path=tiny_models("gemma3"),
                weights_loading="meta_load")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "loaded through training.load; tied embeddings still shared" in done.stdout, done.stdout[-3000:]


def test_the_loss_type_is_checked_where_and_as_the_checkout_reads_it(tmp_path: Path) -> None:
    from hooks.smoke.settings import loss_findings

    (tmp_path / "mindspeed_mm" / "fsdp" / "params").mkdir(parents=True)
    (tmp_path / "mindspeed_mm" / "fsdp" / "params" / "argument.py").write_text(APRIL_PARAMS)
    (tmp_path / "mindspeed_mm" / "fsdp" / "loss").mkdir(parents=True)
    (tmp_path / "mindspeed_mm" / "fsdp" / "loss" / "loss_func.py").write_text(
        'def build(loss_type):\n    if loss_type == "default":\n        pass\n    elif loss_type == "token_loss":\n'
        '        pass\n')
    problems, verified = loss_findings({"model": {"loss_cfg": {"loss_type": "default"}}}, tmp_path)
    assert problems == [] and len(verified) == 1
    naming(verified, "'default'", "model.loss_cfg", "default", "token_loss")  # the type, where, what the trainer has
    problems, verified = loss_findings({"features": {"loss_cfg": {"loss_type": "default"}}}, tmp_path)
    assert len(problems) == 1 and verified == [], (problems, verified)
    naming(problems, "features.loss_cfg", "under model:")
    problems, verified = loss_findings({"model": {"loss_cfg": {"loss_type": "focal"}}}, tmp_path)
    assert len(problems) == 1 and verified == [], (problems, verified)
    naming(problems, "model.loss_cfg.loss_type", "'focal'", "'default'", "'token_loss'")

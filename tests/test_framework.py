"""Tier 2: copy into a real MindSpeed-MM work tree and train through the real trainer.

Needs ``MINDSPEED_MM_HOME`` (a MindSpeed-MM work tree, commit 57069cd5 or later) and
MindSpeed core in ``MINDSPEED_HOME`` (or installed / copied into the tree). The
checkout is copied to a temporary git repo first, so the user's tree is untouched.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from hooks.scaffold import StPaths
from tests.copier_run import changed_paths as _changed
from tests.copier_run import copy, mm_checkout
from tests.st_tools import comparator, injected, run_script, st_tools

pytestmark = pytest.mark.tier2

# Every transformers-native family with a chat template, copied with the defaults: the data branch
# is the evidence's (data parity over a whole batch at copy time), a (in-repo template) or b (the
# template derived from the model's own). CI runs a representative subset (dense Qwen and MoE with
# their in-repo templates; GLM-4.1V, whose in-repo template is not its format; Gemma 3's system turn
# and token types); --full-matrix runs all (LLaVA's whole-text tokenization, Idefics3's tiles and text
# lead among them). Emu3 (its processor puts a BOS per image at the sample's start) and the families
# without a chat template (PaliGemma, GOT-OCR2, Chameleon) get branch c.
FULL = pytest.mark.full_matrix
BRANCH_A = {"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"}
CI_SUBSET = {"qwen2_5_vl", "qwen3_vl_moe", "glm4v", "gemma3"}
FAMILIES = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe", "llava", "llava_next",
            "llava_next_video", "pixtral", "mistral3", "llava_onevision", "aya_vision", "cohere2_vision", "aria",
            "lfm2_vl", "perception_lm", "internvl", "gemma3", "gemma3n", "idefics2", "idefics3", "smolvlm", "mllama",
            "janus", "deepseek_vl", "deepseek_vl_hybrid", "ovis2", "llama4"]
CASES = [arch if arch in CI_SUBSET else pytest.param(arch, marks=FULL) for arch in FAMILIES]


@pytest.fixture(scope="module")
def checkout(mm_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mm_checkout(mm_home, tmp_path_factory.mktemp("mm"))


@pytest.mark.parametrize("arch", CASES)
def test_copy_with_defaults_matches_and_trains(arch: str, checkout: Path, tiny_models, template_src: Path) -> None:
    model_id = f"{arch}_hf"
    before = _changed(checkout)
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch))
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    branch = "a" if arch in BRANCH_A else "b"
    assert f"data branch {branch}" in done.stdout.splitlines()[0] or f", data branch {branch}" in done.stdout
    assert "data parity: MATCH" in done.stdout, done.stdout[-3000:]
    summary = re.search(r"smoke\[framework\] PASS: (\d+)/(\d+) iterations", done.stdout)
    assert summary and int(summary.group(1)) >= 5, done.stdout[-2000:]
    assert "verified: loss equivalence: step-1 loss" in done.stdout, done.stdout[-3000:]  # the model's own objective
    assert "verified: image reached forward (" in done.stdout, done.stdout[-3000:]  # hooks.smoke.media_proof
    if arch == "gemma3":  # issue 40: its projection is zeros, as from_config leaves it: a note, never a failure
        assert re.search(r"verified: image reached forward \([^)]*\) and model\.multi_modal_projector got a gradient "
                         r"\(norm [^)]+\) at step 1, model\.vision_tower none: note: model\.multi_modal_projector's "
                         r"weights are all zero", done.stdout), done.stdout[-3000:]
    # issue 35: the activation estimate within 15 % for every layer kind on every rank (else a WARNING names it)
    activations = [line for line in done.stdout.splitlines() if "activations saved for backward" in line]
    assert len(activations) >= 2 and not any("WARNING" in line for line in activations), activations
    new = _changed(checkout) - before
    allowed = (f"mindspeed_mm/fsdp/models/{model_id}/", f"examples/{model_id}/", f".copier-answers/{model_id}.yml",
               *map(str, StPaths(model_id).triple()), str(StPaths(model_id).provenance))
    assert new and all(path.startswith(allowed) for path in new), new
    assert {str(p) for p in StPaths(model_id).triple()} <= new  # issue 35: the system test, recorded by the smoke
    report = (checkout / "examples" / model_id / "REPORT.md").read_text()  # the report stage's, written whole
    assert "**PASS**" in report and "framework smoke" in report and "**match**" in report
    answers = yaml.safe_load((checkout / ".copier-answers" / f"{model_id}.yml").read_text())
    assert answers["data_evidence"]["candidates"], "the copy-time evidence ran"


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "gemma3"])  # branch a, branch b (branch c: test_branch_c_framework)
def test_the_system_test_passes_the_frameworks_comparator_and_catches_a_loss_change(
        arch: str, checkout: Path, tiny_models, template_src: Path, tmp_path: Path) -> None:
    """Issue 35: the generated shell script trains the recorded run config again through the real trainer, and
    MindSpeed-MM's own test_ci_st.py passes it against the baseline the copy's smoke recorded; with another loss
    reduction in the framework copy the same comparator fails (the copy is test_copy_with_defaults_...'s)."""
    tools = st_tools()
    model_id = f"{arch}_hf"
    if not (checkout / ".copier-answers" / f"{model_id}.yml").is_file():  # run alone: make the copy here
        done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch))
        assert done.returncode == 0, done.stdout[-3000:]
    _run_config_is_the_smokes(checkout, model_id)
    ran = run_script(checkout, model_id, tmp_path / "pass.log")
    assert ran.returncode == 0 and "Elapsed Time Per iteration (ms)" in ran.stdout, ran.stdout[-3000:]
    passed = comparator(tools, checkout, model_id, tmp_path / "pass.log", only_loss=True)
    assert passed.returncode == 0 and "1 passed" in passed.stdout, passed.stdout[-3000:]
    print(passed.stdout[-1500:])
    if arch != "qwen2_5_vl":
        return
    with injected(checkout):
        run_script(checkout, model_id, tmp_path / "fail.log")
    failed = comparator(tools, checkout, model_id, tmp_path / "fail.log", only_loss=True)
    print(failed.stdout[-2500:])
    assert failed.returncode == 1 and "AssertionError: The loss at step 0 should be approximate to" in failed.stdout


def _run_config_is_the_smokes(checkout: Path, model_id: str) -> None:
    """The recorded run config is, byte for byte below its comment header, what the smoke's pure derivation gives
    again for the same inputs (a second render differs only in the recorded baseline)."""
    from hooks import load_answers
    from hooks.framework.checkout import schema
    from hooks.smoke.run import prepare_inputs
    from hooks.smoke.smoke_config import smoke_yaml

    answers = load_answers(checkout / ".copier-answers" / f"{model_id}.yml")
    inputs = prepare_inputs(answers, model_id)
    generated = yaml.safe_load((checkout / "examples" / model_id / f"{model_id}_config.yaml").read_text())
    again = smoke_yaml(generated, model_dir=inputs.model_dir.resolve(), data_json=inputs.data_json.resolve(),
                       media_root=inputs.media_root.resolve(), work_dir=inputs.work_dir.resolve(), device="cpu",
                       nproc=2, sdpa=(answers["model_facts"].get("attention") or {}).get("sdpa", True),
                       places=schema(checkout))
    recorded = (checkout / StPaths(model_id).run_config).read_text()
    body = "".join(line for line in recorded.splitlines(keepends=True) if not line.startswith("# "))
    assert body == yaml.safe_dump(again, sort_keys=False, allow_unicode=True)
    cfg = yaml.safe_load(body)
    assert cfg["training"]["train_iters"] == 5 and cfg["training"]["seed"] == 42
    assert cfg["data"]["dataloader_param"]["shuffle"] is False


def test_branch_b_from_a_template_on_the_tokenizer_only(checkout: Path, tiny_models, template_src: Path,
                                                        tmp_path: Path) -> None:
    """Releases that keep the chat template in tokenizer_config.json (issue 21, deliverable 4): branch b derives
    its template from the tokenizer's, parity checks it against that template and the processor, and it trains."""
    from tests.samples import template_on_tokenizer

    folder = template_on_tokenizer(tiny_models("qwen2_5_vl"), tmp_path / "qwen2_5_vl_tokenizer_template")
    model_id = "tok_template_b"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=folder,
                data_branch="b")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "data parity: MATCH" in done.stdout and "smoke[framework] PASS" in done.stdout, done.stdout[-3000:]
    assert "verified: loss equivalence: step-1 loss" in done.stdout
    template = checkout / "mindspeed_mm/fsdp/models" / model_id
    assert "<|im_start|>user" in "".join(p.read_text() for p in template.glob("*.py"))


CONFIG_LOADER = textwrap.dedent("""
    import sys
    from mindspeed_mm.config.config_manager import ConfigManager
    from mindspeed_mm.fsdp.params.argument import Arguments
    args = ConfigManager(config_class=Arguments).load_and_parse()
    print("APPLY", list(args.parallel.fsdp_plan.apply_modules))
    print("MODEL", args.model.model_id, list(args.training.plugin))
""")


def test_generated_yaml_loads_with_mindspeed_config_loader(checkout: Path, tiny_models, template_src: Path) -> None:
    from hooks.framework.environment import framework_env

    model_id = "yaml_check"
    done = copy(checkout, template=template_src, model_id=model_id, model_path=tiny_models("qwen2_5_vl"))
    assert done.returncode == 0, done.stderr
    config = checkout / "examples" / model_id / f"{model_id}_config.yaml"
    env = framework_env(checkout, Path(os.environ["MINDSPEED_HOME"]) if os.environ.get("MINDSPEED_HOME") else None,
                        cpu_bridges=True)
    env.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="1")
    loaded = subprocess.run([sys.executable, "-c", CONFIG_LOADER, str(config)], capture_output=True, text=True,
                            cwd=checkout, env=env, check=False)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    expected = yaml.safe_load(config.read_text())["parallel"]["fsdp_plan"]["apply_modules"]
    assert f"APPLY {expected}" in loaded.stdout
    assert f"MODEL {model_id}" in loaded.stdout


@pytest.mark.full_matrix  # CI: test_full_size_copy.py copies the same 7B config and smokes it shrunk
def test_full_size_config_trains_shrunk_through_real_trainer(checkout: Path, tiny_models, template_src: Path,
                                                             tmp_path: Path) -> None:
    """A 7B config without readable weights: probed at full size, shrunk, trained by the real trainer."""
    from tests.samples import full_model_dir

    model = full_model_dir("Qwen2.5-VL-7B-Instruct", tiny_models("qwen2_5_vl"), tmp_path / "qwen2_5_vl_7b")
    done = copy(checkout, skip_tasks=False, template=template_src, model_id="qwen2_5_vl_7b", model_path=model)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert re.search(r"smoke\[framework\] PASS: 5/5", done.stdout), done.stdout[-2000:]
    report = (checkout / "examples/qwen2_5_vl_7b/REPORT.md").read_text()
    assert "shrunk copy of" in report

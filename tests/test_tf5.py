"""transformers 5 in the training interpreter (issue 22): copier and pytest stay here, while the probe,
shrink, chat-format derivation, parity, smoke, observer and tiny builders run in the interpreter named
by ``MSMM_TF5_PYTHON`` (``make test-tf5`` builds ``.venv-tf5`` with transformers 5.2.0, as
MindSpeed-MM's newest examples install). Tiny models are built *in* that interpreter, Qwen3.5 and
Qwen3.5-MoE among them (model types only transformers >= 5 knows); full-size published configs are
probed on the meta device with full-size parameter counts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from hooks import env_with_hooks
from tests.conftest import FULL_CONFIGS
from tests.copier_run import copy, mm_checkout

pytestmark = pytest.mark.tf5

FULL_CONFIGS_TF5 = FULL_CONFIGS.parent / "full_configs_tf5"
# Parameter counts of the published configs on the meta device (transformers 5.2.0); Qwen3-VL-235B equals
# what transformers 4.57.1 builds (tests/test_full_probe.py), so the two versions agree on a shared family.
FULL_SIZE = {FULL_CONFIGS_TF5 / "Qwen3.6-27B": 27_356_728_560,
             FULL_CONFIGS / "Qwen3-VL-235B-A22B-Instruct": 235_670_022_896}


@pytest.fixture(scope="module")
def tf5() -> str:
    return os.environ["MSMM_TF5_PYTHON"]


@pytest.fixture(scope="module")
def tiny5(tf5: str, tmp_path_factory: pytest.TempPathFactory):
    """``tiny5(arch) -> Path``: a tiny model folder built by ``python -m hooks.tiny`` in the transformers-5 one."""
    root = tmp_path_factory.mktemp("tiny-tf5")

    def build(arch: str) -> Path:
        dest = root / arch
        done = subprocess.run([tf5, "-m", "hooks.tiny", arch, str(dest)], capture_output=True, text=True,
                              env=env_with_hooks(), check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return dest

    return build


def test_the_interpreter_has_transformers_5(tf5: str) -> None:
    version = subprocess.run([tf5, "-c", "import transformers; print(transformers.__version__)"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert version.startswith("5."), version


@pytest.mark.parametrize("folder", sorted(FULL_SIZE), ids=lambda p: p.name)
def test_full_size_configs_probe_on_the_meta_device(folder: Path, tf5: str) -> None:
    done = subprocess.run([tf5, "-m", "hooks.probe", str(folder), "--no-processor", "--json"],
                          capture_output=True, text=True, env=env_with_hooks(), check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    facts = json.loads(done.stdout)
    assert facts["num_parameters"] == FULL_SIZE[folder]
    assert not facts["build"], facts["build"]  # built on the meta device, nothing fell back
    assert facts["no_split_modules"] and "model.language_model.layers.{*}" in facts["plan"]["apply_modules"]


@pytest.fixture(scope="module")
def checkout(mm_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mm_checkout(mm_home, tmp_path_factory.mktemp("mm-tf5"))


# (arch, data branch the evidence must pick, its in-repo template or "")
COPIES = [("qwen2_5_vl", "a", "qwen2vl"), ("gemma3", "c", ""), ("qwen3_5", "a", "qwen3_vl_nothink"),
          ("qwen3_5_moe", "a", "qwen3_vl_nothink")]


@pytest.mark.tier2
@pytest.mark.parametrize(("arch", "branch", "template"), COPIES, ids=[c[0] for c in COPIES])
def test_copy_with_defaults_matches_and_trains(arch: str, branch: str, template: str, checkout: Path, tiny5,
                                                template_src: Path, tf5: str) -> None:
    """Defaults only: the evidence picks the branch, parity MATCH, the real trainer PASSes.

    Gemma 3 lands on branch c under transformers 5: MindSpeed-MM's template path calls
    ``tokenizer.add_special_tokens(..., replace_additional_special_tokens=False)`` (fsdp/data/data_utils/
    func_utils/template.py), which transformers 5 no longer takes, so branch b *could not be evaluated*
    and says so; the dataset plugin on the model's own processor matches.
    """
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=f"{arch}_tf5", model_path=tiny5(arch),
                python=tf5)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    answers = (checkout / ".copier-answers" / f"{arch}_tf5.yml").read_text()
    assert re.search(rf"^data_branch: {branch}$", answers, re.M), answers
    assert "data parity: MATCH" in done.stdout and (not template or f"'{template}'" in done.stdout)
    summary = re.search(r"smoke\[framework\] PASS: (\d+)/(\d+) iterations", done.stdout)
    assert summary and int(summary.group(1)) >= 5, done.stdout[-2000:]
    script = (checkout / "tests/st/shell_scripts" / f"finetune_{arch}_tf5.sh").read_text()
    assert "pip install transformers==5.2.0 -q" in script  # the release the baseline was recorded with
    if arch == "gemma3":
        said = done.stdout + answers
        assert "could not evaluate" in said and "replace_additional_special_tokens" in said

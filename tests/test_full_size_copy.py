"""Migrating a full-size model without its weights: probe at full size, smoke on a shrunk copy.

The model folder holds the published Qwen2.5-VL-7B config, the tiny tokenizer/processor and weight
files that cannot be read. copier's post-generation task must shrink it (it is far above the
smoke's size limit) and the smoke must train the shrunk copy; nothing may read the weights.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.copier_run import copy, git_init
from tests.samples import full_model_dir


@pytest.fixture(scope="module")
def model_7b(tiny_models, tmp_path_factory) -> Path:
    return full_model_dir("Qwen2.5-VL-7B-Instruct", tiny_models("qwen2_5_vl"), tmp_path_factory.mktemp("7b") / "m")


def test_copy_of_7b_config_smokes_a_shrunk_copy(model_7b: Path, tmp_path: Path, template_src: Path) -> None:
    dest = git_init(tmp_path / "not-a-checkout")
    done = copy(dest, skip_tasks=False, template=template_src, model_id="qwen2_5_vl_7b", model_path=model_7b)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"smoke\[contract\] PASS: 5/5", done.stdout), done.stdout[-2000:]
    answers = yaml.safe_load((dest / ".copier-answers/qwen2_5_vl_7b.yml").read_text())
    assert answers["model_facts"]["num_parameters"] > 8_000_000_000
    report = (dest / "examples/qwen2_5_vl_7b/REPORT.md").read_text()
    assert "shrunk copy of" in report and "**PASS**" in report

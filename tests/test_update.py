"""`copier update` brings a generated model to a newer template; several models update independently."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.copier_run import commit_all, copier, copy, git_init, snapshot, template_snapshot


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def test_update_to_new_template_version_per_model(tiny_models, tmp_path: Path) -> None:
    template = template_snapshot(tmp_path / "template")
    _git(template, "tag", "0.1.0")
    model = tmp_path / "model"
    shutil.copytree(tiny_models("qwen2_5_vl"), model)
    dest = git_init(tmp_path / "checkout")
    for model_id in ("first_vl", "second_vl"):
        done = copy(dest, model_id=model_id, model_path=model, template=template)
        assert done.returncode == 0, done.stderr
    commit_all(dest)
    before = snapshot(dest)

    # The framework changed: the new template version exports one more variable in launch scripts.
    script = template / "partials" / "finetune.sh.jinja"
    script.write_text(script.read_text().replace("export NON_MEGATRON=true\n",
                                                 "export NON_MEGATRON=true\nexport MSMM_TEMPLATE_V2=1\n"))
    commit_all(template)
    _git(template, "tag", "0.2.0")
    shutil.rmtree(model)  # derived values are frozen: the model folder is not needed any more

    done = copier("update", "--trust", "--defaults", "--skip-tasks", "--quiet", "-a", ".copier-answers/first_vl.yml",
                  cwd=dest)
    assert done.returncode == 0, done.stderr
    after = snapshot(dest)
    changed = {path for path in after if after[path] != before.get(path)}
    assert changed == {"examples/first_vl/finetune_first_vl.sh", ".copier-answers/first_vl.yml"}
    assert b"export MSMM_TEMPLATE_V2=1" in after["examples/first_vl/finetune_first_vl.sh"]
    assert yaml.safe_load(after[".copier-answers/first_vl.yml"])["_commit"] == "0.2.0"
    assert yaml.safe_load(after[".copier-answers/second_vl.yml"])["_commit"] == "0.1.0"

"""``python -m hooks.update`` carries migrated models across a framework upgrade (issue 12, deliverables 4-5).

Two models migrated on an older vendored MindSpeed-MM (one with hand edits: ``lr``, a freeze list, an
extra plugin method), the framework files replaced by 57069cd5's, then the one update command: both
re-rendered for the new framework (``features:``, ``collator_id``, HF load, the hook's new arity), every hand
edit kept, check and smoke pass; ``--review`` printed exactly the diff the update then made (the smoke
afterwards rewrites REPORT.md, which no review can foresee: the test compares with
``--no-smoke``, commits, and runs the update again for the check and the smokes). An edit that
overlaps what the update changes ends non-zero naming the file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.copier_run import TEMPLATE_ROOT, commit_all, copy, git_init, template_snapshot
from tests.test_framework_versions import _older

MODELS = {"first_vl": "qwen2_5_vl", "moe_vl": "qwen3_vl_moe"}
GENERATED = ("mindspeed_mm/fsdp/models/first_vl", "mindspeed_mm/fsdp/models/moe_vl", "examples/first_vl",
             "examples/moe_vl")


def _run(dest: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(TEMPLATE_ROOT)}
    return subprocess.run([sys.executable, "-m", "hooks.update", str(dest), *args], cwd=dest, env=env,
                          capture_output=True, text=True, timeout=1200, check=False)


def _git_out(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _upgrade(dest: Path, new: Path) -> None:
    """Replace the framework's files by ``new``'s, keeping the migrated models' own folders."""
    keep = dest.parent / "keep"
    for path in GENERATED:
        shutil.copytree(dest / path, keep / path)
    for top in ("mindspeed_mm", "examples"):
        shutil.rmtree(dest / top)
        shutil.copytree(new / top, dest / top, ignore=shutil.ignore_patterns("__pycache__"))
    for path in GENERATED:
        shutil.copytree(keep / path, dest / path, dirs_exist_ok=True)
    commit_all(dest)


def _migrated(old: Path, tmp_path: Path, tiny_models) -> Path:
    template = template_snapshot(tmp_path / "template")
    subprocess.run(["git", "-C", str(template), "tag", "0.2.0"], check=True)
    dest = tmp_path / "MindSpeed-MM"
    shutil.copytree(old, dest, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    git_init(dest)
    commit_all(dest)
    for model_id, arch in MODELS.items():
        done = copy(dest, template=template, model_id=model_id, model_path=tiny_models(arch))
        assert done.returncode == 0, done.stderr[-2000:]
    commit_all(dest)
    return dest


@pytest.mark.tier2
@pytest.mark.parametrize("revision", ["d0610012", pytest.param("a650ff81", marks=pytest.mark.full_matrix)])
def test_update_all_carries_hand_edits_across_a_framework_upgrade(revision: str, mm_home: Path, tiny_models,
                                                                  tmp_path: Path) -> None:
    dest = _migrated(_older(revision), tmp_path, tiny_models)
    config = dest / "examples" / "first_vl" / "first_vl_config.yaml"
    text = config.read_text()
    text = text.replace("  lr: 1.0e-5\n", "  lr: 2.0e-5\n")
    text = text.replace("  freeze: []  #", '  freeze: ["model.visual"]  #')
    config.write_text(text)
    plugin = dest / "mindspeed_mm" / "fsdp" / "models" / "first_vl" / "modeling_first_vl.py"
    plugin.write_text(plugin.read_text() + '\n    def extra_method(self):\n        return "mine"\n')
    commit_all(dest)
    _upgrade(dest, mm_home)

    review = _run(dest, "--review", "--no-smoke")  # the diff (a review's smokes: the baseline test below)
    assert review.returncode == 0, review.stderr[-3000:]
    assert _git_out(dest, "status", "--porcelain") == ""  # review touched nothing
    done = _run(dest, "--no-smoke")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert review.stdout == _git_out(dest, "diff", "--binary")  # --review showed exactly what the update did
    commit_all(dest)
    done = _run(dest)  # nothing left to change; check and each model's smoke on the upgraded framework
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:3]}
    for model_id in MODELS:
        assert " ok " in rows[model_id] and " PASS " in rows[model_id], done.stdout
        # copied without tasks, so no baseline yet: this smoke recorded it (issue 35)
        assert rows[model_id].rstrip().endswith("none before: recorded by this smoke"), done.stdout
        cfg = yaml.safe_load((dest / "examples" / model_id / f"{model_id}_config.yaml").read_text())
        assert cfg["features"]["recompute"] is True and "recompute" not in cfg["parallel"]
        assert cfg["data"]["dataloader_param"]["collate_param"] == {"collator_id": "qwen3vl",
                                                                   "ignore_pad_token_for_loss": True}
        # tiny models: the memory plan loads with from_pretrained on every rank (now with its reason)
        assert cfg["training"]["init_model_with_meta_device"] is False and "load" not in cfg["training"]
        answers = yaml.safe_load((dest / ".copier-answers" / f"{model_id}.yml").read_text())
        assert answers["framework"]["recompute_in"] == "features"
    first = yaml.safe_load(config.read_text())
    assert first["training"]["lr"] == 2.0e-5 and first["model"]["freeze"] == ["model.visual"]
    assert 'return "mine"' in plugin.read_text()
    moe = (dest / "mindspeed_mm" / "fsdp" / "models" / "moe_vl" / "modeling_moe_vl.py").read_text()
    assert "def overwrite_transformer_config(transformer_config, model_args, feature_args):" in moe


@pytest.mark.tier2
def test_an_edit_overlapping_the_update_ends_non_zero_naming_the_file(mm_home: Path, tiny_models,
                                                                      tmp_path: Path) -> None:
    dest = _migrated(_older("d0610012"), tmp_path, tiny_models)
    config = dest / "examples" / "first_vl" / "first_vl_config.yaml"
    config.write_text(config.read_text().replace("      - model.visual.blocks.{*}\n      - model.language_model",
                                                 "      - model.visual.blocks.{*}.mlp\n      - model.language_model",
                                                 1))
    commit_all(dest)
    _upgrade(dest, mm_home)
    done = _run(dest, "--no-smoke")
    assert done.returncode != 0
    assert "conflicts left in: examples/first_vl/first_vl_config.yaml" in done.stdout
    assert "<<<<<<<" in config.read_text()


@pytest.mark.tier2
def test_a_plain_copier_update_after_a_framework_upgrade_names_hooks_update(mm_home: Path, tiny_models,
                                                                           tmp_path: Path) -> None:
    """copier replays the recorded framework facts: a plain update must not exit 0 as if all were current."""
    dest = _migrated(_older("d0610012"), tmp_path, tiny_models)
    plain = [sys.executable, "-m", "copier", "update", "--trust", "--defaults", "-a", ".copier-answers/first_vl.yml"]
    done = subprocess.run(plain, cwd=dest, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]  # same framework: nothing to say
    _upgrade(dest, mm_home)
    done = subprocess.run(plain, cwd=dest, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode != 0
    assert "python -m hooks.update" in done.stderr and "rendered for" in done.stderr, done.stderr[-2000:]
    assert _git_out(dest, "status", "--porcelain") == ""  # refused before it changed a file (issue 40)


def _released(tag: str, dest: Path) -> Path | None:
    """This repository's release ``tag`` as a template repo (None when the tag is not in this clone)."""
    ok = subprocess.run(["git", "-C", str(TEMPLATE_ROOT), "rev-parse", "--verify", "-q", f"{tag}^{{commit}}"],
                        capture_output=True, check=False).returncode == 0
    if not ok:
        return None
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(TEMPLATE_ROOT), "archive", tag], capture_output=True, check=True)
    subprocess.run(["tar", "x", "-C", str(dest)], input=archive.stdout, check=True)
    git_init(dest)
    commit_all(dest)
    subprocess.run(["git", "-C", str(dest), "tag", tag], check=True)
    return dest


@pytest.mark.tier2
def test_update_from_the_first_release_migrates_the_renamed_answer(mm_home: Path, tiny_models,
                                                                   tmp_path: Path) -> None:
    """0.1.0 -> this version: ``_migrations`` carries npus_per_node over to devices_per_node (the launch script
    keeps 16), the answers gain the framework facts and the memory plan, MIGRATION.md its memory section."""
    template = _released("0.1.0", tmp_path / "template")
    if template is None:
        pytest.skip("tag 0.1.0 is not in this clone")
    dest = tmp_path / "MindSpeed-MM"
    shutil.copytree(mm_home, dest, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    git_init(dest)
    commit_all(dest)
    done = copy(dest, template=template, model_id="old_vl", model_path=tiny_models("qwen2_5_vl"), npus_per_node=16)
    assert done.returncode == 0, done.stderr[-2000:]
    commit_all(dest)
    _released_next(template)
    done = _run(dest, "--no-smoke")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    answers = yaml.safe_load((dest / ".copier-answers" / "old_vl.yml").read_text())
    assert answers["devices_per_node"] == 16 and "npus_per_node" not in answers
    assert answers["framework"]["recompute_in"] == "features" and answers["memory_plan"]["fits"] is True
    assert "NPUS_PER_NODE=${NPUS_PER_NODE:-16}" in (dest / "examples" / "old_vl" / "finetune_old_vl.sh").read_text()
    assert "## Memory plan and weights (16 devices" in (dest / "examples" / "old_vl" / "MIGRATION.md").read_text()


def _released_next(template: Path) -> None:
    """This working tree committed on top of the 0.1.0 history and tagged 0.2.0."""
    for path in template.iterdir():
        if path.name != ".git":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    ignore = shutil.ignore_patterns(".git", "build", "__pycache__", ".pytest_cache", ".ruff_cache", ".venv*")
    shutil.copytree(TEMPLATE_ROOT, template, ignore=ignore, dirs_exist_ok=True)
    commit_all(template)
    subprocess.run(["git", "-C", str(template), "tag", "0.2.0"], check=True)


@pytest.mark.tier2
def test_update_compares_losses_with_the_recorded_baseline_and_names_a_regression(mm_home: Path, tiny_models,
                                                                                 tmp_path: Path) -> None:
    """Issue 35: a baseline recorded on the older framework, the upgrade, then the update's smoke compares its
    losses with it (the table's last column); another loss reduction injected into the framework copy makes the
    update exit non-zero naming the model and the first step that moved."""
    from tests.st_tools import injected

    dest = _migrated(_older("d0610012"), tmp_path, tiny_models)
    env = {**os.environ, "PYTHONPATH": str(TEMPLATE_ROOT)}
    recorded = subprocess.run([sys.executable, "-m", "hooks.smoke", ".copier-answers/first_vl.yml",
                               "--record-baseline"], cwd=dest, env=env, capture_output=True, text=True, timeout=900,
                              check=False)
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    assert "system test recorded on cpu (losses only)" in recorded.stdout
    commit_all(dest)
    _upgrade(dest, mm_home)
    review = _run(dest, "--model", "first_vl", "--review")  # smokes in the scratch clone, changes nothing
    print(review.stderr)
    assert _git_out(dest, "status", "--porcelain") == ""
    row = next(line for line in review.stderr.splitlines() if line.startswith("first_vl "))
    assert "max rel diff" in row or "REGRESSION at step" in row, review.stderr  # the comparison, whatever it found
    done = _run(dest, "--model", "first_vl", "--no-smoke")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with injected(dest):
        commit_all(dest)
        regressed = _run(dest, "--model", "first_vl")
    print(regressed.stdout)
    assert regressed.returncode == 1, regressed.stdout[-3000:] + regressed.stderr[-3000:]
    assert "loss regression: first_vl: REGRESSION at step 1: loss " in regressed.stdout
    row = next(line for line in regressed.stdout.splitlines() if line.startswith("first_vl "))
    # the smoke fails on its own too (its loss reference: "not the model's own objective"), and says so
    assert "FAIL (smoke[framework] FAIL: 5/5 iterations" in row and row.rstrip().endswith("tolerance 1%)")

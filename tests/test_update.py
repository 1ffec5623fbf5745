"""`copier update` brings a generated model to a newer template; several models update independently. After a
framework upgrade a plain update refuses before it changes a file, and ``hooks.update`` says how to get back what an
update that did not finish rewrote (issue 40)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from hooks import env_with_hooks
from hooks.framework.checkout import KNOWN_TEMPLATES, TEMPLATE_FILE, revision
from tests.copier_run import changed_paths, commit_all, copier, copy, git_init, snapshot, template_snapshot


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


def _framework(dest: Path, *registered: str) -> None:
    """The one framework file the facts' revision follows, committed: a stand-in checkout (no trainer: tier 1)."""
    path = dest / TEMPLATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f'_register_template(name="{name}")\n' for name in (*KNOWN_TEMPLATES, *registered)))
    commit_all(dest)


def _edited_copy(template: Path, tiny_models, tmp_path: Path) -> tuple[Path, Path]:
    """A checkout with one model copied from ``template`` and hand-edited (lr), committed, then the framework
    upgraded; the checkout and the edited YAML."""
    dest = git_init(tmp_path / "checkout")
    _framework(dest)
    done = copy(dest, model_id="first_vl", model_path=tiny_models("qwen2_5_vl"), template=template)
    assert done.returncode == 0, done.stderr
    config = dest / "examples" / "first_vl" / "first_vl_config.yaml"
    config.write_text(config.read_text().replace("  lr: 1.0e-5\n", "  lr: 2.0e-5\n"))
    commit_all(dest)
    _framework(dest, "upgraded")
    return dest, config


def _hooks_update(dest: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hooks.update", str(dest), *args], cwd=dest, env=env_with_hooks(),
                          capture_output=True, text=True, timeout=600, check=False)


PLAIN_UPDATE = ("update", "--trust", "--defaults", "-a", ".copier-answers/first_vl.yml")


def test_a_refused_plain_update_leaves_the_working_tree_as_it_was(tiny_models, tmp_path: Path) -> None:
    """Issue 40: after a framework upgrade a plain ``copier update`` stops before it renders anything (the check is
    a before-stage migration); ``hooks.update``'s own copier run, with the live facts, goes through it."""
    template = template_snapshot(tmp_path / "template")
    _git(template, "tag", "0.2.0")
    dest, config = _edited_copy(template, tiny_models, tmp_path)
    before = snapshot(dest)
    for skip in ([], ["--skip-tasks"]):  # migrations run either way
        done = copier(*PLAIN_UPDATE, *skip, cwd=dest)
        assert done.returncode != 0
        assert "stopped before changing any file" in done.stderr and "python -m hooks.update" in done.stderr
        assert snapshot(dest) == before  # byte for byte, the hand edit included
    assert changed_paths(dest) == set()

    done = _hooks_update(dest, "--no-smoke")
    assert "review with git diff" in done.stdout, done.stdout + done.stderr  # (tier 1: no trainer to check)
    assert "  lr: 2.0e-5\n" in config.read_text()
    answers = yaml.safe_load((dest / ".copier-answers" / "first_vl.yml").read_text())
    assert answers["framework"]["revision"] == revision(dest) and "upgraded" in answers["framework"]["templates"]


def _previous_release(template: Path) -> None:
    """``template`` as the release before issue 40 had it: the stale-framework check a task, run after the render."""
    text = (template / "copier.yml").read_text()
    head, rest = text.split("_migrations:\n", 1)
    check, rest = rest.split("  # 0.2.0:", 1)
    command = check[check.index("  - command:"):check.index("    when:")]
    text = f"{head}_migrations:\n  # 0.2.0:{rest}".replace("\n_tasks:\n", f"\n_tasks:\n{command}    when: "
                                                           "\"{{ _copier_operation == 'update' }}\"\n", 1)
    (template / "copier.yml").write_text(text)
    commit_all(template)


def test_hooks_update_says_how_to_get_back_what_an_unfinished_update_rewrote(tiny_models, tmp_path: Path) -> None:
    """The previous release's plain update refused after its render (the hand edit gone from the working tree):
    ``hooks.update`` names the files and the commands that bring the committed ones back, never "commit"."""
    template = template_snapshot(tmp_path / "template")
    _previous_release(template)
    _git(template, "tag", "0.2.0")
    dest, config = _edited_copy(template, tiny_models, tmp_path)
    before = snapshot(dest)
    done = copier(*PLAIN_UPDATE, cwd=dest)
    assert done.returncode != 0 and "python -m hooks.update" in done.stderr, done.stderr
    assert "  lr: 1.0e-5\n" in config.read_text()  # the loss this issue is about

    done = _hooks_update(dest, "--no-smoke")
    assert done.returncode == 2 and "update that did not finish" in done.stderr, done.stderr
    assert "commit or stash them first" not in done.stderr and "git add" not in done.stderr
    assert "  git diff -- examples/first_vl/first_vl_config.yaml" in done.stderr
    stash = next(line for line in done.stderr.splitlines() if "git stash push" in line).split("#")[0].split()
    subprocess.run(stash, cwd=dest, check=True, capture_output=True)  # the command as printed
    assert snapshot(dest) == before and changed_paths(dest) == set()

    done = _hooks_update(dest, "--no-smoke")
    assert "review with git diff" in done.stdout and "  lr: 2.0e-5\n" in config.read_text()
    again = _hooks_update(dest, "--no-smoke")  # its own update, applied and not committed yet
    assert again.returncode == 2, again.stderr
    assert "the update python -m hooks.update applied on this commit" in again.stderr, again.stderr
    assert "update that did not finish" not in again.stderr

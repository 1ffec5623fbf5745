"""Run copier's real CLI against this template (a helper for the tests, not a test double)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMPLATE_ROOT = Path(__file__).resolve().parent.parent


def copier(*args: str, cwd: Path | None = None, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "copier", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, check=False)


@contextmanager
def own_hooks() -> Iterator[None]:
    """Keep this repository's ``hooks`` package imported across an in-process copier call.

    copier loads ``hooks/render/copier_ext.py`` from the template it renders (a temporary clone it deletes
    afterwards); the extension replaces a ``hooks`` package imported from another root with the clone's, so
    without this the test process would later import ``hooks`` submodules from a deleted folder.
    """
    saved = {name: mod for name, mod in sys.modules.items() if name == "hooks" or name.startswith("hooks.")}
    path = list(sys.path)
    try:
        yield
    finally:
        for name in [n for n in sys.modules if n == "hooks" or n.startswith("hooks.")]:
            del sys.modules[name]
        sys.modules.update(saved)
        sys.path[:] = path


def template_snapshot(dest: Path) -> Path:
    """A git copy of the template's working tree, committed with fixed metadata.

    copier records the template commit; a dirty working tree gets a fresh commit
    per render, so renders are compared against one stable snapshot.
    """
    # never the virtual environments (make's .venv, .venv-tf5, .venv-torch27: gigabytes each)
    ignore = shutil.ignore_patterns(".git", "build", "__pycache__", ".pytest_cache", ".ruff_cache", ".venv*")
    shutil.copytree(TEMPLATE_ROOT, dest, ignore=ignore)
    env = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
           "PATH": os.environ.get("PATH", "")}
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "template"], check=True, env=env)
    return dest


def copy(dest: Path, *, skip_tasks: bool = True, template: Path = TEMPLATE_ROOT,
         **answers: object) -> subprocess.CompletedProcess[str]:
    data: list[str] = []
    answers.setdefault("python", sys.executable)
    for key, value in answers.items():
        data += ["-d", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    flags = ["--trust", "--defaults", "--quiet"] + (["--skip-tasks"] if skip_tasks else [])
    if Path(template) == TEMPLATE_ROOT:  # this working tree, not its latest release tag
        flags += ["--vcs-ref", "HEAD"]
    return copier("copy", *flags, *data, str(template), str(dest))


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "base"], check=True)
    return path


def commit_all(path: Path) -> None:
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "generated"], check=True)


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` except .git, keyed by relative path."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(path).parts}


def checkout_at_hand(parent: Path) -> Path:
    """A git copy of MindSpeed-MM under ``parent`` where the framework is at hand (``MINDSPEED_MM_HOME``), else an
    empty git repository: the destination of tests that stop before anything is written, in either tier."""
    home = os.environ.get("MINDSPEED_MM_HOME")
    return mm_checkout(Path(home), parent) if home else git_init(parent / "checkout")


def mm_checkout(mm_home: Path, parent: Path) -> Path:
    """A git copy of the MindSpeed-MM work tree under ``parent``: copies go there, never into ``mm_home``."""
    dest = parent / "MindSpeed-MM"
    shutil.copytree(mm_home, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", "logs", "cache_dir"))
    git_init(dest)
    commit_all(dest)
    return dest


def changed_paths(dest: Path) -> set[str]:
    """Paths ``git status`` reports in ``dest`` (untracked files one by one)."""
    out = subprocess.run(["git", "-C", str(dest), "status", "--porcelain", "--untracked-files=all"],
                         capture_output=True, text=True, check=True).stdout
    return {line[3:] for line in out.splitlines()}

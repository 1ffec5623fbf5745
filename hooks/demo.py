"""The README's one-command demo: migrate a tiny VLM that we build ourselves.

Builds a tiny random-weight Qwen2.5-VL (real transformers classes, tokenizer
trained locally) and runs ``copier copy --trust --defaults`` of this template:

* with ``MINDSPEED_MM_HOME`` set, into a throwaway copy of that checkout, so the
  post-generation smoke runs the real MindSpeed-MM trainer (your checkout is
  never touched);
* without it, into an empty folder, where the contract smoke runs.

``python -m hooks.demo [--dest DIR] [--arch qwen2_5_vl]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from hooks import TEMPLATE_ROOT, scaffold


def prepare_destination(dest: Path, mm_home: str | None) -> Path:
    """A fresh destination: a git copy of the MindSpeed-MM checkout, or an empty git folder."""
    if dest.exists():
        shutil.rmtree(dest)
    if mm_home:
        shutil.copytree(mm_home, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", "logs"), symlinks=True)
    else:
        dest.mkdir(parents=True)
    git = ["git", "-C", str(dest), "-c", "user.name=msmm-demo", "-c", "user.email=demo@localhost"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "demo base"], check=True)
    return dest


def copier_command(template: Path, dest: Path, model_id: str, model_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "copier", "copy", "--trust", "--defaults", "--quiet", "--vcs-ref", "HEAD",
        "-d", f"model_id={model_id}", "-d", f"model_path={model_dir}", "-d", f"python={sys.executable}",
        str(template), str(dest),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=TEMPLATE_ROOT / "build" / "demo")
    parser.add_argument("--arch", default="qwen2_5_vl", help="tiny architecture (python -m hooks.tiny --list)")
    args = parser.parse_args(argv)
    from hooks.tiny import build_tiny_model

    work = args.dest.resolve()
    model_dir = build_tiny_model(args.arch, work / "models" / args.arch)
    mm_home = os.environ.get("MINDSPEED_MM_HOME")
    dest = prepare_destination(work / "checkout", mm_home)
    print(f"demo: tiny {args.arch} at {model_dir}; destination {dest} "
          f"({'copy of ' + mm_home if mm_home else 'not a MindSpeed-MM checkout: contract smoke'})", flush=True)
    done = subprocess.run(copier_command(TEMPLATE_ROOT, dest, f"demo_{args.arch}", model_dir), check=False)
    status = subprocess.run(["git", "-C", str(dest), "status", "--porcelain"], capture_output=True, text=True)
    print("changed paths in the destination:\n" + status.stdout.rstrip())
    print(f"report: {dest / scaffold.migration_md(f'demo_{args.arch}')} (the plan), "
          f"{dest / scaffold.report_md(f'demo_{args.arch}')} (what was verified)")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())

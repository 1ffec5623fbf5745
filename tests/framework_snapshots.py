"""Run a command with MindSpeed-MM and MindSpeed core from the vendored snapshots, when none is given.

Tier 2 (copy into a real checkout, real trainer) needs ``MINDSPEED_MM_HOME`` and ``MINDSPEED_HOME``.
Where they are not set and pinned snapshots are at hand (``$MSMM_VENDOR``, default
``<repo>/../shared/vendor``), the archives are unpacked once into a temporary folder outside the
repository and both variables point there, so ``make test`` runs tier 2 on any machine that has
them, CI included. ``MSMM_REQUIRE_TIER2=1`` (CI) turns "no framework found" into an error instead
of a run with tier 2 skipped.

``python -m tests.framework_snapshots -- CMD [ARG...]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The snapshots tier 2 runs against by default: MindSpeed-MM HEAD and the MindSpeed core that goes with it.
MINDSPEED_MM = "MindSpeed-MM-57069cd5"
MINDSPEED = "MindSpeed-028de58c"


def vendor_dir() -> Path | None:
    """Where the pinned archives are, or None."""
    candidate = Path(os.environ.get("MSMM_VENDOR") or REPO.parent / "shared" / "vendor")
    return candidate if (candidate / f"{MINDSPEED_MM}.tar.gz").is_file() else None


def unpack(archive: Path, root: Path) -> Path:
    """``root/<archive name>/<its one top-level folder>``, unpacked once (atomically) and reused."""
    target = root / archive.name.removesuffix(".tar.gz")
    if not target.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
        try:
            with tarfile.open(archive) as tar:
                try:
                    tar.extractall(partial, filter="data")
                except TypeError:  # a Python without extraction filters (before 3.10.12)
                    tar.extractall(partial)  # noqa: S202 - our own pinned archives
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    (top,) = [p for p in target.iterdir() if p.is_dir()]
    return top


def with_framework(environ: dict[str, str]) -> tuple[dict[str, str], str]:
    """``environ`` with the framework homes filled in where possible, and a line saying which were used."""
    env = dict(environ)
    if env.get("MINDSPEED_MM_HOME"):
        return env, f"tier 2 on MINDSPEED_MM_HOME={env['MINDSPEED_MM_HOME']}"
    vendor = vendor_dir()
    if vendor is None:
        return env, "tier 2 skipped: no MINDSPEED_MM_HOME and no vendored snapshots (set MSMM_VENDOR)"
    root = Path(tempfile.gettempdir()) / "msmm-framework"
    env["MINDSPEED_MM_HOME"] = str(unpack(vendor / f"{MINDSPEED_MM}.tar.gz", root))
    env["MINDSPEED_HOME"] = str(unpack(vendor / f"{MINDSPEED}.tar.gz", root))
    env["MSMM_VENDOR"] = str(vendor)
    return env, f"tier 2 on the vendored {MINDSPEED_MM} + {MINDSPEED} (unpacked under {root})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.framework_snapshots", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    env, note = with_framework(dict(os.environ))
    print(f"msmm-migrate: {note}", flush=True)
    if not env.get("MINDSPEED_MM_HOME") and os.environ.get("MSMM_REQUIRE_TIER2") == "1":
        print("error: MSMM_REQUIRE_TIER2=1 but no framework was found; set MINDSPEED_MM_HOME or MSMM_VENDOR",
              file=sys.stderr)
        return 2
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    raise SystemExit(main())

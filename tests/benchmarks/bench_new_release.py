"""Benchmark: a never-seen release, from ``copier copy`` to its first verified training step (issue 32).

For each published remote-code fixture (``hooks.tiny.published``, built from its mirror first, not timed), a new
user's copy with defaults (``copier copy --trust --defaults -d trust_remote_code=true``) into a fresh copy of
the MindSpeed-MM checkout: the wall time until the copy exits, which is when its smoke has run the real trainer
and verified the first steps (loss equivalence included), and whether it says ``smoke[framework] PASS``. A copy
that stops before rendering is timed too (its stop is the outcome). Prints figures; asserts nothing (the issue's
target: under ten minutes on a 2-core machine).

    MINDSPEED_MM_HOME=... MINDSPEED_HOME=... python tests/benchmarks/bench_new_release.py [--family fastvlm_0_5b]

(``python -m tests.framework_snapshots -- python tests/benchmarks/bench_new_release.py`` sets both from the
vendored snapshots.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hooks.tiny import published  # noqa: E402
from tests.copier_run import copy, mm_checkout  # noqa: E402


def measure(family: str, home: Path, work: Path) -> dict[str, object]:
    """Build ``family`` (untimed), then time a default copy of it into a fresh checkout."""
    try:
        folder = published.build(family, work / "models" / family)
    except published.MirrorMissing as exc:
        return {"family": family, "outcome": f"not built: {exc}"}
    dest = mm_checkout(home, work / family)
    start = time.monotonic()
    done = copy(dest, skip_tasks=False, model_id=family, model_path=folder, trust_remote_code=True)
    seconds = time.monotonic() - start
    passed = done.returncode == 0 and "smoke[framework] PASS" in done.stdout
    stop = (done.stderr.strip().splitlines() or [""])[-1][:160]
    return {"family": family, "seconds": round(seconds, 1), "minutes": round(seconds / 60, 2),
            "outcome": "smoke[framework] PASS" if passed else f"exit {done.returncode}: {stop}",
            "loss_equivalence": "verified: loss equivalence" in done.stdout}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=sorted(published.RELEASES),
                        help="a published fixture (repeatable; default: all)")
    args = parser.parse_args()
    home = os.environ.get("MINDSPEED_MM_HOME")
    if not home:
        print("MINDSPEED_MM_HOME is not set: nothing to copy into (run it under tests.framework_snapshots)")
        return 2
    print(f"{'family':<20} {'minutes':>8}  outcome")
    with tempfile.TemporaryDirectory(prefix="msmm-bench-release-") as tmp:
        for family in args.family or sorted(published.RELEASES):
            row = measure(family, Path(home), Path(tmp))
            print(f"{row['family']:<20} {row.get('minutes', '-'):>8}  {row['outcome']}"
                  + ("; loss equivalence verified" if row.get("loss_equivalence") else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

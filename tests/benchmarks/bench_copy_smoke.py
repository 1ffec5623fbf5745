"""Benchmark: probe, render and copy+smoke time for a tiny VLM, next to a bare run of the real trainer.

Prints figures; asserts nothing. Target (issue 2): the whole ``copier copy`` including the smoke
within 1.5x of a bare run of the real trainer on the same tiny model and data (a hand-made
branch-A scaffold took 18 s wall on a 2-core machine).

    python tests/benchmarks/bench_copy_smoke.py [--arch qwen2_5_vl]

With ``MINDSPEED_MM_HOME`` (and ``MINDSPEED_HOME``) set, the copy goes into a temporary copy of
that checkout and the bare run uses the same checkout; without it only probe/render/contract
smoke are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hooks.demo import prepare_destination  # noqa: E402
from hooks.tiny import build_tiny_model  # noqa: E402


def timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    return time.monotonic() - start, done


def copier_copy(dest: Path, model_dir: Path, model_id: str, *, skip_tasks: bool) -> list[str]:
    return [sys.executable, "-m", "copier", "copy", "--trust", "--defaults", "--quiet",
            *(["--skip-tasks"] if skip_tasks else []), "-d", f"model_id={model_id}", "-d", f"model_path={model_dir}",
            "-d", f"python={sys.executable}", str(ROOT), str(dest)]


def bare_trainer_run(checkout: Path, work: Path) -> dict:
    """The real trainer on the smoke's own config and data, launched directly (no copier, no hooks)."""
    import yaml

    from hooks.smoke import find_mindspeed
    from hooks.trainer_run import detect_device, framework_env, launch_trainer, parse_iterations

    # Same config, but a cold datasets cache like the smoke had: a fair bare run.
    cfg = yaml.safe_load((work / "smoke_config.yaml").read_text())
    cfg["data"]["dataset_param"]["basic_parameters"]["cache_dir"] = str(work / "bare_cache")
    config = work / "bare_config.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = framework_env(checkout, find_mindspeed(checkout)[1], cpu_bridges=detect_device() == "cpu")
    run = launch_trainer(checkout, config, log_path=work / "bare_trainer.log", env=env)
    losses = [r["loss"] for r in parse_iterations(run.log_text)]
    return {"wall_s": run.wall_s, "peak_rss_mb": run.peak_rss_mb, "iterations": len(losses), "rc": run.returncode}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="qwen2_5_vl")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="msmm-bench-"))
    os.environ["MSMM_CACHE"] = str(tmp / "cache")
    model_dir = build_tiny_model(args.arch, tmp / "model")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    figures: dict[str, object] = {}

    wall, done = timed([sys.executable, "-m", "hooks.probe", str(model_dir), "--json"], env=env)
    figures["probe_wall_s"] = round(wall, 2)
    figures["probe_inside_s"] = {k: round(v, 2) for k, v in json.loads(done.stdout)["timings"].items()}

    render_dest = prepare_destination(tmp / "render", None)
    wall, done = timed(copier_copy(render_dest, model_dir, "bench", skip_tasks=True))
    figures["render_wall_s (incl. probe in validator)"] = round(wall, 2)

    mm_home = os.environ.get("MINDSPEED_MM_HOME")
    checkout = prepare_destination(tmp / "checkout", mm_home)
    wall, done = timed(copier_copy(checkout, model_dir, "bench", skip_tasks=False))
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"passed"')]
    smoke = json.loads(lines[-1]) if done.returncode == 0 and lines else {"error": done.stderr[-500:]}
    figures["copy_plus_smoke_wall_s"] = round(wall, 2)
    figures["smoke"] = smoke
    if mm_home:
        bare = bare_trainer_run(checkout, Path(os.environ["MSMM_CACHE"]) / "smoke" / "bench")
        figures["bare_trainer"] = bare
        figures["ratio_copy_plus_smoke_to_bare"] = round(wall / bare["wall_s"], 2)
        figures["target_ratio"] = 1.5
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

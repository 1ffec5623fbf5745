"""Benchmark: probe, render and copy+smoke time for a tiny VLM, next to bare runs of the real trainer.

Prints figures; asserts nothing. Target (issue 2): the whole ``copier copy`` including the smoke
within 1.5x of a bare run of the real trainer on the same tiny model and data (a hand-made
branch-A scaffold took 18 s wall on a 2-core machine).

    python tests/benchmarks/bench_copy_smoke.py [--arch qwen2_5_vl]

With ``MINDSPEED_MM_HOME`` (and ``MINDSPEED_HOME``) set, the copy goes into a fresh copy of that
checkout, and the bare run into another fresh copy holding the generated plugin and example (a
hand-made scaffold), on the smoke's own config (no loader or preprocessing workers: the strictest
baseline), with cold bytecode and datasets caches like the copy's own smoke. ``--repeat N``
measures N rounds and prints each plus the medians (this machine's timings vary by +-15%).

Without ``MINDSPEED_MM_HOME`` only probe/render/contract smoke are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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


def bare_checkout(tmp: Path, name: str, mm_home: str, copied_from: Path, model_id: str) -> Path:
    """A fresh checkout with the generated plugin and example copied in: what a hand-made scaffold leaves."""
    checkout = prepare_destination(tmp / name, mm_home)
    for rel in (Path("mindspeed_mm/fsdp/models") / model_id, Path("examples") / model_id):
        shutil.copytree(copied_from / rel, checkout / rel, ignore=shutil.ignore_patterns("__pycache__"))
    return checkout


def bare_trainer_run(checkout: Path, work: Path, name: str = "bare") -> dict:
    """The real trainer on ``cfg``, launched directly (no copier, no hooks), with a cold datasets cache."""
    import yaml

    from hooks.smoke import find_mindspeed
    from hooks.trainer_run import detect_device, framework_env, launch_trainer, parse_iterations

    cfg = yaml.safe_load((work / "smoke_config.yaml").read_text())
    cfg["data"]["dataset_param"]["basic_parameters"]["cache_dir"] = str(work / f"{name}_cache")
    config = work / f"{name}_config.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = framework_env(checkout, find_mindspeed(checkout)[1], cpu_bridges=detect_device() == "cpu")
    run = launch_trainer(checkout, config, log_path=work / f"{name}_trainer.log", env=env)
    losses = [r["loss"] for r in parse_iterations(run.log_text)]
    return {"wall_s": round(run.wall_s, 2), "peak_rss_mb": run.peak_rss_mb, "iterations": len(losses),
            "rc": run.returncode}


def one_round(tmp: Path, model_dir: Path, mm_home: str | None) -> dict[str, object]:
    """Probe, render, copy+smoke and (with a checkout) the bare run, each from cold caches."""
    tmp.mkdir(parents=True)
    os.environ["MSMM_CACHE"] = str(tmp / "cache")  # also no parity result from an earlier round
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    figures: dict[str, object] = {}

    wall, done = timed([sys.executable, "-m", "hooks.probe", str(model_dir), "--json"], env=env)
    figures["probe_wall_s"] = round(wall, 2)
    figures["probe_inside_s"] = {k: round(v, 2) for k, v in json.loads(done.stdout)["timings"].items()}

    render_dest = prepare_destination(tmp / "render", None)
    wall, done = timed(copier_copy(render_dest, model_dir, "bench", skip_tasks=True))
    figures["render_wall_s (incl. probe in validator)"] = round(wall, 2)

    checkout = prepare_destination(tmp / "checkout", mm_home)
    wall, done = timed(copier_copy(checkout, model_dir, "bench", skip_tasks=False))
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"passed"')]
    smoke = json.loads(lines[-1]) if done.returncode == 0 and lines else {"error": done.stderr[-500:]}
    figures["copy_plus_smoke_wall_s"] = round(wall, 2)
    figures["smoke"] = smoke
    if mm_home:
        work = Path(os.environ["MSMM_CACHE"]) / "smoke" / "bench"
        bare = bare_trainer_run(bare_checkout(tmp, "bare", mm_home, checkout, "bench"), work)
        figures["bare_trainer"] = bare
        figures["ratio_copy_plus_smoke_to_bare"] = round(wall / bare["wall_s"], 2)
        figures["target_ratio"] = 1.5
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="qwen2_5_vl")
    parser.add_argument("--repeat", type=int, default=1, help="rounds to measure (medians printed when > 1)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="msmm-bench-"))
    model_dir = build_tiny_model(args.arch, tmp / "model")
    mm_home = os.environ.get("MINDSPEED_MM_HOME")
    rounds = [one_round(tmp / f"round{i}", model_dir, mm_home) for i in range(args.repeat)]
    for i, figures in enumerate(rounds):
        print(f"round {i + 1}: " + json.dumps(figures, indent=2))
    if len(rounds) > 1:
        keys = ["probe_wall_s", "render_wall_s (incl. probe in validator)", "copy_plus_smoke_wall_s"]
        medians = {key: statistics.median(r[key] for r in rounds) for key in keys}
        if mm_home:
            medians["bare_trainer_wall_s"] = statistics.median(r["bare_trainer"]["wall_s"] for r in rounds)
            medians["ratio_copy_plus_smoke_to_bare"] = statistics.median(
                r["ratio_copy_plus_smoke_to_bare"] for r in rounds)
        print("medians: " + json.dumps(medians, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

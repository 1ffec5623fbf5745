"""Benchmark: probe, render and copy+smoke time for a tiny VLM, next to bare runs of the real trainer.

Prints figures; asserts nothing. Target (issue 25): the whole ``copier copy`` including the smoke
within 1.6x of a bare run of the real trainer on the same tiny model and data, with nothing started
from a question (the probe, and in a checkout the data evidence, run while copier waits).

    python tests/benchmarks/bench_copy_smoke.py [--arch qwen2_5_vl]   # branch a
    python tests/benchmarks/bench_copy_smoke.py --arch gemma3         # branch b (derived template)

With ``MINDSPEED_MM_HOME`` (and ``MINDSPEED_HOME``) set, the copy goes into a fresh copy of that
checkout, and the bare run into another fresh copy holding the generated plugin and example (a
hand-made scaffold), on the smoke's own config (no loader or preprocessing workers: the strictest
baseline), with cold bytecode and datasets caches like the copy's own smoke. The two runs swap
order every round. ``reference_s`` is the loss-equivalence reference's own time (issue 24: its share of
the smoke's trainer run and of the whole copy). ``--repeat N`` measures N rounds and prints each
plus the medians (this machine's timings vary by +-15%).

Without ``MINDSPEED_MM_HOME`` only probe/render/contract smoke are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hooks.demo import prepare_destination  # noqa: E402
from hooks.report.smoke import SmokeRecord  # noqa: E402
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
    """A fresh checkout with the rendered plugins and example copied in: what a hand-made scaffold leaves
    (branch c's dataset plugin included: without it the bare trainer fails at once, and a ratio against
    that failure means nothing)."""
    checkout = prepare_destination(tmp / name, mm_home)
    for rel in (Path("mindspeed_mm/fsdp/models") / model_id, Path("examples") / model_id,
                Path("mindspeed_mm/fsdp/data/datasets") / model_id):
        if (copied_from / rel).is_dir():
            shutil.copytree(copied_from / rel, checkout / rel, ignore=shutil.ignore_patterns("__pycache__"))
    return checkout


def bare_trainer_run(checkout: Path, model_dir: Path, model_id: str, work: Path) -> dict:
    """The real trainer on the smoke's own config, launched directly (no copier, no hooks' probe or parity).

    Same config derivation, data and launch as the copy's smoke, with cold datasets and bytecode caches.
    """
    from hooks.data.sample import build_demo_dataset
    from hooks.framework.environment import find_mindspeed
    from hooks.smoke.trainer_run import run_framework_smoke

    data_json = build_demo_dataset(work / "data")
    result = run_framework_smoke(checkout, checkout / "examples" / model_id / f"{model_id}_config.yaml",
                                 model_dir=model_dir, data_json=data_json, media_root=data_json.parent,
                                 work_dir=work, mindspeed_home=find_mindspeed(checkout)[1])
    figures = {"wall_s": result.wall_s, "peak_rss_mb": result.peak_rss_mb, "passed": result.passed}
    return figures if result.passed else {**figures, "error": result.error or result.summary()}


def copy_with_smoke(checkout: Path, model_dir: Path) -> tuple[float, dict]:
    """``copier copy`` with its post-generation smoke; returns the wall time and the smoke's result record."""
    wall, done = timed(copier_copy(checkout, model_dir, "bench", skip_tasks=False))
    record = SmokeRecord.read(Path(os.environ["MSMM_CACHE"]) / "smoke" / "bench" / "smoke_result.json")
    if done.returncode != 0 or record is None:
        return wall, {"error": (done.stdout + done.stderr)[-500:]}
    return wall, asdict(record)


def parity_check(checkout: Path, model_dir: Path) -> dict[str, object]:
    """The data-parity check of the copied scaffold, run again uncached (an empty verdict cache): what it costs
    on its own, with the spec the copy's own check uses for the answered branch."""
    import yaml

    from hooks.data import parity

    answers = yaml.safe_load((checkout / ".copier-answers" / "bench.yml").read_text())
    cache = os.environ["MSMM_CACHE"]
    os.environ["MSMM_CACHE"] = tempfile.mkdtemp(prefix="msmm-bench-parity-")
    try:
        start = time.monotonic()
        result, why = parity.parity_for_answers(checkout, answers)
        seconds = round(time.monotonic() - start, 2)
    finally:
        os.environ["MSMM_CACHE"] = cache
    return {"data_branch": answers["data_branch"], "parity": result.verdict if result else f"not checked ({why})",
            "parity_check_s (uncached, own interpreter)": seconds,
            "copy_time_evidence": [(c["label"], c["verdict"]) for c in answers["data_evidence"]["candidates"]]}


def one_round(tmp: Path, model_dir: Path, mm_home: str | None, bare_first: bool) -> dict[str, object]:
    """Probe, render, copy+smoke and (with a checkout) the bare run, each from cold caches.

    ``bare_first`` alternates the order of the copy and the bare run between rounds, so that a
    drift in the host's speed does not always land on the same side.
    """
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

    # Both checkouts are written before anything is timed, then synced: a run must not share the disk
    # with the write-back of a checkout copied just before it.
    checkout = prepare_destination(tmp / "checkout", mm_home)
    bare = bare_checkout(tmp, "bare", mm_home, render_dest, "bench") if mm_home else None
    os.sync()
    if bare and bare_first:
        figures["bare_trainer"] = bare_trainer_run(bare, model_dir, "bench", tmp / "bare_work")
    copy_wall, smoke = copy_with_smoke(checkout, model_dir)
    figures["copy_plus_smoke_wall_s"] = round(copy_wall, 2)
    figures["smoke"] = smoke
    cost = re.search(r"\(reference: ([\d.]+) s after the trainer\)", " ".join(smoke.get("notes", [])))
    if cost:  # the loss-equivalence reference (hooks.smoke.reference): its share of the copy's and the smoke's time
        figures["reference_s"] = float(cost.group(1))
        figures["reference_share_of_copy"] = round(float(cost.group(1)) / copy_wall, 3)
        if smoke.get("wall_s"):  # the trainer's own run, launch to exit
            figures["reference_share_of_smoke_trainer"] = round(float(cost.group(1)) / float(smoke["wall_s"]), 3)
    if bare and not bare_first:
        figures["bare_trainer"] = bare_trainer_run(bare, model_dir, "bench", tmp / "bare_work")
    if mm_home and (checkout / ".copier-answers" / "bench.yml").is_file():
        figures.update(parity_check(checkout, model_dir))
    if mm_home and smoke.get("passed") and figures["bare_trainer"]["passed"]:  # a ratio against a failure is none
        figures["ratio_copy_plus_smoke_to_bare"] = round(copy_wall / figures["bare_trainer"]["wall_s"], 2)
        figures["target_ratio"] = 1.6
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="qwen2_5_vl")
    parser.add_argument("--repeat", type=int, default=1, help="rounds to measure (medians printed when > 1)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="msmm-bench-"))
    model_dir = build_tiny_model(args.arch, tmp / "model")
    mm_home = os.environ.get("MINDSPEED_MM_HOME")
    rounds = [one_round(tmp / f"round{i}", model_dir, mm_home, bare_first=i % 2 == 1)
              for i in range(args.repeat)]
    for i, figures in enumerate(rounds):
        print(f"round {i + 1}: " + json.dumps(figures, indent=2))
    if len(rounds) > 1:
        keys = ["probe_wall_s", "render_wall_s (incl. probe in validator)", "copy_plus_smoke_wall_s"]
        medians = {key: round(statistics.median(r[key] for r in rounds), 2) for key in keys}
        if mm_home:
            medians["bare_trainer_wall_s"] = round(statistics.median(r["bare_trainer"]["wall_s"] for r in rounds), 2)
            ratios = [r["ratio_copy_plus_smoke_to_bare"] for r in rounds if "ratio_copy_plus_smoke_to_bare" in r]
            failed = len(rounds) - len(ratios)
            medians["ratio_copy_plus_smoke_to_bare"] = (f"none: {failed} round(s) failed" if failed
                                                        else round(statistics.median(ratios), 2))
        print("medians: " + json.dumps(medians, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

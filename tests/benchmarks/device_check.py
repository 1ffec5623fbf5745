"""Device check (issue 23): the memory plan against measured memory, and the smoke on the devices present.

Prints figures; asserts nothing; CI never runs it. One command, three parts:

1. **tiny** (``--cpu`` runs only this and part 2): every CI tiny family, one bf16 forward in process, the bytes
   saved for backward per layer (``hooks.model.saved``) beside the plan's ``layer_row_bytes``, recompute off
   and on;
2. **plan**: the Qwen2.5-VL-7B shape on one device of ``--device-memory-gb`` (141: an H200), probed on the meta
   device: per-device breakdown and decision, against the 101.0 GiB ``max_memory_allocated`` measured for it
   (issue 23: vision frozen, recompute on, ~1.8k-token samples, one H200);
3. **device** (CUDA/NPU, ``MINDSPEED_MM_HOME`` set): copy the tiny Qwen2.5-VL and the 7B-shaped config into a
   git copy of the checkout with the demo's defaults and the answered cluster (``-d devices_per_node``,
   ``device_memory_gb``): each smoke runs on ``min(2, devices)`` ranks and reports predicted vs measured
   memory; then a short real run of the 7B shape (random bf16 weights, ``--iters`` steps on ~1.8k-token
   samples, the YAML as generated) prints the plan's total beside each rank's ``max_memory_allocated`` and
   the step times.

On a bare GPU machine (``device`` tool, see /work/.library/device/README.md) stage once here::

    echo /.whl/ >> .git/info/exclude; echo /.fw/ >> .git/info/exclude
    python tests/benchmarks/device_check.py --stage      # wheels into .whl/, the vendored framework into .fw/

then run, carrying ``.whl`` and ``.fw`` (under 8 minutes with the image's torch)::

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && \\
    PYTHONPATH=/tmp/site MINDSPEED_MM_HOME=.fw/MindSpeed-MM MINDSPEED_HOME=.fw/MindSpeed \\
    python3 tests/benchmarks/device_check.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FAMILIES = ["qwen2_5_vl", "qwen3_vl_moe", "glm4v", "gemma3", "llava", "idefics3"]
H200_MEASURED_GIB = 101.0  # issue 23: Qwen2.5-VL-7B shape, vision frozen, recompute, one H200
STAGED_WHEELS = ["transformers==4.57.1", "tokenizers", "safetensors", "copier==9.19.1",
                 "copier-template-extensions==0.3.4", "accelerate", "datasets", "peft", "torchdata", "einops",
                 "jsonargparse", "pydantic", "num2words"]


def tiny(families: list[str], work: Path) -> None:
    """Part 1: the activation estimate against the saved-tensor bytes, per family and layer kind."""
    from hooks.model.saved import layer_kind
    from hooks.smoke.memory_check import measure_in_process
    from hooks.tiny import build_tiny_model

    print("== activations saved for backward per layer (bf16, CPU-measurable): plan vs measured")
    print(f"{'family':14s} {'mode':9s} {'kind':6s} {'layers':>6s} {'rows':>5s} {'predicted':>10s} "
          f"{'measured':>10s} {'worst layer':>11s}")
    for arch in families:
        model_dir = build_tiny_model(arch, work / "tiny" / arch)
        for recompute in (False, True):
            out = measure_in_process(model_dir, recompute=recompute)
            saved, want = out["measured"], out["predicted"]
            for kind in ("text", "vision"):
                names = [n for n in saved.layers if layer_kind(n, out["towers"]) == kind]
                if not names:
                    continue
                worst = max((want[n] - saved.layers[n]) / max(saved.layers[n], 1) for n in names)
                rows = "/".join(str(r) for r in sorted({saved.rows[n] for n in names}))
                print(f"{arch:14s} {'recompute' if recompute else 'full':9s} {kind:6s} {len(names):6d} {rows:>5s} "
                      f"{sum(want[n] for n in names):10,d} {sum(saved.layers[n] for n in names):10,d} "
                      f"{worst:+10.1%}")


def plan(device_memory_gb: float, devices: int) -> None:
    """Part 2: the 7B shape's plan on ``devices`` x ``device_memory_gb``."""
    from hooks.model import cluster, memory, memory_plan
    from tests.conftest import FULL_CONFIGS

    shapes = cluster.model_shapes(FULL_CONFIGS / "Qwen2.5-VL-7B-Instruct")
    gib = memory.GIB
    print(f"\n== memory plan, Qwen2.5-VL-7B shape ({shapes.total_params:,} parameters), {devices} x "
          f"{device_memory_gb:g} GiB, cutoff_len 2048, micro-batch 1, recompute on")
    frozen = memory_plan.breakdown(shapes, memory_plan.Settings(1, devices, freeze=("model.visual",)), devices, 2048)
    print(f"vision frozen ({frozen.mode}): {frozen.device_total(1) / gib:.1f} GiB predicted; "
          f"measured on one H200 (issue 23): {H200_MEASURED_GIB} GiB max_memory_allocated "
          f"({(frozen.device_total(1) / gib - H200_MEASURED_GIB) / H200_MEASURED_GIB:+.1%})"
          if devices == 1 else f"vision frozen ({frozen.mode}): {frozen.device_total(1) / gib:.1f} GiB predicted")
    chosen = memory_plan.plan_memory(shapes, devices_per_node=devices, device_memory_gb=device_memory_gb)
    print(f"decision: {chosen.verdict}; {chosen.settings.describe(chosen.world)}; "
          f"{chosen.breakdown.device_total(chosen.micro_batch_size_used) / gib:.1f} GiB of "
          f"{chosen.usable_bytes / gib:.1f} GiB usable (plan error margin {memory_plan.PLAN_ERROR:.0%})")


def _devices() -> tuple[str, int]:
    from hooks.framework.environment import detect_device, visible_devices

    device = detect_device()
    return device, visible_devices(device)


def _copy(checkout: Path, model_id: str, model_path: Path, devices: int, memory_gb: float) -> str:
    """``copier copy`` with the smoke, as a user would, printing the smoke's verdict and memory lines."""
    from tests.copier_run import copy

    start = time.monotonic()
    done = copy(checkout, skip_tasks=False, model_id=model_id, model_path=model_path, devices_per_node=devices,
                device_memory_gb=memory_gb)
    lines = [ln.strip() for ln in done.stdout.splitlines()
             if ln.strip().startswith(("smoke[", "memory, rank", "framework smoke", "verified: unsharded",
                                       "verified: shard", "verified: world size 1"))]
    print(f"-- copy {model_id}: exit {done.returncode}, {time.monotonic() - start:.0f} s")
    print("\n".join(f"   {ln}" for ln in lines) or done.stdout[-2000:] + done.stderr[-2000:])
    log = Path(os.environ.get("MSMM_CACHE", Path.home() / ".cache" / "msmm-migrate")) / "smoke" / model_id
    times = _step_times(log / "smoke_trainer.log")
    if times:
        print(f"   step time (ms): {', '.join(f'{t:.0f}' for t in times)}")
    return done.stdout


def _step_times(log: Path) -> list[float]:
    from hooks.smoke.trainer_run import parse_iterations

    return [r["elapsed_ms"] for r in parse_iterations(log.read_text())] if log.is_file() else []


def _random_7b(tiny_dir: Path, dest: Path) -> Path:
    """The 7B shape with random bf16 weights (the tiny model's tokenizer and processor): a real folder to train."""
    import torch
    from transformers import AutoConfig, Qwen2_5_VLForConditionalGeneration

    from tests.samples import full_model_dir

    folder = full_model_dir("Qwen2.5-VL-7B-Instruct", tiny_dir, dest)
    for stale in [*folder.glob("*.safetensors"), folder / "model.safetensors.index.json", folder / "original"]:
        subprocess.run(["rm", "-rf", str(stale)], check=True)
    config = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2_5_VLForConditionalGeneration._from_config(config, torch_dtype=torch.bfloat16)
    model.save_pretrained(folder, max_shard_size="5GB")
    del model
    return folder


def _long_samples(dest: Path, samples: int = 8) -> Path:
    """~1.8k-token image/chat samples (a 1120x1120 image is 1600 merged tokens for Qwen2.5-VL)."""
    from PIL import Image

    dest.mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(samples):
        Image.new("RGB", (1120, 1120), (40 * i % 255, 90, 160)).save(dest / f"img_{i}.png")
        records.append({"messages": [{"role": "user", "content": "<image>Describe the picture in detail."},
                                     {"role": "assistant", "content": " ".join(["A plain coloured square."] * 30)}],
                        "images": [f"img_{i}.png"]})
    (dest / "data.json").write_text(json.dumps(records))
    return dest / "data.json"


def real_run(checkout: Path, model_dir: Path, model_id: str, iters: int, devices: int, work: Path) -> None:
    """Part 3b: the generated YAML on the full 7B shape for ``iters`` steps; plan total vs max_memory_allocated."""
    import yaml

    from hooks.framework.environment import framework_env
    from hooks.smoke.smoke_config import smoke_yaml
    from hooks.smoke.trainer_run import launch_trainer

    answers = yaml.safe_load((checkout / ".copier-answers" / f"{model_id}.yml").read_text())
    planned = answers.get("memory_plan") or {}
    generated = yaml.safe_load((checkout / "examples" / model_id / f"{model_id}_config.yaml").read_text())
    data = _long_samples(work / "long")
    cfg = smoke_yaml(generated, model_dir=model_dir, data_json=data, media_root=data.parent, work_dir=work,
                     iters=iters, device="cuda", nproc=devices)
    cfg["data"]["dataset_param"]["basic_parameters"]["cutoff_len"] = 2048
    yaml_path = work / "real.yaml"
    yaml_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    spec = work / "observe.json"
    spec.write_text(json.dumps({"model_dir": str(model_dir), "out": str(work / "observe")}))
    home = Path(os.environ["MINDSPEED_HOME"]) if os.environ.get("MINDSPEED_HOME") else None
    env = framework_env(checkout, home, cpu_bridges=False, observe=spec)
    run = launch_trainer(checkout, yaml_path, log_path=work / "real.log", nproc=devices, env=env, timeout_s=420)
    from hooks.smoke.trainer_run import parse_iterations

    times = [r["elapsed_ms"] for r in parse_iterations(run.log_text)]
    print(f"-- real run, 7B shape, {devices} rank(s), {iters} steps: exit {run.returncode}, {run.wall_s:.0f} s")
    total = re.search(r"\| total per device[^|]*\| ([^|]*)\|", planned.get("markdown", ""))
    print(f"   plan: {planned.get('verdict')}; predicted per device: {total.group(1).strip() if total else '?'}")
    for path in sorted((work / "observe").glob("observe_rank*.json")):
        mem = json.loads(path.read_text()).get("memory") or {}
        peak = mem.get("peak_allocated")
        print(f"   {path.stem}: max_memory_allocated {peak / (1 << 30):.1f} GiB" if peak else f"   {path.stem}: n/a")
    if times:
        print(f"   step time (ms): {', '.join(f'{t:.0f}' for t in times)}")
    if run.returncode:
        print(run.log_text[-3000:])


def device(iters: int, memory_gb: float, work: Path) -> None:
    """Part 3: copies and smokes on the devices present, then the short real run."""
    from hooks.tiny import build_tiny_model
    from tests.copier_run import mm_checkout
    from tests.samples import full_model_dir

    kind, count = _devices()
    devices = max(1, min(2, count)) if kind != "cpu" else 2
    print(f"\n== device: {kind}, {count} visible; smoke ranks {devices}")
    checkout = mm_checkout(Path(os.environ["MINDSPEED_MM_HOME"]), work)
    tiny_dir = build_tiny_model("qwen2_5_vl", work / "tiny" / "qwen2_5_vl")
    _copy(checkout, "qwen2_5_vl_demo", tiny_dir, devices, memory_gb)
    if kind == "cpu":
        return
    shaped = full_model_dir("Qwen2.5-VL-7B-Instruct", tiny_dir, work / "qwen2_5_vl_7b_cfg")
    _copy(checkout, "qwen2_5_vl_7b", shaped, devices, memory_gb)
    real_run(checkout, _random_7b(tiny_dir, work / "qwen2_5_vl_7b"), "qwen2_5_vl_7b", iters, devices, work)


def stage() -> None:
    """Here, before a device run: wheels for the machine's Python 3.12 into .whl/, the framework into .fw/."""
    wheels = ROOT / ".whl"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
           "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
           "--platform", "manylinux2014_x86_64", "--platform", "any", "-d", str(wheels), *STAGED_WHEELS]
    subprocess.run(cmd, check=True)
    for name in ("MindSpeed-MM", "MindSpeed"):
        src = Path(os.environ.get("MINDSPEED_MM_HOME" if name == "MindSpeed-MM" else "MINDSPEED_HOME", ""))
        if src.is_dir():
            subprocess.run(["rsync", "-a", "--exclude", ".git", f"{src}/", str(ROOT / ".fw" / name)], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="parts 1 and 2 only (no accelerator needed)")
    parser.add_argument("--stage", action="store_true", help="download wheels / copy the framework, then stop")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--device-memory-gb", type=float, default=141)
    parser.add_argument("--iters", type=int, default=8)
    args = parser.parse_args(argv)
    if args.stage:
        stage()
        return 0
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    with tempfile.TemporaryDirectory(prefix="msmm-device-check-") as tmp:
        work = Path(tmp)
        os.environ.setdefault("MSMM_CACHE", str(work / "cache"))
        start = time.monotonic()
        tiny(args.families.split(","), work)
        kind, count = ("cpu", 0) if args.cpu else _devices()
        plan(args.device_memory_gb, max(1, min(count, 8)) if kind != "cpu" else 1)
        if not args.cpu and os.environ.get("MINDSPEED_MM_HOME"):
            device(args.iters, args.device_memory_gb, work)
        print(f"\ndevice check: {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

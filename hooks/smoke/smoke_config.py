"""The smoke's config: the generated YAML turned into a tiny, short, CPU-or-device run, as a pure function.

``smoke_yaml`` keeps everything the migration decided (the model plugin, FSDP2 and recompute plans,
freeze, the loss, the data branch's template or dataset plugin) and changes only what a smoke must:
the tiny checkpoint, the sample data and its media root, a few iterations at a small learning rate,
the parallel sizes that fit the ranks present, attention the device runs, no checkpoint saving, a fixed seed
and the samples in file order (no shuffle), as MindSpeed-MM's system tests run: the config a smoke trains is the
run config of the model's system test (``hooks.report.st``). It only
adds keys the checkout's settings define (``places``, read by ``hooks.framework.checkout.schema``).
The launcher (``hooks.smoke.trainer_run``) writes the result and runs it.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

from hooks.smoke.training_yaml import TrainingYaml

SMOKE_LR = 1e-4
SMOKE_SEED = 42  # MindSpeed-MM's examples and system tests seed 42


def count_samples(data_json: Path) -> int:
    """Number of samples in a JSON list or JSONL file (``max_samples`` must not exceed it)."""
    text = Path(data_json).read_text(encoding="utf-8").strip()
    if text.startswith("["):
        return len(json.loads(text))
    return sum(1 for line in text.splitlines() if line.strip())


def _sub(cfg: dict[str, Any], *keys: str) -> dict[str, Any]:
    """Nested dict at ``keys``, created when absent (YAML blocks may be omitted or null)."""
    node = cfg
    for key in keys:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    return node


def _smoke_model(cfg: dict[str, Any], model_dir: str, device: str, sdpa: bool = True) -> None:
    """Point the model at the tiny checkpoint; off-NPU, flash attention (the repo's is NPU-only) becomes SDPA,
    or eager where the model does not declare SDPA (transformers refuses to build it with SDPA then).

    An ``eager`` or ``sdpa`` choice stays: the YAML holds what the model declares it can run.
    """
    model = _sub(cfg, "model")
    model["model_name_or_path"] = model_dir
    if device != "npu" and model.get("attn_implementation", "flash_attention_2") == "flash_attention_2":
        model["attn_implementation"] = "sdpa" if sdpa else "eager"


def _known(places: dict[str, list[str]], place: str, key: str) -> bool:
    """Whether the checkout's settings define ``place.key`` (no schema at hand: assume the pinned one does).

    The smoke only adds keys the framework defines: an unknown one would be ignored (and fail the settings check).
    """
    return not places or key in places.get(place, [])


def _smoke_data(cfg: dict[str, Any], data_json: Path, media_root: Path, work_dir: Path,
                places: dict[str, list[str]]) -> None:
    """Tiny local data, no worker processes (a spawned worker costs ~60 s cold), cache under work_dir."""
    dataset_param = _sub(cfg, "data", "dataset_param")
    _sub(dataset_param, "preprocess_parameters")["model_name_or_path"] = cfg["model"]["model_name_or_path"]
    basic = _sub(dataset_param, "basic_parameters")
    size = count_samples(data_json)
    basic["dataset"] = str(data_json)
    basic["dataset_dir"] = str(media_root)
    basic["cache_dir"] = str(Path(work_dir) / "hf_cache")
    basic["preprocessing_num_workers"] = None
    basic["max_samples"] = min(int(basic.get("max_samples") or size), size)
    for key in ("val_dataset", "val_max_samples", "val_rate"):
        basic.pop(key, None)
    cfg["data"].pop("val_dataset_param", None)
    loader = _sub(cfg, "data", "dataloader_param")
    loader["num_workers"] = 0
    loader["pin_memory"] = False
    loader["shuffle"] = False  # the samples in file order: the run a system test re-runs (hooks.smoke.baseline)
    if _known(places, "data.dataloader_param", "enable_preload"):
        loader["enable_preload"] = False
    for key in ("prefetch_factor", "persistent_workers"):  # invalid with num_workers 0
        loader.pop(key, None)


def _fit_size(size: Any, nproc: int) -> int:
    """Shrink a parallel degree to one the smoke's world size divides (keeps >1 where it can)."""
    size = int(size or 1)
    return math.gcd(size, nproc) if size > 1 else 1


def _smoke_parallel(cfg: dict[str, Any], device: str, nproc: int, places: dict[str, list[str]]) -> None:
    """Keep the plans; fit the degrees to ``nproc``; drop what needs an accelerator off it.

    Pinned CPU offload needs CUDA/NPU, ring attention and NPU fused EP need NPU; on CPU the mixed
    precision computes in fp32 (``hooks.smoke.reference`` compares the first steps with a reference).
    """
    parallel = _sub(cfg, "parallel")
    for key in ("data_parallel_size", "expert_fully_shard_parallel_size"):
        parallel.pop(key, None)
    parallel["fully_shard_parallel_size"] = "auto"
    for key in ("ulysses_parallel_size", "expert_parallel_size", "ring_attention_size"):
        if key in parallel:
            parallel[key] = _fit_size(parallel[key], nproc)
    if device != "npu":
        parallel["ring_attention_size"] = 1
        if isinstance(parallel.get("ep_plan"), dict) and _known(places, "parallel.ep_plan", "use_npu_fused_ops"):
            parallel["ep_plan"]["use_npu_fused_ops"] = False
    fsdp_plan = parallel.get("fsdp_plan")
    if device == "cpu" and isinstance(fsdp_plan, dict) and fsdp_plan.get("cpu_offload"):
        fsdp_plan["cpu_offload"] = False
    if device == "cpu" and isinstance(fsdp_plan, dict) and fsdp_plan.get("param_dtype") in ("bf16", "fp16"):
        # CPUs emulate bf16; and its rounding of each step's parameters (a 1-ulp fp32 difference in an update
        # flips a bf16 value) makes steps past the first incomparable with a reference: fp32 there.
        fsdp_plan["param_dtype"] = "fp32"


def _smoke_features(cfg: dict[str, Any], device: str) -> None:
    """Keep features, except activation offload on CPU: it needs device streams (host == device there)."""
    features = cfg.get("features")
    if device == "cpu" and isinstance(features, dict) and features.get("enable_activation_offload"):
        features["enable_activation_offload"] = False


def _smoke_training(cfg: dict[str, Any], model_dir: str, iters: int, places: dict[str, list[str]],
                    model_path: str | None = None) -> None:
    """Few iterations, no saving, and a constant non-zero LR from step 1 so the loss must move."""
    training = _sub(cfg, "training")
    user_load = training.pop("load", None)
    for key in ("save", "train_epochs"):
        training.pop(key, None)
    training.setdefault("seed", SMOKE_SEED)  # the generated YAML's (42); a system test needs one
    training.update(
        train_iters=iters,
        log_interval=1,
        micro_batch_size=1,
        gradient_accumulation_steps=1,
        lr=SMOKE_LR,
        lr_warmup_ratio=0.0,
        lr_decay_style="constant",
    )
    if _known(places, "training", "val_interval"):
        training["val_interval"] = 0
    for key in ("lr_min", "lr_start"):
        training[key] = min(float(training.get(key) or 0.0), SMOKE_LR)
    if training.get("init_model_with_meta_device"):
        # The model folder becomes the shrunk copy; a load elsewhere stays, and the weight check judges it.
        load = model_dir if user_load in (None, model_path) else user_load
        training.update(load=load, no_load_optim=True, no_load_rng=True)
        if _known(places, "training", "load_format"):
            training["load_format"] = "hf"


def _smoke_tools(cfg: dict[str, Any]) -> None:
    """Profilers off: they only act on NPU and would write dumps into the MM tree."""
    tools = _sub(cfg, "tools")
    for key in ("profile", "memory_profile"):
        if isinstance(tools.get(key), dict):
            tools[key]["enable"] = False


def smoke_yaml(
    generated_yaml: dict[str, Any],
    *,
    model_dir: Path,
    data_json: Path,
    media_root: Path,
    work_dir: Path,
    iters: int = 5,
    device: str,
    nproc: int = 2,
    sdpa: bool = True,
    places: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Derive the smoke config from a generated one: same plans/freeze/features, tiny everything else.

    ``places``: the checkout's settings schema (``hooks.framework.checkout.schema``); keys the smoke adds
    are added only where it defines them.

    Exceptions to "same": settings that cannot work on the smoke's device
    (``cpu_offload``, activation offload and preload on CPU, NPU fused EP and
    ring attention off-NPU) and the topology sizes, which follow ``nproc``.

    The schema rejects ``training.save: null``/``load: null`` (they must be
    absent). With meta-device init, weights only arrive through
    ``training.load`` (an HF dir needs ``no_load_optim``/``no_load_rng``);
    otherwise the model is built with ``from_pretrained(model_dir)``.
    """
    cfg = copy.deepcopy(generated_yaml)
    model_path = TrainingYaml.of(cfg).model_path or None
    _smoke_model(cfg, str(model_dir), device, sdpa)
    _smoke_data(cfg, Path(data_json), Path(media_root), Path(work_dir), places or {})
    _smoke_parallel(cfg, device, nproc, places or {})
    _smoke_features(cfg, device)
    _smoke_training(cfg, str(model_dir), iters, places or {}, model_path)
    _smoke_tools(cfg)
    return cfg


# --- the framework smoke --------------------------------------------------------------------------

"""Tests for the framework smoke: log parsing and config derivation (tier 1), a real run (tier 2)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hooks.framework.environment import BRIDGES_DIR, framework_env
from hooks.smoke import trainer_run
from hooks.smoke.smoke_config import smoke_yaml
from hooks.smoke.trainer_run import first_traceback, parse_iterations
from tests.samples import QWEN2_5_VL_PLAN

PREFIX = "[Rank 0 | Local Rank 0] 2026-12-02 10:00:00,000 INFO [mindspeed_mm.fsdp.train.train_engine:46] => "


def _line(it: int, loss: str, grad: str | None = "1.250", lr: str = "1.000000E-04") -> str:
    """A log line built with the engine's own format strings (contract section 7.6)."""
    msg = (
        f" [2026-12-02 10:00:0{it}] iteration {it:8d}/{5:8d} | consumed samples: {2 * it:12d} |"
        f" elapsed time per iteration (ms): {312.4:.1f} | learning rate: {lr} |"
        f" global batch size: {2:5d} | loss: {loss} |"
    )
    if grad is not None:
        msg += f" grad norm: {grad} |"
    return PREFIX + msg


def test_parse_iterations_reads_all_fields() -> None:
    text = "\n".join(["noise", _line(1, "6.260000E+00"), "[Rank 1] other", _line(2, "6.280000E+00")])
    records = parse_iterations(text)
    assert [r["iteration"] for r in records] == [1, 2]
    first = records[0]
    assert first["train_iters"] == 5
    assert first["consumed_samples"] == 2
    assert first["elapsed_ms"] == pytest.approx(312.4)
    assert first["lr"] == pytest.approx(1e-4)
    assert first["gbs"] == 2
    assert first["loss"] == pytest.approx(6.26)
    assert first["grad_norm"] == pytest.approx(1.25)


def test_parse_iterations_nan_and_inf() -> None:
    records = parse_iterations("\n".join([_line(1, "NAN", "nan"), _line(2, "INF", "inf")]))
    assert math.isnan(records[0]["loss"]) and math.isnan(records[0]["grad_norm"])
    assert math.isinf(records[1]["loss"]) and math.isinf(records[1]["grad_norm"])


def test_parse_iterations_extra_losses_and_missing_grad_norm() -> None:
    line = (
        _line(3, "2.000000E+00", grad=None).rstrip() + " mtp_0 loss: 1.500000E+00 | aux loss: 3.000000E-02 |"
    )
    (record,) = parse_iterations(line)
    assert record["grad_norm"] is None
    assert record["mtp_0 loss"] == pytest.approx(1.5)
    assert record["aux loss"] == pytest.approx(0.03)


def test_parse_iterations_ignores_validation_lines() -> None:
    text = " [ts] ** validation after iteration 2 ** | validation steps: 1 | validation loss: 1.0E+00 |"
    assert parse_iterations(text) == []


def test_first_error_prefers_root_cause() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "KeyError: \"ID 'qwen2_5_vl' is not registered.\"",
        "Traceback (most recent call last):",
        "RuntimeError: Connection closed by peer",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    ]
    assert first_traceback("\n".join(lines)) == "KeyError: \"ID 'qwen2_5_vl' is not registered.\""


def _generated() -> dict:
    """A generated branch-A config, shaped like examples/qwen3vl/qwen3vl_30B_config_v1.yaml."""
    return {
        "parallel": {
            "fully_shard_parallel_size": 8,
            "data_parallel_size": 8,
            "fsdp_plan": {"apply_modules": ["model.visual.blocks.{*}", "lm_head"], "param_dtype": "bf16"},
            "ep_plan": {"apply_modules": []},
        },
        "data": {
            "dataset_param": {
                "dataset_type": "huggingface",
                "preprocess_parameters": {"model_name_or_path": "/big/model"},
                "basic_parameters": {
                    "template": "qwen2vl",
                    "dataset": "/big/data.json",
                    "dataset_dir": "/big",
                    "preprocessing_num_workers": 16,
                    "max_samples": 10000,
                    "val_dataset": "/big/val.json",
                },
            },
            "dataloader_param": {"pin_memory": True, "num_workers": 8, "prefetch_factor": 2},
        },
        "model": {
            "model_id": "qwen2_5_vl",
            "model_name_or_path": "/big/model",
            "attn_implementation": "flash_attention_2",
            "freeze": ["model.visual"],
        },
        "features": {"recompute": True, "loss_cfg": {"loss_type": "default"}},
        "training": {
            "lr": 1e-5,
            "lr_min": 1e-6,
            "lr_warmup_ratio": 0.1,
            "lr_decay_style": "cosine",
            "micro_batch_size": 4,
            "train_iters": 10000,
            "init_model_with_meta_device": True,
            "save": "/ckpt",
            "plugin": ["mindspeed_mm/fsdp/models/qwen2_5_vl", "mindspeed_mm/fsdp/data/datasets/huggingface"],
        },
        "tools": {"profile": {"enable": True}},
    }


def _data(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "data.json"
    path.write_text(json.dumps([{"messages": [], "images": []}] * n))
    return path


def _smoke(tmp_path: Path, generated: dict, device: str = "cpu") -> dict:
    return smoke_yaml(
        generated,
        model_dir=tmp_path / "tiny",
        data_json=_data(tmp_path),
        media_root=tmp_path,
        work_dir=tmp_path / "work",
        iters=5,
        device=device,
    )


def test_smoke_yaml_keeps_plan_and_shrinks_everything_else(tmp_path: Path) -> None:
    generated = _generated()
    cfg = _smoke(tmp_path, generated)
    assert generated["training"]["train_iters"] == 10000, "input must not be mutated"
    # The plan stays; on CPU the mixed precision computes in fp32 (the reference's steps stay comparable).
    assert cfg["parallel"]["fsdp_plan"] == {**generated["parallel"]["fsdp_plan"], "param_dtype": "fp32"}
    assert _smoke(tmp_path, generated, device="npu")["parallel"]["fsdp_plan"]["param_dtype"] == "bf16"
    assert cfg["model"]["freeze"] == ["model.visual"]
    assert cfg["features"] == generated["features"]
    assert cfg["training"]["plugin"] == generated["training"]["plugin"]
    assert cfg["parallel"]["fully_shard_parallel_size"] == "auto"
    assert "data_parallel_size" not in cfg["parallel"]
    tiny = str(tmp_path / "tiny")
    assert cfg["model"]["model_name_or_path"] == tiny
    assert cfg["model"]["attn_implementation"] == "sdpa"
    assert cfg["data"]["dataset_param"]["preprocess_parameters"]["model_name_or_path"] == tiny
    basic = cfg["data"]["dataset_param"]["basic_parameters"]
    assert basic["dataset"] == str(tmp_path / "data.json")
    assert basic["dataset_dir"] == str(tmp_path)
    assert basic["preprocessing_num_workers"] is None
    assert basic["max_samples"] == 3
    assert basic["cache_dir"].startswith(str(tmp_path / "work"))
    assert "val_dataset" not in basic
    loader = cfg["data"]["dataloader_param"]
    assert loader["num_workers"] == 0 and loader["pin_memory"] is False
    assert "prefetch_factor" not in loader
    assert cfg["tools"]["profile"]["enable"] is False


def test_smoke_yaml_fits_degrees_and_drops_accelerator_only_settings(tmp_path: Path) -> None:
    generated = _generated()
    generated["parallel"].update(expert_parallel_size=8, ulysses_parallel_size=1, ring_attention_size=2)
    generated["parallel"]["fsdp_plan"]["cpu_offload"] = True
    generated["features"]["enable_activation_offload"] = True
    cfg = _smoke(tmp_path, generated)
    parallel = cfg["parallel"]
    assert parallel["expert_parallel_size"] == 2
    assert parallel["ulysses_parallel_size"] == 1 and parallel["ring_attention_size"] == 1
    assert parallel["ep_plan"]["use_npu_fused_ops"] is False
    assert parallel["fsdp_plan"]["cpu_offload"] is False
    assert cfg["features"]["enable_activation_offload"] is False
    on_npu = _smoke(tmp_path, generated, device="npu")
    assert on_npu["parallel"]["ring_attention_size"] == 2
    assert on_npu["features"]["enable_activation_offload"] is True


def test_smoke_yaml_training_block(tmp_path: Path) -> None:
    training = _smoke(tmp_path, _generated())["training"]
    assert training["train_iters"] == 5
    assert training["log_interval"] == 1
    assert training["micro_batch_size"] == 1
    assert "save" not in training
    assert training["lr"] == pytest.approx(1e-4)
    assert training["lr_warmup_ratio"] == 0.0
    assert training["lr_decay_style"] == "constant"
    assert training["lr_min"] <= training["lr"]
    assert training["load"] == str(tmp_path / "tiny")
    assert training["no_load_optim"] is True and training["no_load_rng"] is True


def test_smoke_yaml_without_meta_init_has_no_load(tmp_path: Path) -> None:
    generated = _generated()
    generated["training"]["init_model_with_meta_device"] = False
    generated["training"]["load"] = "/old/ckpt"
    assert "load" not in _smoke(tmp_path, generated)["training"]


def test_smoke_yaml_keeps_attention_on_npu(tmp_path: Path) -> None:
    assert _smoke(tmp_path, _generated(), device="npu")["model"]["attn_implementation"] == "flash_attention_2"


def test_smoke_yaml_falls_back_to_eager_without_sdpa(tmp_path: Path) -> None:
    """Off-NPU, flash attention becomes SDPA, or eager for a class that does not declare SDPA."""
    cfg = smoke_yaml(_generated(), model_dir=tmp_path / "tiny", data_json=_data(tmp_path), media_root=tmp_path,
                     work_dir=tmp_path / "work", iters=5, device="cpu", sdpa=False)
    assert cfg["model"]["attn_implementation"] == "eager"


def test_smoke_yaml_max_samples_capped_by_dataset(tmp_path: Path) -> None:
    generated = _generated()
    generated["data"]["dataset_param"]["basic_parameters"]["max_samples"] = 2
    assert _smoke(tmp_path, generated)["data"]["dataset_param"]["basic_parameters"]["max_samples"] == 2


def test_framework_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    env = framework_env(tmp_path / "mm", tmp_path / "ms", cpu_bridges=True)
    assert env["NON_MEGATRON"] == "true" and env["MSMM_CPU_BRIDGES"] == "1"
    assert env["HF_HUB_OFFLINE"] == env["HF_DATASETS_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1"
    parts = env["PYTHONPATH"].split(os.pathsep)
    assert parts == [
        str(BRIDGES_DIR),
        str((tmp_path / "mm").resolve()),
        str((tmp_path / "ms").resolve()),
    ]
    assert (BRIDGES_DIR / "sitecustomize.py").is_file()


def test_framework_env_without_bridges_or_mindspeed_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MSMM_CPU_BRIDGES", "1")
    monkeypatch.setenv("PYTHONPATH", "/keep")
    env = framework_env(tmp_path / "mm", None, cpu_bridges=False)
    assert "MSMM_CPU_BRIDGES" not in env and env["MSMM_FULLY_SHARD_STANDIN"] == "1"  # accelerators: bridge 2 only
    assert env["PYTHONPATH"].split(os.pathsep) == [str(BRIDGES_DIR), str((tmp_path / "mm").resolve()), "/keep"]


# --- tier 2: the real trainer ---------------------------------------------------------------------

PLUGIN_SOURCE = '''"""Hand-made branch-A plugin for the tier-2 smoke test."""
from transformers import Qwen2_5_VLForConditionalGeneration

from mindspeed_mm.fsdp.utils.register import model_register


@model_register.register("qwen2_5_vl")
class Qwen2_5_VLForTrain(Qwen2_5_VLForConditionalGeneration):
    accepts_loss_kwargs = False
'''


def branch_a_yaml(plugin_dir: str) -> dict:
    """The qwen3vl v1 example reshaped for Qwen2.5-VL (template qwen2vl, collator qwen3vl)."""
    return {
        "parallel": {
            "tensor_parallel_size": 1,
            "fully_shard_parallel_size": "auto",
            "fsdp_plan": {
                "apply_modules": list(QWEN2_5_VL_PLAN),
                "param_dtype": "bf16",
                "reduce_dtype": "fp32",
            },
        },
        "data": {
            "dataset_param": {
                "dataset_type": "huggingface",
                "attr": {
                    "images": "images",
                    "messages": "messages",
                    "role_tag": "role",
                    "content_tag": "content",
                    "user_tag": "user",
                    "assistant_tag": "assistant",
                },
                "preprocess_parameters": {
                    "model_name_or_path": "/placeholder",
                    "image_max_pixels": 262144,
                    "image_min_pixels": 1024,
                },
                "basic_parameters": {
                    "cutoff_len": 1024,
                    "template": "qwen2vl",
                    "dataset_dir": "/placeholder",
                    "dataset": "/placeholder.json",
                    "preprocessing_num_workers": 16,
                    "max_samples": 10000,
                },
            },
            "dataloader_param": {
                "pin_memory": True,
                "shuffle": True,
                "dataloader_mode": "sampler",
                "drop_last": True,
                "sampler_type": "BaseRandomBatchSampler",
                "num_workers": 8,
                "collate_param": {"collator_id": "qwen3vl", "ignore_pad_token_for_loss": True},
            },
        },
        "model": {
            "model_id": "qwen2_5_vl",
            "model_name_or_path": "/placeholder",
            "attn_implementation": "flash_attention_2",
            "freeze": ["model.visual"],
        },
        "features": {
            "loss_cfg": {"loss_type": "default"},
            "recompute": True,
            "recompute_plan": {
                "apply_modules": ["model.visual.blocks.{*}", "model.language_model.layers.{*}"]
            },
        },
        "training": {
            "micro_batch_size": 1,
            "seed": 42,
            "lr": 1.0e-5,
            "lr_decay_style": "cosine",
            "lr_warmup_ratio": 0.1,
            "train_iters": 10000,
            "clip_grad": 0.0,
            "init_model_with_meta_device": True,
            "optimizer": "adamw",
            "plugin": [plugin_dir, "mindspeed_mm/fsdp/data/datasets/huggingface"],
        },
    }


def copy_mm_tree(mm_home: Path, dest: Path) -> Path:
    """Copy just the ``mindspeed_mm`` package (and MindSpeed core if it lives inside) so nothing is
    written into the user's checkout."""
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(mm_home / "mindspeed_mm", dest / "mindspeed_mm", ignore=ignore)
    if (mm_home / "mindspeed").is_dir():
        shutil.copytree(mm_home / "mindspeed", dest / "mindspeed", ignore=ignore)
    return dest


@pytest.mark.tier2
def test_framework_smoke_qwen2_5_vl_branch_a(
    tmp_path: Path, mm_home: Path, tiny_models, demo_dataset: Path
) -> None:
    """A hand-made branch-A scaffold (upstream class + qwen2vl template) trains 5 steps on 2 ranks."""
    import yaml

    work_mm = copy_mm_tree(mm_home, tmp_path / "mm")
    plugin_dir = work_mm / "mindspeed_mm/fsdp/models/qwen2_5_vl"
    plugin_dir.mkdir()
    (plugin_dir / "modeling_qwen2_5_vl.py").write_text(PLUGIN_SOURCE)
    generated = tmp_path / "qwen2_5_vl_config.yaml"
    generated.write_text(yaml.safe_dump(branch_a_yaml("mindspeed_mm/fsdp/models/qwen2_5_vl")))
    mindspeed = os.environ.get("MINDSPEED_HOME")
    result = trainer_run.run_framework_smoke(
        work_mm,
        generated,
        model_dir=tiny_models("qwen2_5_vl"),
        data_json=demo_dataset,
        media_root=demo_dataset.parent,
        work_dir=tmp_path / "work",
        iters=5,
        nproc=2,
        python=sys.executable,
        mindspeed_home=Path(mindspeed) if mindspeed else None,
    )
    assert result.passed, result.summary() + "\n" + result.log_tail
    assert len(result.losses) == 5 and all(math.isfinite(x) for x in result.losses)
    assert len(result.peak_rss_mb) == 2


# --- the CPU bridges, against a fake framework tree (no MindSpeed needed) ---------------------------

FAKE_DEVICE = """import sys, types
import torch
IS_CUDA_AVAILABLE = False
IS_NPU_AVAILABLE = False
def get_dist_comm_backend(cpu=False):
    raise RuntimeError("no backend")
def set_accelerator_compatible(fallback_module=None):
    proxy = types.ModuleType("torch.accelerator")  # as the real one: torch.accelerator's names, copied
    for name in [n for n in dir(torch.accelerator) if not n.startswith("__")]:
        setattr(proxy, name, getattr(torch.accelerator, name))
    torch.accelerator = proxy
    sys.modules["torch.accelerator"] = proxy
"""

BRIDGE_PROBE = """
import torch, torch.distributed as dist
from mindspeed_mm.fsdp.ops.fully_shard.fully_shard import apply_fully_shard_patch, fully_shard
apply_fully_shard_patch()
from mindspeed_mm.fsdp.utils.device import get_dist_comm_backend, set_accelerator_compatible
set_accelerator_compatible(torch.cpu)
torch.accelerator.set_device_index(1)
torch.accelerator.manual_seed(1)
torch.accelerator.manual_seed_all(1)
torch.cpu.empty_cache()
import torch.distributed.fsdp as fsdp
print(get_dist_comm_backend(), get_dist_comm_backend(cpu=True), fsdp.fully_shard is fully_shard,
      getattr(dist.init_process_group, "_msmm_bridged", False), getattr(dist.reduce_scatter_tensor, "_msmm_bridged", 0))
import mindspeed_mm.fsdp.distributed.expert_parallel.ep_dispatcher  # the EP bridges
counts = torch.histc(torch.tensor([0, 1, 1, 3]), bins=4, min=0, max=4)
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
gathered = torch.zeros(1, 4)
dist.all_gather_into_tensor(gathered, torch.arange(4.0))
averaged = torch.zeros(2)
dist.reduce_scatter_tensor(averaged, torch.tensor([2.0, 4.0]), op=dist.ReduceOp.AVG)
print(torch.accelerator.current_device_index(), counts.dtype, counts.tolist(), gathered.tolist(), averaged.tolist())
dist.destroy_process_group()  # else gloo's threads may abort the interpreter at exit
"""


def _fake_framework(root: Path) -> Path:
    """A ``mindspeed_mm`` tree whose fully_shard module fails like the real one on new torch."""
    (root / "mindspeed_mm/fsdp/utils").mkdir(parents=True)
    (root / "mindspeed_mm/fsdp/ops/fully_shard").mkdir(parents=True)
    (root / "mindspeed_mm/fsdp/utils/device.py").write_text(FAKE_DEVICE)
    (root / "mindspeed_mm/fsdp/distributed/expert_parallel").mkdir(parents=True)
    (root / "mindspeed_mm/fsdp/distributed/expert_parallel/ep_dispatcher.py").write_text("import torch\n")
    (root / "mindspeed_mm/fsdp/ops/fully_shard/fully_shard.py").write_text(
        "from torch.distributed.fsdp._fully_shard._no_such_module import X\n"
    )
    return root


def _probe(root: Path, *, bridges: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BRIDGES_DIR), str(root)]))
    env.pop("MSMM_CPU_BRIDGES", None)
    if bridges:
        env["MSMM_CPU_BRIDGES"] = "1"
    return subprocess.run(
        [sys.executable, "-c", BRIDGE_PROBE], env=env, capture_output=True, text=True, timeout=120, cwd=root
    )


def _require_cpu_only_new_torch() -> None:
    """The bridges deliberately do nothing with CUDA or on the torch versions MindSpeed-MM supports."""
    import torch

    if torch.cuda.is_available() or any(v in torch.__version__ for v in ("2.7.1", "2.9.0")):
        pytest.skip("bridges are inactive with CUDA or torch 2.7.1/2.9.0")


def test_cpu_bridges_patch_framework_modules_after_import(tmp_path: Path) -> None:
    _require_cpu_only_new_torch()
    root = _fake_framework(tmp_path)
    done = _probe(root, bridges=True)
    assert done.returncode == 0, done.stderr
    bridged, ep = done.stdout.splitlines()
    assert bridged.split() == ["gloo", "gloo", "True", "True", "True"]  # reduce_scatter AVG: torch 2.7.1's gloo sums
    assert ep == "cpu torch.int64 [1, 2, 0, 1] [[0.0, 1.0, 2.0, 3.0]] [2.0, 4.0]"  # EP: histc, (world, n) gather


def test_cpu_bridges_are_off_without_the_flag(tmp_path: Path) -> None:
    _require_cpu_only_new_torch()
    done = _probe(_fake_framework(tmp_path), bridges=False)
    assert done.returncode != 0
    assert "_no_such_module" in done.stderr


def test_cpu_bridges_make_torchvision_importable() -> None:
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        pytest.skip("torchvision not installed")
    env = dict(os.environ, PYTHONPATH=str(BRIDGES_DIR), MSMM_CPU_BRIDGES="1")
    code = "import torchvision.transforms.v2, torchvision; print(torchvision.__version__)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

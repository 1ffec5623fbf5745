"""Where and how the real MindSpeed-MM framework runs: checkout, MindSpeed core, device, environment.

Shared by everything that starts framework code (the smoke's trainer launch,
the data-parity check), so that each of them decides "can the framework run here, and with what"
the same way, and none of them has to import another's launch code to find out.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path

BRIDGES_DIR = Path(__file__).resolve().parent.parent / "smoke" / "bridges"
OBSERVER_DIR = Path(__file__).resolve().parent.parent / "smoke" / "observer"
TRAINER_ENTRY = "mindspeed_mm/fsdp/train/trainer.py"


def is_mindspeed_mm_checkout(dest: Path) -> bool:
    return (dest / "mindspeed_mm" / "fsdp" / "train" / "trainer.py").is_file()


def find_mindspeed(dest: Path) -> tuple[bool, Path | None]:
    """(found, path to put on PYTHONPATH): MINDSPEED_HOME, a copy inside the checkout, or installed."""
    home = os.environ.get("MINDSPEED_HOME")
    if home and (Path(home) / "mindspeed").is_dir():
        return True, Path(home)
    if (dest / "mindspeed").is_dir() or importlib.util.find_spec("mindspeed") is not None:
        return True, None
    return False, None


def framework_unavailable(dest: Path) -> tuple[str, Path | None]:
    """Why the real framework cannot run at ``dest`` ("" when it can), and MindSpeed core's path to add."""
    found, mindspeed_home = find_mindspeed(dest)
    if not is_mindspeed_mm_checkout(dest):
        return "destination is not a MindSpeed-MM checkout", None
    if not found:
        return "MindSpeed core not found (set MINDSPEED_HOME or copy mindspeed/ into the checkout)", None
    return "", mindspeed_home


def framework_env(mm_home: Path, mindspeed_home: Path | None, *, cpu_bridges: bool,
                  observe: Path | None = None) -> dict[str, str]:
    """Environment for the trainer processes (a full copy of ours plus the framework's needs).

    ``NON_MEGATRON=true`` keeps ``mindspeed_mm`` from importing Megatron; the
    offline flags keep a smoke from touching the network; the MM root goes on
    ``PYTHONPATH`` because torchrun puts the script's directory, not the cwd,
    at ``sys.path[0]`` and many ``mindspeed_mm`` subdirectories are namespace
    packages that only resolve from the root. Off CPU only the bridges' ``fully_shard`` stand-in is on
    (``MSMM_FULLY_SHARD_STANDIN``): it acts only where the framework's patch refuses the interpreter's
    torch, so the data pre-flight (same environment) passes exactly where the smoke runs.
    """
    env = dict(os.environ)
    env.update(
        NON_MEGATRON="true",
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONUNBUFFERED="1",
    )
    paths = [str(BRIDGES_DIR)]  # all bridges on CPU; elsewhere the fully_shard stand-in alone (see there)
    if observe is not None:  # hooks/smoke/observer: units, weights and shard sizes from inside the ranks
        paths += [str(OBSERVER_DIR), str(OBSERVER_DIR.parents[2])]
        env["MSMM_OBSERVE"] = str(observe)
    else:
        env.pop("MSMM_OBSERVE", None)
    paths.append(str(Path(mm_home).resolve()))
    if mindspeed_home is not None:  # explicit wins; a copy inside the MM root still comes first
        paths.append(str(Path(mindspeed_home).resolve()))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if cpu_bridges:
        env["MSMM_CPU_BRIDGES"] = "1"
        env.pop("MSMM_FULLY_SHARD_STANDIN", None)
    else:
        env.pop("MSMM_CPU_BRIDGES", None)
        env["MSMM_FULLY_SHARD_STANDIN"] = "1"
    return env


def _npu_available() -> bool:
    """torch_npu imports and sees a device (a broken torch_npu counts as "no NPU")."""
    if importlib.util.find_spec("torch_npu") is None:
        return False
    try:
        import torch
        import torch_npu  # noqa: F401

        return bool(torch.npu.is_available())
    except Exception:  # noqa: BLE001
        return False


def no_accelerator_installed() -> bool:
    """No torch_npu and no NVIDIA driver: certainly CPU, decided without importing torch (~2 s)."""
    nvidia = any(os.path.exists(p) for p in ("/proc/driver/nvidia", "/dev/nvidiactl"))
    return importlib.util.find_spec("torch_npu") is None and not nvidia


def detect_device() -> str:
    """The device family the trainer will pick: "npu", "cuda" or "cpu"."""
    if no_accelerator_installed():
        return "cpu"
    import torch

    if _npu_available():
        return "npu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def smoke_ranks(device: str, visible: int) -> int:
    """How many ranks a smoke launches: 2 gloo ranks on CPU (processes share the host); on CUDA/NPU one per
    visible device, at most 2 (two ranks exercise sharding; a one-device host gets one rank, not a second
    asking for a device it does not have)."""
    if device == "cpu":
        return 2
    return max(1, min(2, visible))


def visible_devices(device: str) -> int:
    """Devices of ``device``'s kind this process sees (``CUDA_VISIBLE_DEVICES`` / ``ASCEND_RT_VISIBLE_DEVICES``)."""
    if device == "cpu":
        return 0
    import torch

    if device == "npu":
        import torch_npu  # noqa: F401

        return int(torch.npu.device_count())
    return int(torch.cuda.device_count())


def world_size_one_note(nproc: int) -> str:
    """What a one-rank smoke cannot show, for the report."""
    if nproc != 1:
        return ""
    return ("one rank (one device visible): MindSpeed-MM runs DDP at fully_shard_parallel_size 1 without meta "
            "init, so FSDP2 units, sharding and expert parallel are not exercised here; the shard check compares "
            "the unsharded bf16 parameters, grads and AdamW states instead (2 ranks on CPU or a 2-device host "
            "exercise them)")


def free_port() -> int:
    """A TCP port that was free a moment ago, so parallel smokes do not collide on 29500."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])



"""Run-time bridges that let the real MindSpeed-MM trainer run on a CPU-only machine.

Put this directory first on ``PYTHONPATH`` and set ``MSMM_CPU_BRIDGES=1``
(``hooks.smoke.trainer_run.framework_env`` does both). On CUDA/NPU hosts ``framework_env`` sets
``MSMM_FULLY_SHARD_STANDIN=1`` instead: only bridge 2 is installed there, so a torch the framework's
``fully_shard`` patch refuses still gets a smoke, with torch's own ``fully_shard`` as the labelled stand-in;
every other bridge stays CPU-only. It has to be ``sitecustomize``
rather than a wrapper script because ``datasets`` starts its preprocessing
workers with "spawn", and those fresh interpreters need the same bridges.

Nothing is imported eagerly: a ``sys.meta_path`` finder patches the few
framework modules right after they are imported (no framework file is edited),
and each bridge checks for itself that no CUDA/NPU is present, so on real
accelerators everything behaves exactly as without this file. The module is
self-contained on purpose: spawned workers cannot rely on ``hooks`` being
importable.

Bridges (numbered as in the project's CPU-trainer notes):
1. ``torchvision._meta_registrations`` left empty when the CUDA-only build fails to register.
2. ``mindspeed_mm.fsdp.ops.fully_shard.fully_shard`` replaced when torch is not 2.7.1/2.9.0.
3. ``get_dist_comm_backend`` -> "gloo"; ``torch.accelerator`` per-device calls are no-ops.
4. ``init_process_group`` drops a CPU ``device_id``.
6. ``torch.cpu.empty_cache`` no-op.
7. Expert parallel on gloo, once the EP dispatcher is imported: ``torch.histc`` counts integer tensors
   on CPU, and ``all_gather_into_tensor`` gathers into a multi-dimensional output.
8. ``reduce_scatter_tensor`` averages on gloo when asked to (torch 2.7.1's gloo sums for ``ReduceOp.AVG``).
(5, a bug in the in-repo Qwen3-VL-MoE experts, is not bridged: upstream classes do not hit it.)
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Callable
from typing import Any

ENV_FLAG = "MSMM_CPU_BRIDGES"
ENV_STANDIN = "MSMM_FULLY_SHARD_STANDIN"  # accelerator hosts: bridge 2 only
_FULLY_SHARD_MODULE = "mindspeed_mm.fsdp.ops.fully_shard.fully_shard"
_DEVICE_MODULE = "mindspeed_mm.fsdp.utils.device"
_TV_META_MODULE = "torchvision._meta_registrations"
_EP_DISPATCHER_MODULE = "mindspeed_mm.fsdp.distributed.expert_parallel.ep_dispatcher"
_PATCHED_TORCH_VERSIONS = ("2.7.1", "2.9.0")


@functools.cache
def _accelerator_present() -> bool:
    """True when CUDA or torch_npu is usable; bridges must then stay out of the way."""
    import torch

    if torch.cuda.is_available():
        return True
    if importlib.util.find_spec("torch_npu") is None:
        return False
    try:
        import torch_npu  # noqa: F401

        return True
    except Exception:  # noqa: BLE001 - mirrors mindspeed_mm.fsdp.utils.device's own probe
        return False


def _replace_once(owner: Any, name: str, bridged: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Replace ``owner.name`` by ``bridged(original)`` (marked ``_msmm_bridged``) unless already replaced."""
    original = getattr(owner, name)
    if getattr(original, "_msmm_bridged", False):
        return False
    replacement = functools.wraps(original)(bridged(original))
    replacement._msmm_bridged = True  # type: ignore[attr-defined]
    setattr(owner, name, replacement)
    return True


# --- bridge 1: torchvision ------------------------------------------------------------------------


def _exec_meta_registrations_or_empty(module: types.ModuleType, real_exec: Callable[[Any], None]) -> None:
    """Run torchvision's meta registrations; leave the module empty when they fail.

    The only torchvision matching a CPU torch 2.13 is a CUDA build whose
    ``_meta_registrations`` registers fake kernels for ops that do not exist
    without CUDA ("operator torchvision::nms does not exist"), so
    ``import torchvision`` fails. The Qwen fast image/video processors only need
    the pure-Python ``transforms.v2``; without torchvision MindSpeed-MM's
    ``load_tokenizer`` silently drops the processor. Where the real module
    loads, it is kept untouched.
    """
    try:
        real_exec(module)
    except Exception:  # noqa: BLE001 - any failure here means "this build needs CUDA ops"
        for key in [k for k in vars(module) if not k.startswith("__")]:
            delattr(module, key)


# --- bridge 2: fully_shard patch ------------------------------------------------------------------


def _needs_fully_shard_stub() -> bool:
    """The real module only supports torch 2.7.1/2.9.0 and imports FSDP internals newer torch lacks.

    On every device: an accelerator host whose torch the patch refuses (torch 2.11 on an H200) would
    otherwise have no smoke at all; where the patch accepts the interpreter, the real one runs.
    """
    import torch

    return not any(v in torch.__version__ for v in _PATCHED_TORCH_VERSIONS)


def _tolerant_fully_shard(native: Callable[..., Any]) -> Callable[..., Any]:
    """Native ``fully_shard`` that accepts and ignores MindSpeed-MM's ``hook_module=`` argument."""

    @functools.wraps(native)
    def fully_shard(module: Any, *args: Any, hook_module: Any = None, **kwargs: Any) -> Any:
        return native(module, *args, **kwargs)

    return fully_shard


def _fill_fully_shard_stub(module: types.ModuleType) -> None:
    """Provide the names importers use: ``apply_fully_shard_patch`` (ops/__init__) and ``fully_shard``.

    The real ``apply_fully_shard_patch`` raises on other torch versions and is
    applied at ``import mindspeed_mm.fsdp`` when ``NON_MEGATRON=true``; it makes
    ``torch.distributed.fsdp.fully_shard`` accept ``hook_module=``, which
    ``fully_shard_parallel`` passes when ``fsdp_plan.hook_modules`` is set. The
    stand-in keeps torch's native ``fully_shard`` and only drops that argument;
    the cost is that hook modules, prefetch and multi-stream extras are not
    exercised by a CPU smoke.
    """
    import torch.distributed.fsdp as fsdp

    tolerant = _tolerant_fully_shard(fsdp.fully_shard)

    def apply_fully_shard_patch() -> None:
        """Let ``fully_shard`` take ``hook_module=`` (ignored); otherwise torch's native one."""
        fsdp.fully_shard = tolerant

    module.apply_fully_shard_patch = apply_fully_shard_patch
    module.fully_shard = tolerant
    module.__doc__ = "CPU bridge stand-in for MindSpeed-MM's patched fully_shard (see sitecustomize)."


# --- bridges 3, 4, 6: device helpers --------------------------------------------------------------


def _bridge_comm_backend(device_mod: types.ModuleType) -> None:
    """``get_dist_comm_backend`` raises when neither CUDA nor NPU exists; gloo works on CPU."""
    original = device_mod.get_dist_comm_backend

    @functools.wraps(original)
    def get_dist_comm_backend(cpu: bool = False) -> str:
        if device_mod.IS_CUDA_AVAILABLE or device_mod.IS_NPU_AVAILABLE:
            return original(cpu=cpu)
        return "gloo"

    device_mod.get_dist_comm_backend = get_dist_comm_backend


def _noop(*_args: Any, **_kwargs: Any) -> None:
    """Accept and ignore a device call that has no meaning on CPU."""


def _cpu_device() -> Any:
    """The device tensors go to when there is no accelerator."""
    import torch

    return torch.device("cpu")


def _bridge_accelerator_proxy(device_mod: types.ModuleType) -> None:
    """Let the ``torch.accelerator`` proxy accept per-device calls on CPU.

    After ``set_accelerator_compatible`` the trainer calls
    ``torch.accelerator.set_device_index(LOCAL_RANK)`` and MindSpeed's
    ``set_seed`` calls ``torch.accelerator.manual_seed``/``manual_seed_all``;
    on CPU the first raises and the others do not exist. MindSpeed's EP all-to-all and the swap optimizer
    allocate with ``device=torch.accelerator.current_device_index()``, which raises on CPU: every caller
    passes it as ``device=``, so the CPU device stands in for the index.
    """
    original = device_mod.set_accelerator_compatible

    @functools.wraps(original)
    def set_accelerator_compatible(fallback_module: Any = None) -> None:
        original(fallback_module)
        if device_mod.IS_CUDA_AVAILABLE or device_mod.IS_NPU_AVAILABLE:
            return
        import torch

        for name in ("set_device_index", "manual_seed", "manual_seed_all"):
            setattr(torch.accelerator, name, _noop)
        torch.accelerator.current_device_index = _cpu_device

    device_mod.set_accelerator_compatible = set_accelerator_compatible


def _bridge_init_process_group() -> None:
    """Drop a CPU ``device_id``: torch 2.13 rejects it ("must be an accelerator with an index")."""
    import torch
    import torch.distributed as dist

    def bridged(original: Callable[..., Any]) -> Callable[..., Any]:
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            device_id = kwargs.get("device_id")
            if isinstance(device_id, torch.device) and device_id.type == "cpu":
                kwargs.pop("device_id")
            return original(*args, **kwargs)

        return init_process_group

    _replace_once(dist, "init_process_group", bridged)


def _bridge_cpu_empty_cache() -> None:
    """``torch.cpu.empty_cache`` does not exist; checkpointers call it via ``get_torch_device()``."""
    import torch

    if not hasattr(torch.cpu, "empty_cache"):
        torch.cpu.empty_cache = _noop


def _bridge_gloo_reduce_scatter_avg() -> None:
    """Average in ``reduce_scatter_tensor`` on gloo, as NCCL and HCCL do.

    FSDP2 reduces fp32 and bf16 gradients with ``ReduceOp.AVG``. Gloo in torch 2.7.1 (the users' torch,
    where MindSpeed-MM's own fully_shard patch runs) accepts that op and sums: every gradient came out
    world-size times the accelerator's, which the loss-equivalence check reads as another objective.
    Summing and dividing by the group's size is what the accelerators compute (torch 2.13's gloo agrees).
    """
    import torch.distributed as dist

    def bridged(original: Callable[..., Any]) -> Callable[..., Any]:
        def reduce_scatter_tensor(output: Any, input: Any, op: Any = dist.ReduceOp.SUM,  # noqa: A002 - torch's name
                                  group: Any = None, async_op: bool = False) -> Any:
            if op == dist.ReduceOp.AVG and not async_op and dist.get_backend(group) == "gloo":
                work = original(output, input, op=dist.ReduceOp.SUM, group=group, async_op=False)
                output.div_(dist.get_world_size(group))
                return work
            return original(output, input, op=op, group=group, async_op=async_op)

        return reduce_scatter_tensor

    _replace_once(dist, "reduce_scatter_tensor", bridged)


def _patch_device_module(device_mod: types.ModuleType) -> None:
    """Apply the CPU device bridges once ``mindspeed_mm.fsdp.utils.device`` has executed."""
    if device_mod.IS_CUDA_AVAILABLE or device_mod.IS_NPU_AVAILABLE:
        return
    _bridge_comm_backend(device_mod)
    _bridge_accelerator_proxy(device_mod)
    _bridge_init_process_group()
    _bridge_cpu_empty_cache()
    _bridge_gloo_reduce_scatter_avg()


# --- bridge 7: expert parallel on gloo ------------------------------------------------------------


def _bridge_integer_histc() -> None:
    """Count integer tensors with ``torch.histc`` on CPU, as CUDA and NPU do.

    The EP dispatcher counts tokens per expert with ``torch.histc`` on the router's int64 expert ids;
    CPU torch implements histc for floating types only ("histogram_cpu" not implemented for 'Long').
    Expert ids are small integers, exact in float32, so counting them as floats and casting back gives
    the accelerator's result; other inputs go to torch unchanged.
    """
    import torch

    def bridged(original: Callable[..., Any]) -> Callable[..., Any]:
        def histc(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002 - torch's own parameter name
            if input.device.type == "cpu" and not input.is_floating_point() and not input.is_complex():
                return original(input.float(), *args, **kwargs).to(input.dtype)
            return original(input, *args, **kwargs)

        return histc

    if not _accelerator_present() and _replace_once(torch, "histc", bridged):
        _announce("histc: integer expert ids counted as float32 on CPU (EP dispatcher)")


def _bridge_gloo_all_gather_into_tensor() -> None:
    """Gather into a ``(world, *shape)`` output on gloo, as NCCL and HCCL do.

    The EP dispatcher gathers each rank's tokens-per-expert ``(E,)`` into ``(ep, E)``; gloo checks the
    output's chunks against the input's shape ("invalid tensor size ... expected (4), got (1, 4)").
    Both tensors are contiguous, so gathering their flat views fills the same memory.
    """
    import torch.distributed as dist

    def bridged(original: Callable[..., Any]) -> Callable[..., Any]:
        def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None,
                                   async_op: bool = False) -> Any:
            if (output_tensor.dim() != 1 and output_tensor.is_contiguous() and input_tensor.is_contiguous()
                    and dist.get_backend(group) == "gloo"):
                output_tensor, input_tensor = output_tensor.view(-1), input_tensor.view(-1)
            return original(output_tensor, input_tensor, group=group, async_op=async_op)

        return all_gather_into_tensor

    if not _accelerator_present():
        _replace_once(dist, "all_gather_into_tensor", bridged)


def _patch_ep_dispatcher(_module: types.ModuleType) -> None:
    """Apply the expert-parallel bridges once the EP dispatcher has executed."""
    _bridge_integer_histc()
    _bridge_gloo_all_gather_into_tensor()


# --- import machinery -----------------------------------------------------------------------------


class _WrappingLoader(importlib.abc.Loader):
    """Delegate to the real loader, then post-process (or replace) the module's execution."""

    def __init__(self, real: importlib.abc.Loader, wrap_exec: Callable[[types.ModuleType, Callable], None]):
        self._real = real
        self._wrap_exec = wrap_exec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._wrap_exec(module, self._real.exec_module)


def _after(patch: Callable[[types.ModuleType], None]) -> Callable[[types.ModuleType, Callable], None]:
    """Execution wrapper: run the real module, then patch it before any importer sees it."""

    def wrap_exec(module: types.ModuleType, real_exec: Callable) -> None:
        real_exec(module)
        patch(module)

    return wrap_exec


def _announce(what: str) -> None:
    """One line in the trainer log (rank 0) that says which bridge did what: the smoke reports it."""
    if os.environ.get("RANK", "0") == "0":
        print(f"[msmm-bridges] {what}", file=sys.stderr, flush=True)


def _announcing(apply: Callable[[], None], what: str) -> Callable[[], None]:
    """``apply_fully_shard_patch`` that says, once it has run, which ``fully_shard`` the trainer got."""

    @functools.wraps(apply)
    def apply_fully_shard_patch() -> None:
        apply()
        _announce(what)

    return apply_fully_shard_patch


def _fully_shard_exec(module: types.ModuleType, real_exec: Callable) -> None:
    """Execution wrapper: the real fully_shard module where it works, the stub otherwise."""
    import torch

    if _needs_fully_shard_stub():
        _fill_fully_shard_stub(module)
        where = "accelerator" if _accelerator_present() else "CPU"
        what = (f"fully_shard: {where} stand-in applied, torch's own fully_shard (torch {torch.__version__}; "
                "MindSpeed-MM's patch needs 2.7.1/2.9.0)")
    else:
        real_exec(module)
        what = f"fully_shard: MindSpeed-MM's own patch applied (torch {torch.__version__})"
    module.apply_fully_shard_patch = _announcing(module.apply_fully_shard_patch, what)


_EXEC_WRAPPERS: dict[str, Callable[[types.ModuleType, Callable], None]] = {
    _TV_META_MODULE: _exec_meta_registrations_or_empty,
    _FULLY_SHARD_MODULE: _fully_shard_exec,
    _DEVICE_MODULE: _after(_patch_device_module),
    _EP_DISPATCHER_MODULE: _after(_patch_ep_dispatcher),
}


class _BridgeFinder(importlib.abc.MetaPathFinder):
    """Find the bridged modules with the other finders and wrap their loaders."""

    def find_spec(
        self, fullname: str, path: Any, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        wrapper = _EXEC_WRAPPERS.get(fullname)
        if wrapper is None:
            return None
        spec = self._find_real(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _WrappingLoader(spec.loader, wrapper)
        return spec

    def _find_real(
        self, fullname: str, path: Any, target: types.ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None


def install() -> bool:
    """Install the finder when ``MSMM_CPU_BRIDGES=1`` (all bridges) or ``MSMM_FULLY_SHARD_STANDIN=1`` (bridge 2
    only); True if installed (idempotent)."""
    if os.environ.get(ENV_FLAG) != "1":
        if os.environ.get(ENV_STANDIN) != "1":
            return False
        for name in [n for n in _EXEC_WRAPPERS if n != _FULLY_SHARD_MODULE]:
            del _EXEC_WRAPPERS[name]
    if not any(isinstance(f, _BridgeFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _BridgeFinder())
    return True


def _chain_next_sitecustomize() -> None:
    """Run the ``sitecustomize`` this file shadows, if any, so a system one keeps working."""
    here = os.path.dirname(os.path.abspath(__file__))
    entries = [os.path.abspath(p or os.curdir) for p in sys.path]
    rest = sys.path[entries.index(here) + 1:] if here in entries else sys.path  # only what comes after this one
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


install()
_chain_next_sitecustomize()

"""Activations saved for backward, measured per layer: what the memory plan's activation estimate is checked against.

The plan's activation figure (``hooks.model.memory.activations``) is arithmetic over config sizes; this
module measures the real thing on a real forward, so the arithmetic can be checked layer by layer (tier 1,
tiny models in process: ``hooks.smoke.memory_check.measure_in_process``) and beside every smoke (inside the
trainer's ranks, ``hooks/smoke/observer``).

How: ``torch.autograd.graph.saved_tensors_hooks`` sees every tensor autograd keeps for backward; forward
pre/post hooks on the decoder and vision layers say which layer is running. Each storage counts once (Q, K
and V split from one fused projection are one allocation; a layer's input saved by two ops is one), at its
storage's full size (a view keeps its whole storage alive). Parameters are not activations (a linear saves
its weight): storages of the running module's parameters, after FSDP2 gathered them, are left out. A
storage several layers save (rotary tables, masks) is ``shared``; one saved only outside the layers
(embeddings, logits, the loss) is ``other``. With non-reentrant recompute a layer saves only its
positional inputs (``torch.utils.checkpoint``'s ``_NoopSaveInputs``), which is what is then measured.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SavedBytes:
    """Bytes saved for backward by one forward, by layer (module name), with the rows each layer saw."""

    layers: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)  # tokens (or patches) in the layer's first input
    shared: int = 0
    other: int = 0
    # what each layer's bytes are: "shape dtype bytes" per storage (the first tensor seen on it), so a layer off
    # the estimate can be explained
    tensors: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"layers": self.layers, "rows": self.rows, "shared": self.shared, "other": self.other,
                "tensors": self.tensors}


class SavedTensorMeter:
    """Context manager around one forward: ``with SavedTensorMeter(model, names) as meter: loss = model(...)``.

    ``names``: the layer modules to attribute to (decoder layers, vision blocks). ``meter.result`` after exit.
    """

    def __init__(self, model: Any, names: Iterable[str]) -> None:
        wanted = set(names)
        self.model = model
        self.layers = [(n, m) for n, m in model.named_modules() if n in wanted]
        self.result = SavedBytes()
        self._stack: list[str] = []
        self._params: set[int] = set()  # storages of the parameters live now: the root's, the running layer's
        self._root_params: set[int] = set()
        self._savers: dict[tuple[str, int], set[str]] = {}
        self._sizes: dict[tuple[str, int], int] = {}
        self._what: dict[tuple[str, int], str] = {}
        self._handles: list[Any] = []
        self._hooks: Any = None
        # Every storage seen, held until the forward ends, so that no address is counted for two storages: a tensor
        # saved by a graph that is then dropped would otherwise free its storage for a layer's input to reuse.
        # Holding does not keep what FSDP2 frees by resizing a storage to 0 (its gathered parameters, which an op
        # outside the layers may save): such a storage is not an activation, and is dropped from the count when
        # its address turns up again or at the end (a Gemma 3, LLaVA or Qwen3-VL-MoE smoke had merged a 24-32 KiB
        # weight into a 10 KiB layer input, on one rank or the other, run by run).
        self._held: dict[tuple[str, int], Any] = {}

    # -- hooks ---------------------------------------------------------------------------------

    @staticmethod
    def _param_storages(module: Any) -> set[int]:
        """The storages of ``module``'s parameters as they are now (gathered, under FSDP2).

        Only while they are live: FSDP2 frees a layer's gathered parameters after it, and the allocator hands
        the same addresses to the next activations, which must not then be taken for parameters.
        """
        out = set()
        for p in module.parameters():
            local = p.to_local() if hasattr(p, "to_local") else p
            out.add(local.untyped_storage().data_ptr())
        return out

    def _root_pre(self, module: Any, args: tuple[Any, ...]) -> None:
        self._root_params = self._params = self._param_storages(module)

    def _pre(self, name: str) -> Any:
        def hook(module: Any, args: tuple[Any, ...]) -> None:
            import torch

            self._params = self._root_params | self._param_storages(module)
            self._stack.append(name)
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            if first is not None and first.dim() and name not in self.result.rows:
                self.result.rows[name] = first.numel() // first.shape[-1]

        return hook

    def _post(self, name: str) -> Any:
        def hook(module: Any, args: tuple[Any, ...], output: Any) -> None:
            if self._stack and self._stack[-1] == name:
                self._stack.pop()
            self._params = self._root_params

        return hook

    def _pack(self, tensor: Any) -> Any:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr and ptr not in self._params:
            key = (str(tensor.device), ptr)
            held = self._held.get(key)
            if held is not None and held.data_ptr() != ptr:  # resized away since: another storage now
                self._drop(key)
            self._held.setdefault(key, storage)
            self._sizes[key] = max(self._sizes.get(key, 0), storage.nbytes())
            self._what.setdefault(key, f"{tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}")
            self._savers.setdefault(key, set()).add(self._stack[-1] if self._stack else "")
        return tensor

    @staticmethod
    def _unpack(tensor: Any) -> Any:
        return tensor

    def _drop(self, key: tuple[str, int]) -> None:
        """Forget a storage that was freed by resizing (FSDP2's gathered parameters): not an activation."""
        for table in (self._held, self._sizes, self._savers, self._what):
            table.pop(key, None)

    # -- context -------------------------------------------------------------------------------

    def __enter__(self) -> SavedTensorMeter:
        import torch

        self._root_pre(self.model, ())
        self._handles = [self.model.register_forward_pre_hook(self._root_pre)]
        for name, module in self.layers:
            self._handles.append(module.register_forward_pre_hook(self._pre(name)))
            self._handles.append(module.register_forward_hook(self._post(name)))
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._hooks.__exit__(*exc)
        for key in [k for k, storage in self._held.items() if storage.data_ptr() != k[1]]:
            self._drop(key)
        self._held.clear()
        for handle in self._handles:
            handle.remove()
        out = self.result
        out.layers = {name: 0 for name, _ in self.layers}
        for key, savers in self._savers.items():
            size, layers = self._sizes[key], savers - {""}
            if len(layers) > 1:
                out.shared += size
            elif layers:  # also kept outside the layers (a deepstack merger reads a block's input): still the layer's
                layer = next(iter(layers))
                out.layers[layer] += size
                out.tensors.setdefault(layer, []).append(f"{self._what[key]} {size} B"
                                                         + (" (also saved outside the layers)" if "" in savers else ""))
            else:
                out.other += size


def layer_names(model: Any, patterns: Iterable[str]) -> list[str]:
    """Module names matching the plan's layer patterns (``recompute_plan.apply_modules``), in model order."""
    from hooks.model.matching import module_name_match

    pats = list(patterns)
    return [n for n, _ in model.named_modules() if n and any(module_name_match(p, n) for p in pats)]


def layer_kind(name: str, towers: Iterable[str]) -> str:
    """"vision" for a layer inside a vision tower, else "text" (the plan's two layer profiles)."""
    return "vision" if any(name == t or name.startswith(t + ".") for t in towers) else "text"


def predicted(result: SavedBytes, profiles: dict[str, Any], towers: Iterable[str], *, recompute: bool,
              act_bytes: int = 2) -> dict[str, int]:
    """The memory plan's bytes for each measured layer, for the rows that layer really saw.

    ``act_bytes``: the compute dtype's width (FSDP2's ``param_dtype``; the plan assumes bf16). An fp32 run keeps
    the recomputed inputs at twice the size; without recompute the bf16 layer arithmetic is scaled, an
    approximation (fp32 norms then keep no separate upcast copy).
    """
    from hooks.model.memory_activations import ACT_BYTES, layer_row_bytes, recomputed_row_bytes

    towers = list(towers)
    out = {}
    for name in result.layers:
        kind = layer_kind(name, towers)
        if kind not in profiles:
            continue
        rows = result.rows.get(name, 0)
        out[name] = (recomputed_row_bytes(profiles[kind], rows, act_bytes) if recompute
                     else layer_row_bytes(profiles[kind], rows) * act_bytes // ACT_BYTES)
    return out

"""The model's class and a build of it on the meta device: structure and shapes, no memory, no weights.

Shared by the probe (module table, plans) and by data parity (the collator's ``get_rope_index``
needs a model object, not its weights).
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hooks.model.loading import ProbeError, resolve_model_class  # noqa: F401 - re-exported for older callers


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while tens of thousands of modules are created.

    Allocation bursts trigger full collections that rescan every live module, so building and
    tabulating a per-expert MoE (GLM-4.5V: ~30k modules) spends more time collecting than working.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def build_meta_model(cls: type, config: Any, *, fast: bool = True) -> Any:
    """Instantiate on the meta device: structure and shapes only, no memory, no weights.

    ``fast`` skips weight initialisation (transformers' own ``no_init_weights``, as
    ``from_pretrained`` does) and pauses the garbage collector: initialising meta tensors
    changes no name, class or shape, but goes through torch's reference decompositions
    (GLM-4.5V: 23-40 s plain, ~1 s CPU fast). ``no_init_weights`` also skips ``tie_weights``,
    so it is called here as ``from_pretrained`` does; ``tests/test_full_probe.py`` checks that
    the module table is identical to a plain build.
    """
    import torch

    if not fast:
        with torch.device("meta"):
            return cls._from_config(config)
    from hooks.compat import no_init_weights

    with gc_paused(), torch.device("meta"), no_init_weights():
        model = cls._from_config(config)
        if hasattr(model, "tie_weights"):
            model.tie_weights()
    return model




# How the probe built the model, in the order tried (``build_structure``).
META, EMPTY_WEIGHTS, SHRUNK_CPU = "meta device", "accelerate.init_empty_weights()", "CPU, shrunk config"


def build_structure(cls: type, config: Any, model_dir: Path) -> tuple[Any, str, list[str]]:
    """The model's structure, however its code lets it be built: the build, how, and what failed first.

    Published code does things the meta device refuses (``.item()`` on a freshly built tensor, for
    stochastic-depth rates). MindSpeed-MM itself builds under ``accelerate.init_empty_weights()``
    (parameters on meta, buffers and plain tensors real), so that comes next; last, a real CPU build
    of the config shrunk by ``hooks.model.shrink`` (same module names and classes, fewer layers and
    smaller widths: parameter counts then describe the shrunk build, and the facts say so).
    """
    failures = []
    try:
        return build_meta_model(cls, config), META, failures
    except ImportError as err:  # the interpreter, not the model: a smaller build would hide it (sizes not full-size)
        raise ProbeError(f"python: {sys.executable} cannot build the model ({type(err).__name__}: {err}); install the "
                         "missing package or a transformers this tool supports (4.57.x, 5.x) in the training "
                         "environment") from err
    except Exception as err:  # noqa: BLE001 - the model's own code: try the next way to build it
        failures.append(f"{META}: {type(err).__name__}: {err}")
    try:
        from accelerate import init_empty_weights

        from hooks.compat import no_init_weights

        with gc_paused(), init_empty_weights(), no_init_weights():
            model = cls._from_config(config)
        return model, EMPTY_WEIGHTS, failures
    except Exception as err:  # noqa: BLE001
        failures.append(f"{EMPTY_WEIGHTS}: {type(err).__name__}: {err}")
    from hooks.model.shrink import shrink_config_dict
    from hooks.model.shrink_rules import Dims

    small = type(config).from_dict(shrink_config_dict(config.to_dict(), Dims()))
    try:
        return cls._from_config(small), SHRUNK_CPU, failures
    except Exception as err:
        raise ProbeError(f"model_path: {model_dir}: the model's code cannot be built ({'; '.join(failures)}; "
                         f"{SHRUNK_CPU}: {type(err).__name__}: {err}); fix the class's __init__ or give a "
                         "folder whose code builds") from err


def frozen_by_model(model: Any) -> list[str]:
    """Parameters the class's own ``__init__`` freezes (Qwen2-Audio's sinusoidal ``embed_positions``), read off a
    model built without loading (the probe's meta build)."""
    return [name for name, param in model.named_parameters() if not param.requires_grad]


def keep_frozen(model: Any, names: list[str] | None = None) -> Any:
    """``model`` with the parameters its own ``__init__`` freezes frozen again after loading: transformers 5's
    ``from_pretrained`` hands them back trainable (4.57 keeps them frozen), so the trainer would train what the model
    defines as fixed. ``names``: the frozen facts; without them a weightless build of the class says."""
    if names is None:  # as the probe builds the class: its own code may refuse the meta device (``.item()``)
        built, _, _ = build_structure(type(model), model.config, Path(getattr(model.config, "_name_or_path", "")))
        names = frozen_by_model(built)
    for name in names:
        model.get_parameter(name).requires_grad_(False)
    return model

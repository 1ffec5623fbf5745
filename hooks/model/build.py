"""The model's class and a build of it on the meta device: structure and shapes, no memory, no weights.

Shared by the probe (module table, plans) and by data parity (the collator's ``get_rope_index``
needs a model object, not its weights).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class ProbeError(ValueError):
    """A problem with the model directory that the user can fix; names the field."""


def resolve_model_class(config: Any, model_dir: Path, *, trust_remote_code: bool) -> type:
    """The class MindSpeed-MM will subclass: transformers' own, else the remote-code class."""
    import transformers

    for arch in getattr(config, "architectures", None) or []:
        if hasattr(transformers, arch):
            return getattr(transformers, arch)
    auto_map = getattr(config, "auto_map", None) or {}
    for key in ("AutoModelForImageTextToText", "AutoModelForVision2Seq", "AutoModelForCausalLM", "AutoModel"):
        if key in auto_map and trust_remote_code:
            from transformers.dynamic_module_utils import get_class_from_dynamic_module

            return get_class_from_dynamic_module(auto_map[key], str(model_dir))
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING

    try:
        return MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING[type(config)]
    except KeyError as err:
        raise ProbeError(
            f"model_path: no image-text-to-text class for model_type {config.model_type!r} "
            "(architectures in config.json name no transformers class)."
        ) from err


def is_custom_model(raw: dict[str, Any]) -> bool:
    """config.json that ``AutoConfig`` cannot load at all: neither ``model_type`` nor ``auto_map``.

    MindSpeed-MM's ModelHub then takes its custom-model path ("Building custom model"): the class
    registered under ``model.model_id`` builds itself from the YAML's model arguments.
    """
    return not raw.get("model_type") and not raw.get("auto_map")


def custom_model_class(model_dir: Path, raw: dict[str, Any]) -> type:
    """The class ``architectures`` names, found in the folder's own ``*.py`` (imported as transformers
    imports remote code, so its relative imports work)."""
    import re

    from transformers.dynamic_module_utils import (
        get_cached_module_file,
        get_class_from_dynamic_module,
        get_relative_import_files,
    )

    for arch in raw.get("architectures") or []:
        pattern = re.compile(rf"^class {re.escape(arch)}\b", re.M)
        for source in sorted(model_dir.glob("*.py")):
            if pattern.search(source.read_text(encoding="utf-8", errors="replace")):
                # transformers copies a module's direct relative imports only (AutoConfig's module has
                # brought the rest on the auto_map path): bring the whole closure first.
                for module in get_relative_import_files(str(source)):
                    get_cached_module_file(str(model_dir), Path(module).name)
                return get_class_from_dynamic_module(f"{source.stem}.{arch}", str(model_dir))
    raise ProbeError(
        f"model_path: {model_dir / 'config.json'} has neither model_type nor auto_map, so transformers cannot load it, "
        f"and no *.py file in the folder defines a class named in architectures {raw.get('architectures')}; add the "
        "model's own code to the folder and name its class in architectures, or add auto_map")


def load_config_and_class(model_dir: Path, *, trust_remote_code: bool) -> tuple[Any, type, bool]:
    """(config, model class, custom) as MindSpeed-MM's ModelHub gets them: ``AutoConfig`` first, else the
    custom-model path, whose config is the class's own ``config_class`` read from config.json."""
    import json

    import transformers

    raw = json.loads((model_dir / "config.json").read_text())
    if is_custom_model(raw):
        cls = custom_model_class(model_dir, raw)
        return cls.config_class.from_pretrained(str(model_dir)), cls, True
    config = transformers.AutoConfig.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
    return config, resolve_model_class(config, model_dir, trust_remote_code=trust_remote_code), False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
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
    from transformers.modeling_utils import no_init_weights

    with _gc_paused(), torch.device("meta"), no_init_weights():
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
    except Exception as err:  # noqa: BLE001 - the model's own code: try the next way to build it
        failures.append(f"{META}: {type(err).__name__}: {err}")
    try:
        from accelerate import init_empty_weights
        from transformers.modeling_utils import no_init_weights

        with _gc_paused(), init_empty_weights(), no_init_weights():
            model = cls._from_config(config)
        return model, EMPTY_WEIGHTS, failures
    except Exception as err:  # noqa: BLE001
        failures.append(f"{EMPTY_WEIGHTS}: {type(err).__name__}: {err}")
    from hooks.model.shrink import Dims, shrink_config_dict

    small = type(config).from_dict(shrink_config_dict(config.to_dict(), Dims()))
    try:
        return cls._from_config(small), SHRUNK_CPU, failures
    except Exception as err:
        raise ProbeError(f"model_path: {model_dir}: the model's code cannot be built ({'; '.join(failures)}; "
                         f"{SHRUNK_CPU}: {type(err).__name__}: {err}); fix the class's __init__ or give a "
                         "folder whose code builds") from err

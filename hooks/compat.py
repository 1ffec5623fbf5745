"""Environment repairs and transformers version shims that our own processes need.

The only torchvision on PyPI that matches a CPU-only torch 2.13 is a CUDA build
whose ``torchvision._meta_registrations`` registers ops that do not exist
without CUDA, so ``import torchvision`` fails. Qwen-style fast image/video
processors only need the pure-Python ``torchvision.transforms.v2``; replacing
that one module with an empty one makes the import work. On users' NPU/GPU
machines torchvision imports normally and nothing is changed.

The training interpreter may hold transformers 4.57.x or 5.x (MindSpeed-MM's newest examples pin
5.2.0); the few private APIs the probe relies on moved between them, and are reached only here.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

_META = "torchvision._meta_registrations"


def _cuda_torchvision_on_cpu_torch() -> bool:
    """A CUDA torchvision build beside a CPU-only torch: known to fail, so stub before the first try.

    Read from torchvision's version.py without importing it (a failed import costs ~1 s).
    """
    import importlib.util

    import torch

    spec = importlib.util.find_spec("torchvision")
    if torch.version.cuda is not None or spec is None or not spec.submodule_search_locations:
        return False
    version_file = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(version_file, encoding="utf-8") as handle:
            return "+cu" in handle.readline()
    except OSError:
        return False


def ensure_torchvision() -> bool:
    """Make ``import torchvision`` work on CPU-only torch; True if it imports."""
    if "torchvision" in sys.modules:
        return True
    if _cuda_torchvision_on_cpu_torch():
        sys.modules.setdefault(_META, types.ModuleType(_META))
    try:
        import torchvision  # noqa: F401

        return True
    except Exception:  # noqa: BLE001 - any import-time failure means "repair and retry"
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    sys.modules[_META] = types.ModuleType(_META)
    try:
        import torchvision  # noqa: F401

        return True
    except Exception:  # noqa: BLE001
        return False


def no_init_weights() -> Any:
    """transformers' own "skip weight initialisation" context (``from_pretrained`` uses it).

    4.57 keeps it in ``modeling_utils``; 5.x moved it to ``transformers.initialization``.
    """
    try:
        from transformers.initialization import no_init_weights as found
    except ImportError:
        from transformers.modeling_utils import no_init_weights as found
    return found()


def no_split_modules(model: Any) -> list[str]:
    """Block classes FSDP must not split, over the model and its sub-models.

    4.57: ``_get_no_split_modules("auto")`` takes the union over sub-models on demand; 5.x computes
    that union in ``post_init`` into the instance's ``_no_split_modules`` and drops the method.
    """
    if hasattr(model, "_get_no_split_modules"):
        return sorted(model._get_no_split_modules("auto"))
    return sorted(getattr(model, "_no_split_modules", None) or [])

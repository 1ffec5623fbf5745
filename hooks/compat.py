"""Environment repairs that our own processes need before importing processors.

The only torchvision on PyPI that matches a CPU-only torch 2.13 is a CUDA build
whose ``torchvision._meta_registrations`` registers ops that do not exist
without CUDA, so ``import torchvision`` fails. Qwen-style fast image/video
processors only need the pure-Python ``torchvision.transforms.v2``; replacing
that one module with an empty one makes the import work. On users' NPU/GPU
machines torchvision imports normally and nothing is changed.
"""

from __future__ import annotations

import sys
import types


def ensure_torchvision() -> bool:
    """Make ``import torchvision`` work on CPU-only torch; True if it imports."""
    if "torchvision" in sys.modules:
        return True
    try:
        import torchvision  # noqa: F401

        return True
    except Exception:  # noqa: BLE001 - any import-time failure means "repair and retry"
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    try:
        import torchvision  # noqa: F401

        return True
    except Exception:  # noqa: BLE001
        return False

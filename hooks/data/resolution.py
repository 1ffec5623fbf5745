"""Whether the processor ``AutoProcessor`` finds is one the release names, or a guess from a borrowed class name.

A remote config class may reuse a built-in class name (FastVLM's ``LlavaConfig(Qwen2Config)``): transformers
maps config classes to processors by class name, so ``AutoProcessor`` resolves the release to the built-in
``LlavaProcessor``, which then fails for want of files the release never had (or loads a processor that is
not the release's). Such a failure is "no processor", with its cause recorded, not a fatal error, and the
advice never names files the release does not have. A release names a processor when its config is a
built-in one (``model_type`` decides), when it ships ``processor_config.json`` or ``preprocessor_config.json``,
or when an ``auto_map`` names ``AutoProcessor`` or ``AutoImageProcessor``.
"""

from __future__ import annotations

import json
from pathlib import Path

PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")
AUTO_KEYS = ("AutoProcessor", "AutoImageProcessor")


def _auto_map(path: Path) -> dict:
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get("auto_map") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


def names_processor(model_dir: Path) -> str:
    """What in the release names its processor ("" when nothing does, so that ``AutoProcessor``'s pick is a
    guess from the config class's name)."""
    folder = Path(model_dir)
    if "AutoConfig" not in _auto_map(folder / "config.json"):
        return "its config is a transformers class"
    for name in PROCESSOR_FILES:
        if (folder / name).is_file():
            return name
    for name in ("config.json", "tokenizer_config.json"):
        if any(key in _auto_map(folder / name) for key in AUTO_KEYS):
            return f"{name}'s auto_map"
    return ""


def guessed(model_dir: Path, config_class: str, cause: str) -> str:
    """The recorded cause of "no processor" for a release that names none."""
    return (f"no processor: the release names none (no {' or '.join(PROCESSOR_FILES)}, no AutoProcessor in an "
            f"auto_map); AutoProcessor resolves its config class {config_class} by name to a transformers "
            f"processor the release does not ship ({cause[:240]})")

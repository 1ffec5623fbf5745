"""The model's config and class, found the way MindSpeed-MM's ModelHub finds them.

``AutoConfig`` first (transformers' own class, else the ``auto_map`` remote-code class); when
config.json has neither ``model_type`` nor ``auto_map``, ModelHub's custom-model path: the class
``architectures`` names, from the folder's own code. Shared by the probe, the shrinker (a shrunk copy
must take the same path) and data parity; nothing here builds a model.
"""

from __future__ import annotations

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
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if not raw.get("auto_map") and raw.get("model_type") not in CONFIG_MAPPING_NAMES:
        raise ProbeError(
            f"model_path: config.json's model_type {raw.get('model_type')!r} is not one transformers "
            f"{transformers.__version__} knows, and there is no auto_map; use a transformers release that has it "
            "(MindSpeed-MM pins 4.57.x), or the model's own code with auto_map in config.json, or MindSpeed-MM's "
            "custom-model path (its code in the folder, the class named in architectures, no model_type)")
    config = transformers.AutoConfig.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
    return config, resolve_model_class(config, model_dir, trust_remote_code=trust_remote_code), False


"""Multi-stage checkpoints: the sub-model the framework trains, when the published class bundles several.

Qwen3-Omni's published ``Qwen3OmniMoeForConditionalGeneration`` holds a ``thinker`` (audio + vision towers and
the MoE language model), a ``talker`` and a ``code2wav`` vocoder, and has no input embeddings of its own
(``get_input_embeddings`` raises ``NotImplementedError``). MindSpeed-MM's in-repo plugin trains the thinker
alone: its ``_from_config`` swaps the folder's config for ``config.thinker_config``. Planning the published
class would give FSDP2/recompute patterns (``thinker.model.layers.{*}``) that match nothing the trainer builds.

So the probe starts at the trained sub-model: the one the checkout's in-repo plugin for the family picks (read
from its source with ``ast``, never imported: importing a plugin registers it and pulls in the framework), or
the one the user names (``--trained-submodule``, ``MSMM_TRAINED_SUBMODULE``). The facts say which and why.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hooks.model.loading import ProbeError

PLUGINS = Path("mindspeed_mm") / "fsdp" / "models"


@dataclass(frozen=True)
class Stage:
    """The trained sub-model: its attribute on the published class, its sub-config key, and why."""

    name: str  # attribute of the published class ("thinker")
    config_key: str  # key of its sub-config in config.json ("thinker_config"); "" when not known
    reason: str

    def facts(self, published: type, trained: type) -> dict[str, str]:
        """What ``ModelFacts.trained_submodule`` records (the templates read ``name`` and ``config_key``)."""
        return {**asdict(self), "published_class": published.__name__, "class": trained.__name__}


def embeddings(model: Any, getter: str) -> Any:
    """``model.get_input_embeddings()`` (or ``get_output_embeddings``), ``None`` where the class has none.

    transformers' default raises ``NotImplementedError`` for a class that does not say where its embeddings are
    (Qwen3-Omni's top-level class), and some remote code raises ``AttributeError``: neither is a crash of the
    model's code, only a class without embeddings of its own.
    """
    method = getattr(model, getter, None)
    if method is None:
        return None
    try:
        return method()
    except (NotImplementedError, AttributeError):
        return None


def _registers(node: ast.ClassDef, model_type: str) -> bool:
    """``@model_register.register("<model_type>")`` on the class."""
    for deco in node.decorator_list:
        if (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "register"
                and deco.args and isinstance(deco.args[0], ast.Constant) and deco.args[0].value == model_type):
            return True
    return False


def _config_swap(node: ast.ClassDef) -> tuple[str, int] | None:
    """``config = config.<key>`` inside the class's ``_from_config``: the sub-config it builds from, and the line."""
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "_from_config":
            for sub in ast.walk(item):
                if (isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "config"
                                                        for t in sub.targets)
                        and isinstance(sub.value, ast.Attribute) and isinstance(sub.value.value, ast.Name)
                        and sub.value.value.id == "config"):
                    return sub.value.attr, sub.lineno
    return None


def plugin_stage(checkout: Path, model_type: str) -> Stage | None:
    """The sub-model the checkout's in-repo plugin registered for ``model_type`` builds, read from its source.

    MindSpeed-MM's ``qwen3omni`` plugin registers ``qwen3_omni_moe`` and its ``_from_config`` does
    ``config = config.thinker_config``: the trainer builds the thinker from the folder's config.json.
    """
    root = checkout / PLUGINS
    if not model_type or not root.is_dir():
        return None
    needle = f'"{model_type}"'
    for source in sorted(root.rglob("*.py")):
        try:
            text = source.read_text(encoding="utf-8", errors="replace")
            if needle not in text and f"'{model_type}'" not in text:
                continue
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _registers(node, model_type):
                swap = _config_swap(node)
                if swap is None:
                    return None  # the plugin builds the published class itself
                key, line = swap
                where = f"{source.relative_to(checkout)}:{line}"
                return Stage(name=key.removesuffix("_config"), config_key=key,
                             reason=f"MindSpeed-MM's in-repo plugin {node.name} ({where}) builds the model from "
                                    f"config.{key} in _from_config: the trainer trains that sub-model only")
    return None


def _sub_models(model: Any) -> list[str]:
    """Direct children that are models of their own (carry a ``config``): the stages one could train."""
    return [name for name, child in model.named_children() if hasattr(child, "config")]


def select(model: Any, config: Any, *, checkout: Path | None = None,
           trained_submodule: str | None = None) -> tuple[Any, Any, Stage | None]:
    """(model, config, stage) the probe plans: the trained sub-model when one is named or read from the plugin.

    The user's name wins over the plugin's choice (it is the answer to "what does your trainer build").
    """
    stage: Stage | None = None
    if trained_submodule:
        key = f"{trained_submodule}_config"
        stage = Stage(trained_submodule, key if hasattr(config, key) else "",
                      "named by the user (--trained-submodule / MSMM_TRAINED_SUBMODULE)")
    elif checkout is not None:
        stage = plugin_stage(checkout, getattr(type(config), "model_type", "") or "")
    if stage is None:
        return model, config, None
    sub = getattr(model, stage.name, None)
    if sub is None or not hasattr(sub, "config"):
        raise ProbeError(f"trained_submodule: {type(model).__name__} has no sub-model {stage.name!r} ({stage.reason}); "
                         f"its sub-models: {', '.join(_sub_models(model)) or 'none'}")
    sub_config = getattr(config, stage.config_key, None) if stage.config_key else None
    return sub, sub_config if sub_config is not None else sub.config, stage

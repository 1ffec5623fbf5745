"""Multi-stage checkpoints: the sub-model the framework trains, when the published class bundles several.

Qwen3-Omni's published ``Qwen3OmniMoeForConditionalGeneration`` holds a ``thinker`` (audio + vision towers and
the MoE language model), a ``talker`` and a ``code2wav`` vocoder, and has no input embeddings of its own
(``get_input_embeddings`` raises ``NotImplementedError``) and no ``forward`` of its own. MindSpeed-MM's in-repo
plugin trains the thinker alone: its ``_from_config`` swaps the folder's config for ``config.thinker_config``.
Planning the published class would give FSDP2/recompute patterns (``thinker.model.layers.{*}``) that match nothing
the trainer builds, and a model whose ``forward`` returns no loss. Qwen2.5-Omni (``thinker``, ``talker``,
``token2wav``) is built the same way, and MindSpeed-MM has no plugin for it.

So the probe starts at the trained sub-model, chosen in this order (``select``):

1. the one the user names (``--trained-submodule``, ``MSMM_TRAINED_SUBMODULE``): the answer to "what does your
   trainer build";
2. the one the checkout's in-repo plugin for the family builds (read from its source with ``ast``, never
   imported: importing a plugin registers it and pulls in the framework); a plugin that builds the published
   class itself is a choice too;
3. the understanding stage the classes themselves show (``understanding_stage``): a published class that cannot
   be trained as it is (no ``forward`` of its own, or one that returns no loss, or no input embeddings) whose
   one direct sub-model has input embeddings, a ``forward`` that returns a loss, and the media encoder towers.

The facts say which and why (``Stage.reason`` names the evidence).
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hooks.model.build import keep_frozen
from hooks.model.loading import ProbeError, load_config_and_class
from hooks.model.modality import tower_medium

PLUGINS = Path("mindspeed_mm") / "fsdp" / "models"


@dataclass(frozen=True)
class Stage:
    """The trained sub-model: its attribute on the published class, its sub-config key, and why."""

    name: str  # attribute of the published class ("thinker")
    config_key: str  # key of its sub-config in config.json ("thinker_config"); "" when not known
    reason: str

    def facts(self, published: type, trained: type) -> TrainedStage:
        """What ``ModelFacts.trained_submodule`` records."""
        return TrainedStage(self.name, self.config_key, self.reason, published.__name__, trained.__name__)


@dataclass(frozen=True)
class TrainedStage:
    """The sub-model the trainer trains where the published class bundles several (``ModelFacts.trained_submodule``,
    Qwen-Omni's thinker). In the answers file a mapping (``class`` for ``class_name``) the templates read; the smoke
    hands it to its worker processes as that mapping too."""

    name: str  # its attribute on the published class ("thinker")
    config_key: str  # its sub-config's key in config.json ("thinker_config"); "" when not known
    reason: str  # why this stage is the trained one (the checkout's plugin, the user's answer, the only forward)
    published_class: str  # the folder's class ("Qwen3OmniMoeForConditionalGeneration")
    class_name: str  # the trained sub-model's own class ("Qwen3OmniMoeThinkerForConditionalGeneration")

    def to_dict(self) -> dict[str, str]:
        data = asdict(self)
        data["class"] = data.pop("class_name")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, str] | None) -> TrainedStage | None:
        """The stage of an answers file or a worker's payload; None for none (``{}``: the whole class trains)."""
        if not data or not data.get("name"):
            return None
        return cls(data["name"], data.get("config_key", ""), data.get("reason", ""), data.get("published_class", ""),
                   data.get("class", ""))


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


def forward_facts(cls: type) -> tuple[list[str], bool, bool]:
    """Forward parameters, whether it takes ``**kwargs``, and whether it can return ``.loss``."""
    sig = inspect.signature(cls.forward)
    params = [p for p in sig.parameters if p != "self"]
    has_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    try:
        source = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        source = ""
    # Ovis2's forward computes nothing itself: it hands ``labels=labels`` to its language model, which does
    hands_on = re.search(r"\blabels\s*=\s*labels\b", source) is not None
    returns_loss = "labels" in params and ("loss" in source or hands_on)
    return [p for p in params if sig.parameters[p].kind is not inspect.Parameter.VAR_KEYWORD], has_kwargs, returns_loss


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


def _plugin_choice(checkout: Path, model_type: str) -> tuple[str, Stage | None]:
    """(where, stage): the class the checkout's in-repo plugin registers for ``model_type`` ("" when none does) and
    the sub-model it builds (None: the published class itself)."""
    root = checkout / PLUGINS
    if not model_type or not root.is_dir():
        return "", None
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
                where = f"{node.name} ({source.relative_to(checkout)}:{node.lineno})"
                swap = _config_swap(node)
                if swap is None:
                    return where, None  # the plugin builds the published class itself
                key, line = swap
                where = f"{node.name} ({source.relative_to(checkout)}:{line})"
                return where, Stage(name=key.removesuffix("_config"), config_key=key,
                                    reason=f"MindSpeed-MM's in-repo plugin {where} builds the model from "
                                           f"config.{key} in _from_config: the trainer trains that sub-model only")
    return "", None


def plugin_stage(checkout: Path, model_type: str) -> Stage | None:
    """The sub-model the checkout's in-repo plugin registered for ``model_type`` builds, read from its source.

    MindSpeed-MM's ``qwen3omni`` plugin registers ``qwen3_omni_moe`` and its ``_from_config`` does
    ``config = config.thinker_config``: the trainer builds the thinker from the folder's config.json.
    None where no plugin registers the family or the plugin builds the published class itself.
    """
    return _plugin_choice(checkout, model_type)[1]


def _sub_models(model: Any) -> list[str]:
    """Direct children that are models of their own (carry a ``config``): the stages one could train."""
    return [name for name, child in model.named_children() if hasattr(child, "config")]


def _media_towers(model: Any) -> list[str]:
    """Modules one or two levels down whose names say they encode a medium (``audio_tower``, ``visual``,
    ``model.visual``): what an understanding stage holds and a talker or vocoder does not."""
    found: list[str] = []
    for name, _ in model.named_modules():  # pre-order: a tower comes before its insides
        if name and name.count(".") <= 1 and tower_medium(name) and not any(name.startswith(f + ".") for f in found):
            found.append(name)
    return found


def _cannot_train(cls: type, model: Any) -> list[str]:
    """Why the published class cannot be trained as it is (empty: it can)."""
    import torch

    why = []
    if cls.forward is torch.nn.Module.forward:
        why.append("has no forward of its own")
    elif not forward_facts(cls)[2]:
        why.append("has a forward that returns no loss")
    if embeddings(model, "get_input_embeddings") is None:
        why.append("has no input embeddings (get_input_embeddings)")
    return why


def sub_config_key(config: Any, name: str, sub: Any) -> str:
    """The key of ``sub``'s own sub-config in ``config``: ``<name>_config`` when it holds that class, else the one
    sub-config of the sub-model's config class; "" when none is."""
    key = f"{name}_config"
    kind = type(getattr(sub, "config", None))
    if hasattr(config, key) and type(getattr(config, key)) is kind:
        return key
    found = [k for k in getattr(config, "sub_configs", {}) or {} if type(getattr(config, k, None)) is kind]
    return found[0] if len(found) == 1 else (key if hasattr(config, key) else "")


def understanding_stage(model: Any, config: Any) -> Stage | None:
    """The sub-model to train when the published class bundles stages and says nothing itself (no plugin, no user).

    The rule: the published class cannot be trained as it is (no ``forward`` of its own, or one without a loss,
    or no input embeddings), and exactly one direct sub-model has input embeddings, a ``forward`` that returns a
    loss, and media encoder towers (``tower_medium``): the understanding stage (Qwen-Omni's ``thinker``). A
    talker (it has embeddings and, in Qwen3-Omni, a loss, but encodes no medium) and a vocoder are left out.
    None where the class is trainable as it is or no sub-model fits; several fitting sub-models stop the probe:
    only the user can say which one the trainer builds.
    """
    cls = type(model)
    why = _cannot_train(cls, model)
    if not why:
        return None
    fits: list[tuple[str, Any, list[str]]] = []
    for name, child in model.named_children():
        if not hasattr(child, "config") or embeddings(child, "get_input_embeddings") is None:
            continue
        if not forward_facts(type(child))[2]:
            continue
        towers = _media_towers(child)
        if towers:
            fits.append((name, child, towers))
    if not fits:
        return None
    if len(fits) > 1:
        raise ProbeError(f"trained_submodule: {cls.__name__} {' and '.join(why)}, and its sub-models "
                         f"{', '.join(n for n, _, _ in fits)} each have input embeddings, media towers and a loss; "
                         "answer which one your trainer builds (--trained-submodule NAME or MSMM_TRAINED_SUBMODULE)")
    name, child, towers = fits[0]
    media = sorted({tower_medium(t) for t in towers})
    rest = [n for n in _sub_models(model) if n != name]
    reason = (f"{cls.__name__} {' and '.join(why)}; its sub-model {name} ({type(child).__name__}) has input "
              f"embeddings, {' and '.join(media)} encoder towers ({', '.join(towers)}) and a forward that returns "
              f"a loss: the understanding stage, trained alone"
              + (f" ({', '.join(rest)} not trained)" if rest else "")
              + "; read off the classes, no in-repo plugin or user answer names another")
    return Stage(name, sub_config_key(config, name, child), reason)


def select(model: Any, config: Any, *, checkout: Path | None = None,
           trained_submodule: str | None = None) -> tuple[Any, Any, Stage | None]:
    """(model, config, stage) the probe plans: the trained sub-model when one is named, read from the plugin, or
    shown by the classes (``understanding_stage``); the published class where none is.

    The user's name wins over the plugin's choice (it is the answer to "what does your trainer build"), and the
    plugin's over the classes' own evidence (a plugin that builds the published class itself included).
    """
    stage: Stage | None = None
    if trained_submodule:
        sub = getattr(model, trained_submodule, None)
        stage = Stage(trained_submodule, sub_config_key(config, trained_submodule, sub) if sub is not None else "",
                      "named by the user (--trained-submodule / MSMM_TRAINED_SUBMODULE)")
    else:
        plugin = ("", None)
        if checkout is not None:
            plugin = _plugin_choice(checkout, getattr(type(config), "model_type", "") or "")
        stage = plugin[1] if plugin[0] else understanding_stage(model, config)
    if stage is None:
        return model, config, None
    sub = getattr(model, stage.name, None)
    if sub is None or not hasattr(sub, "config"):
        raise ProbeError(f"trained_submodule: {type(model).__name__} has no sub-model {stage.name!r} ({stage.reason}); "
                         f"its sub-models: {', '.join(_sub_models(model)) or 'none'}")
    sub_config = getattr(config, stage.config_key, None) if stage.config_key else None
    return sub, sub_config if sub_config is not None else sub.config, stage


def stage_class(published: type, class_name: str) -> type:
    """The trained sub-model's class, by the name the facts record, from the published class's own module
    (transformers' modeling module, or the folder's code)."""
    module = sys.modules.get(published.__module__)
    cls = getattr(module, class_name, None) if module is not None else None
    if cls is None:
        import transformers

        cls = getattr(transformers, class_name, None)
    if cls is None:
        raise ProbeError(f"trained_submodule: {class_name} is neither in {published.__module__} nor in transformers")
    return cls


def load_trained(model_dir: Path, stage: TrainedStage | None, *, trust_remote_code: bool = False,
                 **kwargs: Any) -> Any:
    """The model the trainer trains, with the folder's weights: the published class, or its trained sub-model
    (``ModelFacts.trained_submodule``) built from its sub-config with the folder's ``<name>.*`` tensors, as the
    generated plugin loads it (transformers strips the ``base_model_prefix`` the checkpoint's keys carry; an
    explicit ``key_mapping`` does it for a class whose prefix is another)."""
    config, cls, _ = load_config_and_class(model_dir, trust_remote_code=trust_remote_code)
    if stage is None:
        return keep_frozen(cls.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code, **kwargs))
    sub_cls = stage_class(cls, stage.class_name)
    sub_config = getattr(config, stage.config_key, None)
    if sub_config is None:
        raise ProbeError(f"trained_submodule: {cls.__name__}'s config has no {stage.config_key!r}")
    if getattr(sub_cls, "base_model_prefix", "") != stage.name:
        kwargs.setdefault("key_mapping", {f"^{re.escape(stage.name)}\\.": ""})
    return keep_frozen(sub_cls.from_pretrained(str(model_dir), config=sub_config, trust_remote_code=trust_remote_code,
                                               **kwargs))

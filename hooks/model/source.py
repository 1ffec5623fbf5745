"""What the model's own source says, read without running it: regular expressions over the ``forward`` and
media-feature methods (sub-models whose hidden states it reads, nested modules it calls directly, modules it enters
by another method), signatures (blocks the recompute wrapper cannot call) and syntax trees (media parameters
``forward`` never reads), plus the remote-code habits the plugin must undo (precision flags, ``AutoModel``
registrations). The model facts (``hooks.model.facts``) record what these find.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import sys
from collections.abc import Iterator
from typing import Any


def _forward_sources(model: Any) -> Iterator[tuple[Any, str]]:
    """(owner, source) of the forward and media-feature methods of the model and of its inner ``model``, and of
    the class's own helpers ``forward`` calls (Ovis2's ``self.merge_multimodal(...)``)."""
    inner = getattr(model, "model", None)
    for owner in (model, inner) if inner is not None and hasattr(inner, "forward") else (model,):
        for method in ("get_image_features", "get_video_features", "forward"):
            try:
                source = inspect.getsource(getattr(type(owner), method))
            except (AttributeError, OSError, TypeError):
                continue
            yield owner, source
            if method != "forward":
                continue
            for helper in sorted(set(_METHOD_CALL.findall(source))):
                function = inspect.getattr_static(type(owner), helper, None)
                if inspect.isfunction(function) and function.__module__ == type(owner).__module__:
                    with contextlib.suppress(OSError, TypeError):
                        yield owner, inspect.getsource(function)


_METHOD_CALL = re.compile(r"self\.(\w+)\(")


_HIDDEN_STATES_CALL = re.compile(r"self\.(\w+)\((?:[^()]|\([^()]*\))*?output_hidden_states\s*=\s*True", re.S)


def hidden_state_sources(model: Any, names: dict[int, str]) -> list[str]:
    """Sub-models whose recorded hidden states the model reads (``self.tower(..., output_hidden_states=True)``).

    transformers 4.57 finds a model's output recorders by ``str(type(module))``; FSDP2's
    ``fully_shard`` swaps the class for ``FSDP<Class>``, so such a module must not become a unit
    or its ``hidden_states`` come back ``None`` (LLaVA-OneVision, Aya Vision, Aria feature layers).
    """
    found: list[str] = []
    for owner, source in _forward_sources(model):
        for attr in _HIDDEN_STATES_CALL.findall(source):
            sub = getattr(owner, attr, None)
            if sub is not None and getattr(sub, "_can_record_outputs", None) and id(sub) in names:
                found.append(names[id(sub)])
    return sorted(set(found))


_NESTED_CALL = re.compile(r"self\.((?:\w+\.)+\w+)\(")


def called_directly(model: Any, names: dict[int, str]) -> list[str]:
    """Nested modules the model's own forward calls (``self.vision_model.model.post_layernorm(...)``).

    Such a call bypasses the forward of every module around the called one (``plan`` keeps those
    from being FSDP units). Read off the source of ``forward`` and the media-feature methods of the
    model and of its inner ``model``.
    """
    import torch

    found: set[str] = set()
    for owner, source in _forward_sources(model):
        for chain in _NESTED_CALL.findall(source):
            target: Any = owner
            for attr in chain.split("."):
                target = getattr(target, attr, None)
            if isinstance(target, torch.nn.Module) and id(target) in names and chain.count(".") >= 1:
                found.add(names[id(target)])
        for getter in _GETTER_CALL.findall(source):  # ``self.get_wte()(ids)``: the module a getter returns
            try:
                target = getattr(owner, getter)()
            except Exception:  # noqa: BLE001 - a getter that needs more than the built model: not a module call
                continue
            if isinstance(target, torch.nn.Module) and "." in names.get(id(target), ""):
                found.add(names[id(target)])
    return sorted(found)


_METHOD_ON_CHILD = re.compile(r"self\.(\w+)\.(\w+)\(")


def entered_by_method(model: Any, names: dict[int, str]) -> list[str]:
    """Modules that a ``forward`` of the model's own code (not transformers' or torch's) enters through another
    method of theirs (Qwen-VL's ``self.visual.encode(paths)``): FSDP2 gathers a unit's weights in its forward only.
    """
    import torch

    found: set[str] = set()
    sources: dict[type, str] = {}
    for module in model.modules():
        cls = type(module)
        if cls.__module__.startswith(("torch.", "transformers.")):
            continue
        if cls not in sources:
            try:
                sources[cls] = inspect.getsource(cls.forward)
            except (OSError, TypeError):
                sources[cls] = ""
        for child_name, method in _METHOD_ON_CHILD.findall(sources[cls]):
            child = getattr(module, child_name, None)
            function = inspect.getattr_static(type(child), method, None) if child is not None else None
            if (isinstance(child, torch.nn.Module) and method != "forward" and inspect.isfunction(function)
                    and not function.__qualname__.startswith("Module.") and id(child) in names):
                found.add(names[id(child)])
    return sorted(found)


_GETTER_CALL = re.compile(r"self\.(get_\w+)\(\)\(")


def no_recompute_classes(named: list[tuple[str, Any]]) -> list[str]:
    """Classes whose forward takes neither ``past_key_values`` nor ``**kwargs``.

    MindSpeed-MM's recompute wrapper always passes ``past_key_values=None``, so such blocks
    (SAM's vision layers, Llama-4's vision encoder layers) cannot be recompute targets.
    """
    bad: set[str] = set()
    checked: set[type] = set()
    for _, mod in named:
        cls = type(mod)
        if cls in checked:
            continue
        checked.add(cls)
        params = inspect.signature(cls.forward).parameters.values()
        if not any(p.name == "past_key_values" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            bad.add(cls.__name__)
    return sorted(bad)


MEDIA_PREFIXES = ("pixel", "image", "video")


def precision_flags(cls: type, config: Any) -> list[str]:
    """``bf16``/``fp16``/``fp32`` where the config holds them as booleans and the class's ``__init__`` casts itself
    by them (``self.transformer.half()``): a model built in the trainer's dtype must have them off."""
    flags = [name for name in ("bf16", "fp16", "fp32") if isinstance(getattr(config, name, None), bool)]
    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return []
    casts = re.search(r"\.(half|bfloat16)\(\)", source) is not None
    return flags if len(flags) == 3 and casts else []


def auto_models(cls: type, config: Any) -> list[str]:
    """Model types of the config's sub-configs that the model's own module registers with ``AutoModel``
    (``AutoModel.register(...)`` in its source) and so builds through ``AutoModel.from_config``."""
    try:
        source = inspect.getsource(sys.modules[cls.__module__])
    except (OSError, TypeError, KeyError):
        return []
    if "AutoModel.register(" not in source:
        return []
    return sorted({value.model_type for value in vars(config).values() if hasattr(value, "to_dict")
                   and getattr(value, "model_type", "") and not type(value).__module__.startswith("transformers.")})


def unused_media_params(cls: type) -> list[str]:
    """Media parameters ``forward`` takes but never reads: the media would not reach the model.

    transformers 4.57.1's ``Emu3ForConditionalGeneration.forward`` takes ``pixel_values`` and calls
    its model without them: every smoke would pass on text alone, a healthy loss on wrong data.
    Read off the function's syntax tree (names in its body), so docstrings do not count.
    """
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.forward)))
    except (OSError, TypeError, SyntaxError):
        return []
    func = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if func is None:
        return []
    used = {n.id for stmt in func.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)]
    return [p for p in params if p.startswith(MEDIA_PREFIXES) and p not in used]

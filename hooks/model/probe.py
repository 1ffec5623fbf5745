"""Probe a local Hugging Face VLM directory without reading its weights.

The config is loaded with ``AutoConfig`` (remote code only with consent), the
model is built on the meta device and ``named_modules()``, ``_no_split_modules``,
tied weights and the forward signature are read. The result (``ModelFacts``) is
everything the templates need; it is frozen into the copier answers file so a
later ``copier update`` does not need the model directory.

The data path's facts (processor, chat format, the model's own data code) and the branch are the data
stage's (``hooks.data.facts``); ``python -m hooks.probe MODEL_DIR [--json] [--trust-remote-code]`` prints both.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hooks.compat import no_split_modules
from hooks.model.build import (
    META,
    ProbeError,
    _gc_paused,
    build_meta_model,  # noqa: F401 - re-exported: tests and benchmarks build through it
    build_structure,
    frozen_by_model,
    resolve_model_class,  # noqa: F401 - re-exported: tests and benchmarks resolve through it
)
from hooks.model.coverage import check_covered
from hooks.model.loading import is_custom_model, load_config_and_class
from hooks.model.modality import input_medium
from hooks.model.plan import ModuleInfo, ModuleTable, Plan, derive_plan
from hooks.model.stages import embeddings, forward_facts
from hooks.model.stages import select as select_stage
from hooks.model.weights import weights_error


@dataclass
class ModelFacts:
    """What the probe learned; JSON-serialisable and stable for a given config."""

    model_type: str
    architecture: str
    class_module: str
    remote_code: bool
    sub_configs: dict[str, str]
    num_parameters: int
    forward_params: list[str]
    forward_accepts_kwargs: bool
    returns_loss: bool
    tie_word_embeddings: bool
    no_split_modules: list[str]
    media_tokens: dict[str, Any]
    plan: dict[str, Any]
    processor: dict[str, Any] = field(default_factory=dict)
    attention: dict[str, bool] = field(default_factory=dict)  # implementations every sub-model declares
    build: dict[str, Any] = field(default_factory=dict)  # how the structure was built, what failed, attention set
    unused_media: list[str] = field(default_factory=list)  # media parameters forward() never reads
    custom_model: bool = False  # config.json without model_type/auto_map: MindSpeed-MM's custom-model path
    trained_submodule: dict[str, str] = field(default_factory=dict)  # hooks.model.stages: the stage trained, why
    timings: dict[str, float] = field(default_factory=dict)
    # Sub-model types the model's own code registers with AutoModel and builds with AutoModel.from_config (Ovis2's
    # visual tokenizer): the copied-code plugin registers the folder's config classes for them too.
    auto_models: list[str] = field(default_factory=list)
    # The child module holding the input and output embeddings where the class does not say (Ovis2's ``llm``):
    # MindSpeed-MM re-ties them after loading through get_input_embeddings(), which the plugin then delegates.
    embeddings_in: str = ""
    # Boolean precision flags the class casts itself by in ``__init__`` (Qwen-VL's fp16/bf16/fp32 in config.json):
    # the plugin turns them to fp32 so that the trainer's dtype governs, as for every other model.
    precision_flags: list[str] = field(default_factory=list)
    # Parameters the class's own __init__ freezes (Qwen2-Audio's sinusoidal embed_positions): the plugin freezes them
    # again after from_pretrained, which in transformers 5 hands them back trainable.
    frozen_by_model: list[str] = field(default_factory=list)
    # The memory plan for copier's default cluster (hooks.model.memory.DEFAULT_CLUSTER), computed while the meta
    # model is at hand; handed to the copy beside the facts (--memory-out), never frozen with them.
    memory_default: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelFacts:
        """The facts of an answers file. Those of earlier versions also carry the data branch the probe then
        recommended (``recommended_branch``, ``branch_reason``, ``template``, ``collator_id``): that choice is
        the data stage's now (``hooks.data.candidates.recommend``), so such keys are left out here."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def to_json(self, *, with_timings: bool = True) -> str:
        data = asdict(self)
        data.pop("memory_default")
        # most models have none of these: absent, so that their answers files stay as they were
        for key in ("auto_models", "embeddings_in", "precision_flags", "frozen_by_model"):
            if not data[key]:
                data.pop(key)
        if not with_timings:
            data.pop("timings")
        return json.dumps(data, sort_keys=True)


# tekken.json: Mistral's own tokenizer format (Voxtral), which transformers loads through mistral_common.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "tekken.json", "vocab.json",
                   "vocab.txt", "spiece.model")


def check_model_dir(model_dir: Path, *, trust_remote_code: bool) -> dict[str, Any]:
    """Fail early, naming the field and the fix, before anything heavy is imported."""
    if not model_dir.is_dir():
        raise ProbeError(f"model_path: {model_dir} does not exist or is not a directory; give the local model folder")
    config_file = model_dir / "config.json"
    if not config_file.is_file():
        raise ProbeError(f"model_path: {model_dir} has no config.json; point it at a Hugging Face model folder")
    try:
        raw = json.loads(config_file.read_text())
    except json.JSONDecodeError as err:
        raise ProbeError(f"model_path: {config_file} is not valid JSON ({err})") from err
    check_covered(raw)  # an architecture this project does not cover stops here, before anything is rendered
    if raw.get("auto_map") and not trust_remote_code:
        raise ProbeError(
            "trust_remote_code: config.json has auto_map (custom modeling code in the model folder); "
            "review those *.py files and answer trust_remote_code=true to allow it"
        )
    if is_custom_model(raw) and not trust_remote_code:
        raise ProbeError(
            "trust_remote_code: config.json has neither model_type nor auto_map, so the model is built from the "
            "folder's own *.py code (MindSpeed-MM's custom-model path); review it and answer trust_remote_code=true")
    damaged = weights_error(model_dir)  # headers only: the smoke's from_pretrained would be the first to read them
    if damaged:
        raise ProbeError(damaged)
    return raw


def _subtree_totals(named: list[tuple[str, Any]], own: dict[str, int]) -> dict[str, int]:
    """Parameters per subtree in one reverse pre-order pass (children are summed before parents).

    ``named_modules()`` yields a parent before its children and skips whole duplicate subtrees,
    so every listed name's parent is listed too.
    """
    totals = dict(own)
    for name, _ in reversed(named):
        if name:
            totals[name.rpartition(".")[0]] += totals[name]
    return totals


def module_table(model: Any) -> ModuleTable:
    """Flatten the module tree; each shared parameter is owned by its first module."""
    import torch

    with _gc_paused():
        named = list(model.named_modules())
        seen: set[int] = set()
        own: dict[str, int] = {}
        first_owner: dict[int, str] = {}
        tied: set[tuple[str, str]] = set()
        for name, mod in named:
            count = 0
            for param in mod._parameters.values():  # == parameters(recurse=False), without the generator stack
                if param is None:
                    continue
                if id(param) in seen:
                    if first_owner[id(param)] != name:  # registered twice on one module: not a tie
                        tied.add((first_owner[id(param)], name))
                    continue
                seen.add(id(param))
                first_owner[id(param)] = name
                count += param.numel()
            own[name] = count
        totals = _subtree_totals(named, own)
        lists = (torch.nn.ModuleList, torch.nn.ModuleDict)
        modules = [ModuleInfo(name, type(mod).__name__, totals[name], own[name], isinstance(mod, lists))
                   for name, mod in named]
        names = {id(m): n for n, m in named}
        inp, out = embeddings(model, "get_input_embeddings"), embeddings(model, "get_output_embeddings")
        if inp is None and (holder := embeddings_holder(model)):  # Ovis2: the class names none, its ``llm`` does
            inner = getattr(model, holder)
            inp, out = embeddings(inner, "get_input_embeddings"), embeddings(inner, "get_output_embeddings")
        no_split = no_split_modules(model)
        return ModuleTable(
            modules=modules,
            no_split=no_split,
            input_embeddings=names.get(id(inp)) if inp is not None else None,
            output_embeddings=names.get(id(out)) if out is not None else None,
            tied=sorted(tied),
            hidden_state_sources=hidden_state_sources(model, names),
            called_directly=called_directly(model, names),
            entered_by_method=entered_by_method(model, names),
            no_recompute_classes=no_recompute_classes(named),
        )


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


def attention_support(model: Any) -> dict[str, bool]:
    """Attention implementations that every sub-model of the built model declares.

    A composite model is only as capable as its least capable tower: a timm vision tower
    (Gemma 3n, Perception-LM) declares neither SDPA nor flash attention, and transformers refuses
    to build it with them.
    """
    from transformers import PreTrainedModel

    parts = [m for m in model.modules() if isinstance(m, PreTrainedModel)]
    return {"sdpa": all(m._supports_sdpa for m in parts),
            "flash_attention_2": all(m._supports_flash_attn or getattr(m, "_supports_flash_attn_2", False)
                                     for m in parts)}


def attention_set_by_model(model: Any) -> dict[str, str]:
    """Sub-configs whose attention implementation the model's own code set, unlike the one it was built with.

    Remote code often picks attention itself (``llm_config._attn_implementation = "flash_attention_2"
    if has_flash_attn else "eager"``): the YAML's ``attn_implementation`` then does not reach that
    part. transformers' own classes pass the built implementation down (checked only for remote code).
    """
    built = getattr(model.config, "_attn_implementation", None)
    out = {}
    for name in getattr(model.config, "sub_configs", {}) or {}:
        value = getattr(getattr(model.config, name, None), "_attn_implementation", None)
        if value and built and value != built:
            out[name] = value
    return out


MEDIA_PREFIXES = ("pixel", "image", "video")


def embeddings_holder(model: Any) -> str:
    """The direct child that has both embeddings where the model itself names neither, else ""."""
    if embeddings(model, "get_input_embeddings") is not None:
        return ""
    for name, child in model.named_children():
        if None not in (embeddings(child, "get_input_embeddings"), embeddings(child, "get_output_embeddings")):
            return name
    return ""


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


def media_tokens(config: Any) -> dict[str, Any]:
    keys = ("image_token_id", "video_token_id", "image_token_index", "vision_start_token_id",
            "vision_end_token_id", "boi_token_index", "eoi_token_index")
    return {k: getattr(config, k) for k in keys if isinstance(getattr(config, k, None), int)}


def sub_configs(config: Any) -> dict[str, str]:
    found = {}
    for key in sorted(getattr(config, "sub_configs", {}) or {}):
        sub = getattr(config, key, None)
        if sub is not None and hasattr(sub, "model_type"):
            found[key] = sub.model_type
    return found


def check_interpreter() -> None:
    """The interpreter the user named must be the training environment: torch and transformers import."""
    for package in ("torch", "transformers"):
        try:
            __import__(package)
        except ImportError as err:
            raise ProbeError(f"python: {sys.executable} cannot import {package} ({err}); answer the interpreter of the "
                             "training environment (torch and transformers 4.57.x installed)") from err


@dataclass
class Probed:
    """The model facts and what they were read from, while the weightless build is still at hand: the data
    path's facts (``hooks.data.facts``) run the model's own code on it, the memory plan measures it."""

    facts: ModelFacts
    model: Any
    table: ModuleTable
    plan: Plan
    config: Any  # the trained (sub-)model's config
    how: str  # how the structure was built (hooks.model.build)
    timings: dict[str, float]


def probe_model(model_dir: Path, *, trust_remote_code: bool = False, checkout: Path | None = None,
                trained_submodule: str | None = None, with_tokenizer: bool = False) -> Probed:
    """The model facts of ``model_dir``; raises ``ProbeError`` with a field-naming message on bad input.

    ``checkout``/``trained_submodule``: where the framework trains a sub-model of the published class (its
    in-repo plugin's choice, or the user's), everything from the module table on describes that sub-model.
    ``with_tokenizer``: the folder must hold tokenizer files (the data path reads them). The data path's facts
    and the branch choice are the data stage's (``hooks.probe`` puts them together).
    """
    t0 = time.perf_counter()
    check_model_dir(model_dir, trust_remote_code=trust_remote_code)
    if with_tokenizer and not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        raise ProbeError(f"model_path: {model_dir} has no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, ...); "
                         "copy them from the model's release into the folder")
    check_interpreter()
    from hooks.compat import ensure_torchvision

    ensure_torchvision()  # transformers' modeling imports pull in torchvision when it is installed
    import torch  # noqa: F401 - timed separately from config loading

    t1 = time.perf_counter()
    config, cls, custom = load_config_and_class(model_dir, trust_remote_code=trust_remote_code)
    t2, cpu2 = time.perf_counter(), time.process_time()
    with _gc_paused():  # a full collection over a 30k-module meta model costs ~1 s; nothing here is cyclic garbage
        model, how, failures = build_structure(cls, config, model_dir)
        published, published_config = cls, config
        model, config, stage = select_stage(model, config, checkout=checkout, trained_submodule=trained_submodule)
        cls = type(model)
        t3 = time.perf_counter()
        table = module_table(model)
        plan: Plan = derive_plan(table)
        attention = attention_support(model)
        own_code = bool(getattr(published_config, "auto_map", None)) or custom
        build = {"how": how, "failures": failures,
                 "attention_set_by_model": attention_set_by_model(model) if own_code else {}}
    t4, cpu4 = time.perf_counter(), time.process_time()
    params, has_kwargs, returns_loss = forward_facts(cls)
    model_type = type(published_config).model_type  # an instance may proxy its text sub-config's attributes
    text_cfg = getattr(config, "text_config", config)
    facts = ModelFacts(
        model_type=model_type,
        architecture=cls.__name__,
        class_module=cls.__module__,
        remote_code=own_code,
        custom_model=custom,
        sub_configs=sub_configs(config),
        num_parameters=table.total_params,
        forward_params=params,
        forward_accepts_kwargs=has_kwargs,
        returns_loss=returns_loss,
        tie_word_embeddings=bool(getattr(config, "tie_word_embeddings", False)
                                 or getattr(text_cfg, "tie_word_embeddings", False)) and bool(table.tied),
        no_split_modules=table.no_split,
        media_tokens=media_tokens(config),
        plan=plan.to_dict(),
        attention=attention,
        build=build if how != META or build["attention_set_by_model"] else {},
        unused_media=unused_media_params(cls),
        auto_models=auto_models(cls, config) if own_code else [],
        embeddings_in=embeddings_holder(model) if own_code else "",
        precision_flags=precision_flags(cls, published_config) if own_code else [],
        frozen_by_model=frozen_by_model(model),
        trained_submodule=stage.facts(published, cls) if stage else {},
    )
    timings = {"imports_s": t1 - t0, "config_s": t2 - t1, "meta_build_s": t3 - t2, "plan_s": t4 - t3,
               "build_plan_cpu_s": cpu4 - cpu2}
    return Probed(facts, model, table, plan, config, how, timings)


def default_memory_plan(probed: Probed, model_dir: Path) -> dict[str, Any]:
    """The memory plan for copier's default cluster while the model is built; one image's length (the data
    path's processor facts, already in ``probed.facts``) sizes the samples (``memory.sample_cutoff``)."""
    with _gc_paused():
        return _default_memory_plan(probed.model, probed.table, probed.plan, probed.config, model_dir, probed.how,
                                    {"processor": probed.facts.processor})


def _default_memory_plan(model: Any, table: ModuleTable, plan: Plan, config: Any, model_dir: Path,
                         how: str, facts: dict[str, Any]) -> dict[str, Any]:
    """The memory plan for copier's default cluster, or {} (the copy then runs ``hooks.model.cluster`` itself)."""
    from hooks.model import memory, memory_plan, memory_text

    try:
        notes = [] if how == META else [f"built with {how}: shapes may not be the published model's"]
        shapes = memory.shapes_of(model, table, plan, config, model_dir.name, notes)
        return memory_text.summary(memory_plan.plan_memory(shapes, **memory.DEFAULT_CLUSTER,
                                                           cutoff_len=memory.sample_cutoff(facts)))
    except Exception:  # noqa: BLE001 - the plan is an extra here; the copy computes it again on its own
        return {}


def _processor_line(proc: dict[str, Any]) -> str:
    if "class" not in proc:
        return f"not loaded ({proc.get('error', 'skipped')})"
    chat = (proc.get("data_format") or {}).get("chat") or {}
    form = ("chat format: " + ("slots" if not chat.get("problems") else "not slots")) if chat else "no chat template"
    return f"{proc['class']}, image token {proc.get('image_token')!r}, outputs {proc.get('output_keys')}, {form}"


def ignored_media_text(facts: ModelFacts) -> str:
    return (f"{facts.architecture}.forward takes {facts.unused_media} but never uses them: the media would not reach "
            "the model and it would train on text alone")


def towers_text(plan: dict[str, Any]) -> str:
    """The plan's towers with the medium each encodes (``Plan.towers``), then the language tower; plans frozen
    before the media were recorded list their ``vision_towers`` as they were."""
    towers = plan.get("towers")
    if towers is None:
        towers = {name: "vision" for name in plan.get("vision_towers") or []}
    parts = [f"{name} ({medium or 'no medium: not an encoder'})" for name, medium in towers.items()]
    if plan.get("language_tower"):
        parts.append(f"{plan['language_tower']} (language)")
    return ", ".join(parts) or "none found"


def render_table(facts: ModelFacts) -> str:
    """Human-readable summary for the terminal and MIGRATION.md."""
    plan = facts.plan
    lines = [
        f"class            {facts.architecture} ({facts.class_module})",
        f"model_type       {facts.model_type}  sub-configs {facts.sub_configs}",
        f"parameters       {facts.num_parameters:,}",
        f"forward          {', '.join(facts.forward_params)}{', **kwargs' if facts.forward_accepts_kwargs else ''}",
        f"returns .loss    {facts.returns_loss}   tied embeddings {facts.tie_word_embeddings}",
        f"no_split         {', '.join(facts.no_split_modules)}",
        f"media tokens     {facts.media_tokens}",
        f"processor        {_processor_line(facts.processor)}",
        f"towers           {towers_text(plan)}",
        *([f"trains           {stage['name']} of {stage['published_class']} only: {stage['reason']}"]
          if (stage := facts.trained_submodule) else []),
        "",
        f"{'fsdp pattern':56} {'matched':>7} {'params':>14}",
    ]
    for rep in plan["reports"]:
        lines.append(f"{rep['pattern']:56} {rep['matched']:>7} {rep['params']:>14,}")
    lines += [
        f"share of parameters in non-root units: {plan['non_root_share']:.1%}",
        f"recompute        {plan['recompute_modules']}",
        f"expert parallel  {plan['ep_modules'] or 'none (dense)'}",
        f"freeze proposal  {plan['freeze_proposal']} (media encoders; not applied by default)",
    ]
    lines += [f"PROBLEM: {p}" for p in plan["problems"]]
    return "\n".join(lines)


def findings_text(facts: ModelFacts, model_path: str, width: int = 78) -> str:
    """The probe's findings in a few lines for an 80-column terminal: the evidence for the data branch.

    The recommendation itself and its reason are the data-branch question's help, right below.
    """
    from hooks.terminal import wrap

    plan, proc = facts.plan, facts.processor
    media = [p for p in facts.forward_params if input_medium(p) or "grid" in p]
    processor = (f"{proc['class']}, chat template {'yes' if proc.get('has_chat_template') else 'no'}, "
                 f"image token {proc.get('image_token')!r}" if "class" in proc else f"not loaded ({proc.get('error')})")
    stage = facts.trained_submodule
    rows = [
        ("class", f"{facts.architecture} ({'remote code' if facts.remote_code else facts.class_module.split('.')[0]})"),
        *([("trains", f"{stage['name']} of {stage['published_class']} only: {stage['reason']}")] if stage else []),
        ("parameters", f"{facts.num_parameters:,}; tied embeddings {'yes' if facts.tie_word_embeddings else 'no'}"),
        ("processor", processor),
        ("media inputs", ", ".join(media) or "none in forward()"),
        ("towers", towers_text(plan)),
        ("FSDP2 units", f"{len(plan['apply_modules'])} patterns, {plan['non_root_share']:.1%} of parameters "
                        "outside the root"),
        ("recompute", f"{len(plan['recompute_modules'])} patterns; expert parallel: "
                      f"{', '.join(plan['ep_modules']) or 'none (dense)'}"),
    ]
    build = facts.build or {}
    if build.get("how"):
        rows.append(("built on", f"{build['how']} ({'; '.join(build['failures'])})" if build["failures"]
                     else build["how"]))
    rows += [("attention", f"the model's code sets {name} to {value!r} itself: the YAML's attn_implementation "
                           "does not reach it") for name, value in (build.get("attention_set_by_model") or {}).items()]
    if facts.unused_media:
        rows.append(("PROBLEM", ignored_media_text(facts)))
    rows += [("PROBLEM", problem) for problem in plan["problems"]]
    lines = [f"Probe findings ({build.get('how') or 'meta device'}, no weights read):"]
    for key, value in [("model folder", model_path), *rows]:
        lines += wrap(f"  {key:<13}{value}", width, hang=15)
    return "\n".join(lines)

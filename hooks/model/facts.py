"""Probe a local Hugging Face VLM directory without reading its weights.

The config is loaded with ``AutoConfig`` (remote code only with consent), the
model is built on the meta device and ``named_modules()``, ``_no_split_modules``,
tied weights and the forward signature are read. The result (``ModelFacts``) is
everything the templates need; it is frozen into the copier answers file so a
later ``copier update`` does not need the model directory.

The data path's facts (processor, chat format, the model's own data code) and the branch are the data
stage's (``hooks.data.facts``); ``python -m hooks.probe MODEL_DIR [--json] [--trust-remote-code]`` prints both.
What the model's own source says is read in ``hooks.model.source``; the facts as text, in ``hooks.model.facts_text``.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hooks.compat import no_split_modules
from hooks.model.build import META, SHRUNK_CPU, build_structure, frozen_by_model, gc_paused
from hooks.model.coverage import check_covered
from hooks.model.loading import ProbeError, is_custom_model, load_config_and_class
from hooks.model.plan import ModuleInfo, ModuleTable, Plan, derive_plan
from hooks.model.processor_facts import ProcessorFacts
from hooks.model.source import (
    auto_models,
    called_directly,
    entered_by_method,
    hidden_state_sources,
    no_recompute_classes,
    precision_flags,
    unused_media_params,
)
from hooks.model.stages import TrainedStage, embeddings, forward_facts
from hooks.model.stages import select as select_stage
from hooks.model.weights import parameters_error, weights_error


@dataclass
class BuildRecord:
    """How the probe built the model's structure without weights (``hooks.model.build``), where it matters: a
    release whose ``__init__`` defeats the meta device, or whose code picks its own attention. Frozen as
    ``model_facts.build`` (``{}`` when the plain meta device built it and the code picks nothing)."""

    how: str = ""  # the way that worked: "meta device", "accelerate.init_empty_weights()", "cpu (shrunk config)"
    failures: list[str] = field(default_factory=list)  # why each earlier way failed, in the order tried
    # sub-config -> the attention implementation the model's own code sets for it (the YAML's does not reach it)
    attention_set_by_model: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> BuildRecord:
        return cls(**(data or {}))


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
    plan: Plan  # FSDP2 units, recompute, expert parallel, freeze proposal, with their counts (hooks.model.plan)
    processor: ProcessorFacts = field(default_factory=ProcessorFacts)  # the data stage's (hooks.data.facts)
    attention: dict[str, bool] = field(default_factory=dict)  # implementations every sub-model declares
    build: BuildRecord = field(default_factory=BuildRecord)  # how the structure was built, where it matters
    unused_media: list[str] = field(default_factory=list)  # media parameters forward() never reads
    custom_model: bool = False  # config.json without model_type/auto_map: MindSpeed-MM's custom-model path
    trained_submodule: TrainedStage | None = None  # the sub-model trained where the class bundles several, and why
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
    # The transformers release the copy was verified with, where the model needs transformers 5 (its config.json was
    # saved by a 5.x release, and so is the interpreter): the system test's script pins it and restores the
    # original after, as MindSpeed-MM's Qwen3.5 case installs 5.2.0. Empty for a model 4.57 loads.
    transformers_required: str = ""
    # The memory plan for copier's default cluster (hooks.model.memory.DEFAULT_CLUSTER), computed while the meta
    # model is at hand; handed to the copy beside the facts (--memory-out), never frozen with them.
    memory_default: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelFacts:
        """The facts of an answers file. Those of earlier versions also carry the data branch the probe then
        recommended (``recommended_branch``, ``branch_reason``, ``template``, ``collator_id``): that choice is
        the data stage's now (``hooks.data.candidates.recommend``), so such keys are left out here."""
        names = {f.name for f in fields(cls)}
        given = {k: v for k, v in data.items() if k in names}
        typed = {"build": BuildRecord.from_dict(given.get("build")), "plan": Plan.from_dict(given["plan"]),
                 "processor": ProcessorFacts.from_dict(given.get("processor")),
                 "trained_submodule": TrainedStage.from_dict(given.get("trained_submodule"))}
        return cls(**{**given, **typed})

    @classmethod
    def of(cls, value: ModelFacts | dict[str, Any] | None) -> ModelFacts | None:
        """The facts themselves, or those of an answers file's ``model_facts`` mapping (what copier hands a filter or
        a question's check); None for none (a copy whose probe has not run yet)."""
        if value is None or isinstance(value, ModelFacts):
            return value
        return cls.from_dict(value) if value else None

    def to_json(self, *, with_timings: bool = True) -> str:
        data = asdict(self)
        data["processor"] = self.processor.to_dict()
        data["trained_submodule"] = self.trained_submodule.to_dict() if self.trained_submodule else {}
        data.pop("memory_default")
        if not self.build.how:
            data["build"] = {}  # built on the meta device, attention left to the YAML: nothing to record
        # most models have none of these: absent, so that their answers files stay as they were
        for key in ("auto_models", "embeddings_in", "precision_flags", "frozen_by_model", "transformers_required"):
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

    with gc_paused():
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


def embeddings_holder(model: Any) -> str:
    """The direct child that has both embeddings where the model itself names neither, else ""."""
    if embeddings(model, "get_input_embeddings") is not None:
        return ""
    for name, child in model.named_children():
        if None not in (embeddings(child, "get_input_embeddings"), embeddings(child, "get_output_embeddings")):
            return name
    return ""


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


def transformers_required(model_dir: Path) -> str:
    """The interpreter's transformers release where the model needs transformers 5 ("" otherwise): its config.json
    was saved by a 5.x release and the interpreter runs one."""
    import transformers

    try:
        saved = str(json.loads((model_dir / "config.json").read_text()).get("transformers_version") or "")
    except (OSError, ValueError):
        return ""
    major = lambda version: int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0  # noqa: E731
    return transformers.__version__ if major(saved) >= 5 and major(transformers.__version__) >= 5 else ""


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
    with gc_paused():  # a full collection over a 30k-module meta model costs ~1 s; nothing here is cyclic garbage
        model, how, failures = build_structure(cls, config, model_dir)
        # the weights' names and shapes against this build (headers only); a shrunk build has other sizes, a custom
        # model (MindSpeed-MM's custom path) loads its own way
        mismatch = parameters_error(model, model_dir) if how != SHRUNK_CPU and not custom else ""
        if mismatch:
            raise ProbeError(mismatch)
        published, published_config = cls, config
        model, config, stage = select_stage(model, config, checkout=checkout, trained_submodule=trained_submodule)
        cls = type(model)
        t3 = time.perf_counter()
        table = module_table(model)
        plan: Plan = derive_plan(table)
        attention = attention_support(model)
        own_code = bool(getattr(published_config, "auto_map", None)) or custom
        build = BuildRecord(how, failures, attention_set_by_model(model) if own_code else {})
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
        plan=plan,
        attention=attention,
        build=build if how != META or build.attention_set_by_model else BuildRecord(),
        unused_media=unused_media_params(cls),
        auto_models=auto_models(cls, config) if own_code else [],
        embeddings_in=embeddings_holder(model) if own_code else "",
        precision_flags=precision_flags(cls, published_config) if own_code else [],
        frozen_by_model=frozen_by_model(model),
        transformers_required=transformers_required(model_dir),
        trained_submodule=stage.facts(published, cls) if stage else None,
    )
    timings = {"imports_s": t1 - t0, "config_s": t2 - t1, "meta_build_s": t3 - t2, "plan_s": t4 - t3,
               "build_plan_cpu_s": cpu4 - cpu2}
    return Probed(facts, model, table, plan, config, how, timings)


def default_memory_plan(probed: Probed, model_dir: Path) -> dict[str, Any]:
    """The memory plan for copier's default cluster while the model is built; one image's length (the data
    path's processor facts, already in ``probed.facts``) sizes the samples (``memory.sample_cutoff``)."""
    with gc_paused():
        return _default_memory_plan(probed.model, probed.table, probed.plan, probed.config, model_dir, probed.how,
                                    probed.facts.processor.one_image_tokens or 0)


def _default_memory_plan(model: Any, table: ModuleTable, plan: Plan, config: Any, model_dir: Path,
                         how: str, one_image_tokens: int) -> dict[str, Any]:
    """The memory plan for copier's default cluster, or {} (the copy then runs ``hooks.model.cluster`` itself)."""
    from hooks.model import memory, memory_plan, memory_text

    try:
        notes = [] if how == META else [f"built with {how}: shapes may not be the published model's"]
        shapes = memory.shapes_of(model, table, plan, config, model_dir.name, notes)
        return memory_text.summary(memory_plan.plan_memory(shapes, **memory.DEFAULT_CLUSTER,
                                                           cutoff_len=memory.sample_cutoff(one_image_tokens)))
    except Exception:  # noqa: BLE001 - the plan is an extra here; the copy computes it again on its own
        return {}

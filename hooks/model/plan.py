"""Derive MindSpeed-MM's FSDP2, recompute, expert-parallel and freeze plans from a module tree.

Pure functions over a ``ModuleTable`` (names, classes, parameter counts) so the
plan can be computed from a meta-device model, stored, re-checked and tested
without torch. The rules, in the spirit of accelerate's auto-wrap policy but
emitted as MindSpeed-MM ``apply_modules`` patterns:

* **Containers** are ``ModuleList``s (not inside another container's element)
  whose elements share one class and hold parameters. Their elements become
  ``<list>.{*}`` units. Containers whose class is in ``_no_split_modules`` or is
  named like a layer/block are **block containers**: recompute targets too.
* **Towers** are the direct children of the deepest module enclosing all block
  containers (``model.visual``, ``model.language_model``): one unit each.
* Inside a tower, siblings *after* a container (mergers, deepstack mergers) are
  units when they hold ≥ 1% of the tower's parameters; the language tower's
  input embedding is its own unit, as in MindSpeed-MM's examples.
* Modules beside the towers with parameters (projectors) are units; the output
  head is a unit.
* Tied weights: a unit may not contain only one side of a tie (two units would
  own one weight), so such units are dropped and the enclosing unit owns both.
* VQ image tokenizers (``*VQVAE``) are never units: models call their ``encode()``, which
  bypasses FSDP2's forward hooks, so the enclosing unit (or the root) owns them; likewise any module
  the model's own code enters through a method other than ``forward`` (Qwen-VL's ``visual.encode``).
* A unit whose inner module the model's forward calls itself (Kosmos-2's
  ``self.vision_model.model.post_layernorm(...)``) is not a unit: that call would bypass the
  unit's forward and meet sharded weights.
* Order follows MindSpeed-MM's hand-written examples: vision tower internals,
  tower, projectors, language embedding, layers, tower, head. FSDP wraps in
  post-order regardless; the order only matters for prefetch.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from hooks.model.matching import generalize, module_name_match
from hooks.model.modality import tower_medium

_BLOCK_CLASS = re.compile(r"(Layer|Block)$")
_EXPERTS_CLASS = re.compile(r"Experts$")
_EXPERTS_NAME = "experts"  # GLM-4.5V: ModuleList of per-expert MLPs; Aria: AriaGroupedExpertsMLP
POST_CONTAINER_MIN_SHARE = 0.01
# VQ image tokenizers (Chameleon, Emu3, Janus ``*VQVAE``) are entered through ``.encode()`` /
# ``.decode()``, never ``forward()``: as FSDP2 units their forward hooks would not all-gather them.
_NOT_FORWARDED_CLASS = re.compile(r"VQ(VAE|GAN|Model)$")


@dataclass(frozen=True)
class ModuleInfo:
    """One entry of ``named_modules()``: enough to plan without the model."""

    name: str
    cls: str
    params: int  # parameters in the whole subtree (shared ones counted once)
    own_params: int  # parameters registered directly on this module
    is_list: bool = False


@dataclass
class ModuleTable:
    """The probe's view of a model, in ``named_modules()`` order."""

    modules: list[ModuleInfo]
    no_split: list[str] = field(default_factory=list)
    input_embeddings: str | None = None
    output_embeddings: str | None = None
    tied: list[tuple[str, str]] = field(default_factory=list)  # module pairs sharing a weight
    hidden_state_sources: list[str] = field(default_factory=list)  # read with output_hidden_states=True
    called_directly: list[str] = field(default_factory=list)  # nested modules the model's forward calls itself
    entered_by_method: list[str] = field(default_factory=list)  # modules a forward enters by another method
    no_recompute_classes: list[str] = field(default_factory=list)  # forward lacks past_key_values/**kwargs

    def __post_init__(self) -> None:
        self._by_name = {m.name: m for m in self.modules}
        # Indexes so planning stays linear on per-expert MoEs (GLM-4.5V: ~30k modules).
        self._children: dict[str, list[ModuleInfo]] = {}
        for m in self.modules:
            if m.name:
                self._children.setdefault(m.name.rpartition(".")[0], []).append(m)
        self._matches: dict[str, list[str]] = {}

    def get(self, name: str) -> ModuleInfo | None:
        return self._by_name.get(name)

    def children(self, name: str) -> list[ModuleInfo]:
        return list(self._children.get(name, ()))

    def child_classes(self, name: str) -> set[str]:
        return {k.cls for k in self._children.get(name, ())}

    def matching(self, pattern: str) -> list[str]:
        """Names ``pattern`` matches, in module order (cached; a cheap prefix / depth filter runs first)."""
        if pattern not in self._matches:
            prefix = re.split(r"[{*?]", pattern, maxsplit=1)[0]
            # ``{*}`` / ``{a-b}`` match digits only: without a bare ``*`` or ``?`` the depth is fixed.
            free = "?" in pattern or "*" in pattern.replace("{*}", "")
            dots = pattern.count(".")
            self._matches[pattern] = [
                m.name for m in self.modules
                if m.name.startswith(prefix) and (free or m.name.count(".") == dots)
                and module_name_match(pattern, m.name)
            ]
        return self._matches[pattern]

    @property
    def total_params(self) -> int:
        root = self.get("")
        return root.params if root else 0


@dataclass
class PatternReport:
    pattern: str
    matched: int
    params: int  # parameters owned by the matched units (after nesting)


@dataclass
class Plan:
    """Everything the templates need; every list is in emission order.

    Towers are typed by the medium they encode (``hooks.model.modality.tower_medium``), never assumed visual:
    Qwen2-Audio's ``audio_tower`` is an audio encoder, Idefics2's perceiver ``connector`` encodes no medium of
    its own, and a bundle's talker or vocoder (were the published class planned whole) is no encoder at all.
    """

    apply_modules: list[str]
    recompute_modules: list[str]
    ep_modules: list[str]
    hook_modules: list[str]
    freeze_proposal: list[str]  # the media encoders (``encoder_towers``): what a user may choose to freeze
    vision_towers: list[str]  # the towers that encode images and videos (medium "vision") only
    language_tower: str | None
    reports: list[PatternReport]
    non_root_share: float
    problems: list[str]
    # Classes whose forward takes neither past_key_values nor **kwargs: MindSpeed-MM's recompute wrapper
    # passes past_key_values=None, so blocks holding them are left out (all of them: recompute false).
    recompute_left_out: list[str] = field(default_factory=list)
    # Every tower besides the language tower -> the medium it encodes ("vision", "audio"), "" for one whose name
    # names none (a connector, a talker, a vocoder); in emission order. Plans frozen before it have none.
    towers: dict[str, str] = field(default_factory=dict)

    @property
    def encoder_towers(self) -> dict[str, str]:
        """The media encoders among ``towers``: name -> "vision"/"audio"."""
        return {name: medium for name, medium in self.towers.items() if medium}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """The plan of an answers file (``model_facts.plan``). Plans frozen before the media were recorded have no
        ``towers``: their ``vision_towers`` were the only towers then, so they stand in as vision encoders."""
        given = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        given["reports"] = [PatternReport(**report) for report in data.get("reports", [])]
        if "towers" not in data:
            given["towers"] = {name: "vision" for name in data.get("vision_towers") or []}
        return cls(**given)


def _inside(name: str, scope: str) -> bool:
    return scope == "" or name == scope or name.startswith(scope + ".")


def _without_bypassed_units(units: list[str], called: list[str]) -> list[str]:
    """Drop a unit whose inner module the model's forward calls itself, around the unit's own forward.

    Kosmos-2 calls ``self.vision_model.model.post_layernorm(...)``: were ``vision_model`` a unit, that
    layer norm would run on its still-sharded weights (FSDP2 gathers them only in the unit's forward).
    The innermost unit around each such module goes, unless the module is a unit itself; the next
    unit out then owns it, so the rule repeats until no unit is bypassed.
    """
    kept = list(units)
    changed = True
    while changed:
        changed = False
        for module in called:
            around = [u for u in kept if _inside(module, u) and u != ""]
            if not around or module in kept:
                continue
            innermost = max(around, key=len)
            kept.remove(innermost)
            changed = True
    return kept


def find_containers(table: ModuleTable) -> list[ModuleInfo]:
    """Outermost same-class ModuleLists with parameters, in module order."""
    found: list[ModuleInfo] = []
    for mod in table.modules:
        if not mod.is_list or mod.params == 0:
            continue
        if any(mod.name.startswith(c.name + ".") for c in found):
            continue
        classes = table.child_classes(mod.name)
        if len(classes) == 1:
            found.append(mod)
        elif classes and classes <= set(table.no_split):
            found.append(mod)  # mixed-class layer stacks (e.g. self/cross-attention layers)
    return found


def is_block_container(table: ModuleTable, container: ModuleInfo) -> bool:
    return all(c in table.no_split or _BLOCK_CLASS.search(c) for c in table.child_classes(container.name))


def _common_prefix(names: list[str]) -> str:
    split = [n.split(".") for n in names]
    common: list[str] = []
    for parts in zip(*split, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(common)


def find_towers(table: ModuleTable, blocks: list[ModuleInfo]) -> dict[str, list[ModuleInfo]]:
    """Map each tower name to its block containers."""
    if not blocks:
        return {}
    if len(blocks) == 1:
        parent = blocks[0].name.rpartition(".")[0]
        return {parent: blocks}
    body = _common_prefix([b.name for b in blocks])
    towers: dict[str, list[ModuleInfo]] = {}
    for block in blocks:
        rest = block.name[len(body) :].lstrip(".").split(".")
        tower = f"{body}.{rest[0]}" if body else rest[0]
        if tower == block.name:  # container directly under the body: the body is the tower
            tower = body
        towers.setdefault(tower, []).append(block)
    return towers


def _post_container_units(table: ModuleTable, tower: str, containers: list[ModuleInfo]) -> list[str]:
    """Siblings after a container inside the tower (mergers, heads) big enough to shard."""
    tower_params = table.get(tower).params if table.get(tower) else table.total_params
    units: list[str] = []
    for container in containers:
        parent = container.name.rpartition(".")[0]
        if not _inside(parent, tower):
            continue
        siblings = table.children(parent)
        after = siblings[[s.name for s in siblings].index(container.name) + 1 :]
        for sib in after:
            if sib.params == 0 or sib.params < POST_CONTAINER_MIN_SHARE * tower_params:
                continue
            units.append(sib.name)
    return units


def _projectors(table: ModuleTable, towers: list[str]) -> list[str]:
    """Parameterised modules beside the towers (e.g. ``model.multi_modal_projector``), never one enclosing a tower."""
    if len(towers) < 2:
        return []
    body = _common_prefix(towers)
    return [
        kid.name
        for kid in table.children(body)
        if kid.params and kid.name not in towers and kid.name != table.output_embeddings
        and not any(_inside(t, kid.name) for t in towers)
    ]


def _language_body(table: ModuleTable, language: str, blocks: list[ModuleInfo]) -> str:
    """The language tower without its LM head when the tower is a CausalLM wrapper.

    Llama-4 (and remote-code VLMs such as Kimi) nest ``language_model.model`` (embeddings,
    layers, norm) and ``language_model.lm_head`` under one ``language_model``. As a single
    unit the head would stay gathered through the whole decoder; like every other layout
    (and MindSpeed-MM's kimi example) the inner model is the tower and the head its own unit.
    Kept as is when the head is tied to the embedding: one unit must own both.
    """
    out, inp = table.output_embeddings, table.input_embeddings
    if not (out and inp and _inside(out, language)):
        return language
    for kid in table.children(language):
        if (_inside(inp, kid.name) and not _inside(out, kid.name) and not _breaks_tie(table, kid.name)
                and all(_inside(b.name, kid.name) for b in blocks)):
            return kid.name
    return language


def find_experts(table: ModuleTable, language: str | None) -> list[str]:
    """Routed-expert modules of the language tower (outermost only), for ``ep_plan.apply_modules``.

    Fused 3-D experts are ``*Experts`` classes (Qwen3-VL-MoE, Llama-4); per-expert MLP lists
    (GLM-4.5V) and grouped GEMMs (Aria) are only recognisable by the attribute name ``experts``.
    ``shared_experts`` / ``shared_expert`` are dense and never expert-parallel.
    """
    found: list[str] = []
    if language is None:
        return found
    for mod in table.modules:
        if not mod.params or not _inside(mod.name, language) or (found and _inside(mod.name, found[-1])):
            continue  # modules come in pre-order: an expert module's insides follow it directly
        if _EXPERTS_CLASS.search(mod.cls) or mod.name.rpartition(".")[2] == _EXPERTS_NAME:
            found.append(mod.name)
    return found


def _entered_by_forward(table: ModuleTable, unit: str) -> bool:
    """False for modules the model calls through another method (a VQ tokenizer's ``encode()``, Qwen-VL's
    ``self.visual.encode(paths)``); their enclosing unit must own them."""
    mod = table.get(unit)
    return not (mod and (_NOT_FORWARDED_CLASS.search(mod.cls) or unit in table.entered_by_method))


def _breaks_tie(table: ModuleTable, unit: str) -> bool:
    return any(_inside(a, unit) != _inside(b, unit) for a, b in table.tied)


def _as_patterns(table: ModuleTable, names: list[str], containers: set[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        mod = table.get(name)
        pattern = f"{name}.{{*}}" if name in containers or (mod and mod.is_list) else name
        if pattern not in out:
            out.append(pattern)
    return out


def derive_plan(table: ModuleTable) -> Plan:
    """Derive all plans from the module table; see the module docstring for the rules."""
    containers = find_containers(table)
    blocks = [c for c in containers if is_block_container(table, c)]
    towers = find_towers(table, blocks)
    language = next((t for t in towers if table.input_embeddings and _inside(table.input_embeddings, t)), None)
    if language is not None and (inner := _language_body(table, language, towers[language])) != language:
        towers[inner] = towers.pop(language)
        language = inner
    vision = [t for t in towers if t != language]  # every tower but the language tower: units before it
    media = {t: tower_medium(t) or "" for t in vision}
    container_names = {c.name for c in containers}

    ordered: list[str] = []
    for tower in vision:
        ordered += [c.name for c in towers[tower]]
        ordered += _post_container_units(table, tower, towers[tower])
        ordered.append(tower)
    ordered += _projectors(table, list(towers))
    if language is not None:
        if table.input_embeddings and table.input_embeddings != language:
            ordered.append(table.input_embeddings)
        ordered += [c.name for c in towers[language]]
        ordered += _post_container_units(table, language, towers[language])
        ordered.append(language)
    if table.output_embeddings and not (language and _inside(table.output_embeddings, language)):
        ordered.append(table.output_embeddings)
    ordered = [n for n in ordered if n and not _breaks_tie(table, n) and _entered_by_forward(table, n)
               and n not in table.hidden_state_sources]
    ordered = _without_bypassed_units(ordered, table.called_directly)
    apply_modules = _as_patterns(table, ordered, container_names)

    refused = {b.name: table.child_classes(b.name) & set(table.no_recompute_classes) for b in blocks}
    recompute = _as_patterns(table, [b.name for b in blocks if not refused[b.name]], container_names)
    experts = find_experts(table, language)
    ep_modules = list(dict.fromkeys(generalize(n) for n in experts))  # first-seen order
    hook_modules = recompute[-1:] if ep_modules and language else []
    reports, share, problems = check_plan(table, apply_modules)
    problems += [f"recompute pattern {p!r} matches no module" for p in recompute if not table.matching(p)]
    return Plan(
        apply_modules=apply_modules,
        recompute_modules=recompute,
        ep_modules=ep_modules,
        hook_modules=hook_modules,
        freeze_proposal=[t for t in vision if media[t]],
        vision_towers=[t for t in vision if media[t] == "vision"],
        language_tower=language,
        reports=reports,
        non_root_share=share,
        problems=problems,
        recompute_left_out=sorted(set().union(*refused.values())),
        towers=media,
    )


def unit_owners(table: ModuleTable, patterns: list[str]) -> dict[str, str]:
    """Map every module name to the innermost matched FSDP unit ("" = the root)."""
    units = {name for p in patterns for name in table.matching(p)}
    owners: dict[str, str] = {}
    for mod in table.modules:
        parent = mod.name.rpartition(".")[0]
        if mod.name in units:
            owners[mod.name] = mod.name
        elif mod.name and parent in owners:  # parents come first: reuse the parent's owner
            owners[mod.name] = owners[parent]
        else:
            parts = mod.name.split(".") if mod.name else []
            owners[mod.name] = next((c for i in range(len(parts) - 1, 0, -1)
                                     if (c := ".".join(parts[:i])) in units), "")
    return owners


def check_plan(table: ModuleTable, patterns: list[str]) -> tuple[list[PatternReport], float, list[str]]:
    """Per-pattern match counts and owned parameters, the non-root share, and problems.

    MindSpeed-MM only fails when *no* pattern matches; we require every pattern
    to match and no module to be matched by two patterns (it would be wrapped twice).
    """
    owners = unit_owners(table, patterns)
    owned: dict[str, int] = {}
    for mod in table.modules:
        owned[owners[mod.name]] = owned.get(owners[mod.name], 0) + mod.own_params
    problems: list[str] = []
    reports: list[PatternReport] = []
    for pattern in patterns:
        hits = table.matching(pattern)
        if not hits:
            problems.append(f"pattern {pattern!r} matches no module")
        for other in patterns:
            if other != pattern and other > pattern and any(module_name_match(other, h) for h in hits):
                problems.append(f"patterns {pattern!r} and {other!r} match the same module")
        reports.append(PatternReport(pattern, len(hits), sum(owned.get(h, 0) for h in hits)))
    total = sum(m.own_params for m in table.modules) or 1
    share = 1.0 - owned.get("", 0) / total
    return reports, share, problems

"""2. The chat template, collator, dataset type and model id are registered by the checkout or the plugins.

Also where a model's files and its plugins' modules are, and what those modules register (parsed, never imported).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hooks import dig, scaffold
from hooks.check.findings import Finding, Framework, update_command
from hooks.framework import checkout

REGISTER_CALLS = {"_register_template": "template", "_register_data_collator": "collator"}
REGISTERS = {"model_register": "model", "data_register": "dataset"}


# --- files of a model and its plugins ----------------------------------------------------------------------


def own_dirs(dest: Path, model_id: str) -> list[Path]:
    """The folders msmm-migrate generated for ``model_id`` (those that exist)."""
    dirs = [dest / scaffold.example_dir(model_id), dest / scaffold.model_plugin_dir(model_id),
            dest / scaffold.dataset_dir(model_id)]
    return [d for d in dirs if d.is_dir()]


def files_under(root: Path, suffix: str = "") -> Iterator[Path]:
    for path in sorted(root.rglob(f"*{suffix}")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield path


def plugin_path(dest: Path, entry: str) -> Path | None:
    """The package folder or module a ``training.plugin`` entry names, if it exists."""
    rel = entry.strip().strip("/") if "/" in entry else entry.strip().strip(".").replace(".", "/")
    for path in (dest / rel, dest / f"{rel}.py"):
        if path.exists():
            return path
    return None


def plugin_modules(path: Path) -> list[Path]:
    """The modules the trainer imports for one plugin (``pkgutil.walk_packages``: subfolders with ``__init__``)."""
    if path.is_file():
        return [path]
    found = sorted(p for p in path.glob("*.py"))
    for sub in sorted(p for p in path.iterdir() if p.is_dir() and (p / "__init__.py").is_file()):
        found += plugin_modules(sub)
    return found


def parse_module(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None


@dataclass
class Registrations:
    """Names registered by a set of modules: kind -> name -> the registering file."""

    names: dict[str, dict[str, Path]] = field(default_factory=lambda: {k: {} for k in ("template", "collator",
                                                                                        "dataset", "model")})
    collate_fn: set[str] = field(default_factory=set)  # datasets whose class brings its own collate_fn

    def add(self, path: Path) -> None:
        tree = parse_module(path)
        if tree is None:
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                kind, name = _registration(node)
                if kind:
                    self.names[kind].setdefault(name, path)
            if isinstance(node, ast.ClassDef):
                for deco in node.decorator_list:
                    kind, name = _registration(deco) if isinstance(deco, ast.Call) else (None, "")
                    if kind == "dataset" and any(isinstance(f, ast.FunctionDef) and f.name == "collate_fn"
                                                 for f in node.body):
                        self.collate_fn.add(name)


def _registration(call: ast.Call) -> tuple[str | None, str]:
    """(kind, name) for ``_register_template(name=...)``, ``_register_data_collator("x", ...)``,
    ``model_register.register("x")``/``data_register.register("x")``; (None, "") otherwise."""
    func = call.func
    kind = None
    if isinstance(func, ast.Name) and func.id in REGISTER_CALLS:
        kind = REGISTER_CALLS[func.id]
    elif isinstance(func, ast.Attribute) and func.attr == "register" and getattr(func.value, "id", None) in REGISTERS:
        kind = REGISTERS[func.value.id]
    if kind is None:
        return None, ""
    args = [k.value for k in call.keywords if k.arg in ("name", "obj_id")] + list(call.args[:1])
    for arg in args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return kind, arg.value
    return None, ""


# --- 2. registries -----------------------------------------------------------------------------------------


COLLATE_PARAM = ("data", "dataloader_param", "collate_param")


@dataclass(frozen=True)
class ModelRegistrations:
    """One model's side of the registry check: its YAML and answers, and what its modules register."""

    cfg: dict[str, Any]
    fw: Framework
    model_id: str
    answers: dict[str, Any]
    loaded: Registrations  # by the modules of training.plugin: what the trainer will have
    own: Registrations  # by the model's generated files, whether training.plugin names their folder or not

    @property
    def dataset_type(self) -> Any:
        return dig(self.cfg, "data", "dataset_param", "dataset_type")

    @property
    def own_dataset(self) -> bool:
        """The YAML names a dataset the model's own files register (data branch c)."""
        return self.dataset_type in self.own.names["dataset"]

    def not_loaded(self, kind: str, name: str) -> tuple[str, str] | None:
        """(finding, fix) where one of the model's own files registers ``name`` but training.plugin misses it."""
        path = self.own.names[kind].get(name)
        if path is None:
            return None
        rel = path.relative_to(self.fw.dest)
        return f"{rel} registers it, but its folder is not in training.plugin", f"add {rel.parent} to training.plugin"


def _branch_b_template(model: ModelRegistrations) -> list[Finding]:
    """Data branch b registers the model's chat template in its generated data plugin: that file must do so."""
    if model.answers.get("data_branch") != "b":
        return []
    dest, model_id = model.fw.dest, model.model_id
    data_plugin = dest / scaffold.data_plugin_file(model_id)
    if not data_plugin.is_file():
        return [Finding("error", f"{data_plugin.relative_to(dest)} is missing (data branch b registers the model's "
                        "chat template there)", f"re-render it: {update_command(model_id)}")]
    if data_plugin not in model.own.names["template"].values():
        return [Finding("error", f"{data_plugin.relative_to(dest)} registers no chat template "
                        "(_register_template(name=...))", f"re-render it: {update_command(model_id)}")]
    return []


def _two_collators(model: ModelRegistrations) -> list[Finding]:
    """collator_id and the deprecated model_name naming different collators: the trainer refuses to start."""
    collator_id, model_name = (dig(model.cfg, *COLLATE_PARAM, key) for key in ("collator_id", "model_name"))
    if collator_id and model_name and collator_id != model_name:
        return [Finding("error", f"collate_param names two collators, collator_id {collator_id!r} and model_name "
                        f"{model_name!r}: the trainer refuses it", "keep collator_id only")]
    return []


@dataclass(frozen=True)
class Registry:
    """One registry the YAML names an entry of, and how ``registry_findings`` reports a name it lacks.

    The fixes are ``str.format`` templates: ``{offer}`` (the names registered, sorted), ``{builtin}`` (the
    checkout's own, as it lists them), ``{key}`` (the checkout's collator key), ``{model_id}``, ``{update}``.
    """

    kind: str  # the Registrations kind (which registering call defines a name)
    label: str  # how the finding names the setting
    places: tuple[tuple[str, ...], ...]  # where the YAML names it: the first that is set
    unregistered: str  # how "<label> <name> is not registered" goes on when no own file registers it either
    fix: str
    builtin: Callable[[Path], list[str]] | None = None  # what the checkout registers itself, plugins aside
    unset: tuple[str, str] | None = None  # (finding, fix) when the YAML names none; None: nothing to check then
    exempt: Callable[[ModelRegistrations, Any], bool] = lambda model, name: False  # the name needs no registration
    before: Callable[[ModelRegistrations], list[Finding]] | None = None  # this registry's checks besides the lookup


REGISTRIES = (
    Registry("dataset", "dataset_type", (("data", "dataset_param", "dataset_type"),),
             " by the checkout or the plugins in training.plugin",
             "set data.dataset_param.dataset_type to huggingface or a dataset a plugin registers "
             "(data_register.register)",
             exempt=lambda model, name: name == "huggingface"),
    Registry("template", "chat template", (("data", "dataset_param", "basic_parameters", "template"),),
             " in this checkout (template.py) nor by the plugins in training.plugin",
             "set data.dataset_param.basic_parameters.template to one of {offer}, or re-render against this checkout: "
             "{update}",
             builtin=checkout.templates, exempt=lambda model, name: model.own_dataset, before=_branch_b_template),
    Registry("collator", "collator", ((*COLLATE_PARAM, "collator_id"), (*COLLATE_PARAM, "model_name")),
             " in this checkout (data_collator.py) nor by the plugins in training.plugin",
             "set collate_param.{key} to one of {offer}", builtin=checkout.collators,
             unset=("no collator set (data.dataloader_param.collate_param)",
                    "set collate_param.{key} to one of {builtin}"),
             # the model's own dataset collates (branch c): the collator is not used
             exempt=lambda model, name: model.own_dataset and model.dataset_type in model.own.collate_fn,
             before=_two_collators),
    Registry("model", "model.model_id", (("model", "model_id"),), " by the plugins in training.plugin",
             "add {plugin_dir} to training.plugin, or re-render: {update}"),
)


def _registrations(modules: Iterable[Path]) -> Registrations:
    found = Registrations()
    for module in modules:
        found.add(module)
    return found


def registry_findings(cfg: dict[str, Any], fw: Framework, model_id: str, plugins: list[Path],
                      answers: dict[str, Any]) -> list[Finding]:
    """Every name the YAML takes from a registry is registered by the checkout or a plugin (module docstring, 2)."""
    model = ModelRegistrations(
        cfg, fw, model_id, answers,
        loaded=_registrations(module for path in plugins for module in plugin_modules(path)),
        own=_registrations(module for folder in own_dirs(fw.dest, model_id)[1:]
                           for module in files_under(folder, ".py")))
    found: list[Finding] = []
    for registry in REGISTRIES:
        if registry.before is not None:
            found += registry.before(model)
        finding = _lookup(registry, model)
        if finding is not None:
            found.append(finding)
    return found


def _lookup(registry: Registry, model: ModelRegistrations) -> Finding | None:
    """The finding for the name ``registry``'s setting holds, if the checkout and the plugins do not register it."""
    name = next((value for value in (dig(model.cfg, *place) for place in registry.places) if value), None)
    if registry.exempt(model, name) or not (name or registry.unset):
        return None
    builtin = registry.builtin(model.fw.dest) if registry.builtin is not None else []
    registered = model.loaded.names[registry.kind]
    fields = {"offer": ", ".join(sorted(set(builtin) | set(registered))), "builtin": ", ".join(builtin),
              "key": model.fw.facts.get("collator_key", "collator_id"), "model_id": model.model_id,
              "plugin_dir": scaffold.model_plugin_dir(model.model_id), "update": update_command(model.model_id)}
    if not name and registry.unset is not None:
        what, fix = registry.unset
        return Finding("error", what, fix.format(**fields))
    if name in builtin or name in registered:
        return None
    hint = model.not_loaded(registry.kind, name)
    return Finding("error", f"{registry.label} {name!r} is not registered" + (f": {hint[0]}" if hint
                   else registry.unregistered), hint[1] if hint else registry.fix.format(**fields))



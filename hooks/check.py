"""``python -m hooks.check [CHECKOUT] [--smoke]``: are the migrated models in a MindSpeed-MM checkout still sound?

For every ``.copier-answers/<model_id>.yml`` in the checkout, without training (fit for a fork's CI):

1. **settings**: the model's YAML against the checkout's live settings schema (``hooks.framework.checkout``):
   unknown keys (the trainer accepts them silently and goes on without them), moved keys (recompute and
   ``loss_cfg`` where this checkout does not read them; a key that exists at another place), deprecated keys.
   Only the settings sections are checked (``model``, ``parallel``, ``training``, ``features``, ``tools`` and
   ``data.dataloader_param``); ``data.dataset_param`` is a dict the dataset itself reads.
2. **registries**: the chat template, the collator, the dataset type and the model id are registered by the
   checkout or by the plugins in ``training.plugin``.
3. **plugin imports**: the ``training.plugin`` paths exist, the model's plugin files parse, and every name they
   import from ``mindspeed_mm`` (or relatively, from their own folder) exists in the checkout.
4. **hook signatures**: ``overwrite_transformer_config`` takes as many arguments as this checkout's ModelHub passes.
5. **forward-key filter**: a plugin's ``_FORWARD_KEYS`` keeps every forward parameter the answers record.
6. **conflicts**: merge-conflict markers in the model's generated files, ``.rej`` files next to them.
7. **revision**: the framework revision the model was migrated against vs the checkout's (an info line).
8. **system test**: ``tests/st/`` holds the model's script, run config and baseline, which device the baseline came
   from, and whether it is stale (another framework revision, a changed run config): ``hooks.smoke.baseline``.

``--smoke`` also runs each model's smoke (``python -m hooks.smoke``, MIGRATION.md left as is) and reports its
verdict. One line per finding, ``<model_id>: error|warning|info: <finding> — fix: <what to do>``, then a
summary; the exit status is 1 when any finding is an error. The files are parsed, never imported.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hooks import dig, env_with_hooks, scaffold
from hooks.framework import checkout
from hooks.scaffold import StPaths
from hooks.smoke.baseline import baseline_findings

LEVELS = ("error", "warning", "info")
# Settings places whose contents a dataset reads itself: never checked against the schema.
FREE_PLACES = ("data.dataset_param", "data.val_dataset_param")
SETTINGS_ROOTS = ("model", "parallel", "training", "features", "tools", "data.dataloader_param")
REGISTER_CALLS = {"_register_template": "template", "_register_data_collator": "collator"}
REGISTERS = {"model_register": "model", "data_register": "dataset"}


def update_command(model_id: str) -> str:
    """The command that re-renders one model's scaffold."""
    return f"copier update --trust --defaults -a {scaffold.answers_file(model_id)}"


@dataclass(frozen=True)
class Finding:
    """One line of the report: what every checker returns.

    The checkers look at a setting, a file or a registry and need not know whose it is, so ``model`` is left
    empty there; ``check_model`` fills it in.
    """

    level: str  # error | warning | info
    what: str
    fix: str
    model: str = ""

    def line(self) -> str:
        return f"{self.model}: {self.level}: {self.what} — fix: {self.fix}"


@dataclass
class Framework:
    """What the checkout offers, read once for all its models."""

    dest: Path
    places: dict[str, list[str]]
    deprecated: set[str]
    facts: dict[str, Any]
    extras: set[str]

    @classmethod
    def read(cls, dest: Path) -> Framework:
        from hooks.smoke.settings import extras_read

        return cls(dest, checkout.schema(dest), set(checkout.deprecated(dest)), checkout.facts(dest),
                   extras_read(dest))


# --- 1. settings -------------------------------------------------------------------------------------------


def _moved_rules(facts: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Dotted key -> (where this checkout reads it, why the key is not read where it is)."""
    rules: dict[str, tuple[str, str]] = {}
    other = {"features": "parallel", "parallel": "features"}
    recompute_in = facts.get("recompute_in")
    if recompute_in in other:
        for key in ("recompute", "recompute_plan"):
            rules[f"{other[recompute_in]}.{key}"] = (
                f"{recompute_in}.{key}", f"this MindSpeed-MM reads recompute from {recompute_in}: recompute stays off")
    loss_in = facts.get("loss_in")
    if loss_in in ("features", "model"):
        wrong = "model" if loss_in == "features" else "features"
        rules[f"{wrong}.loss_cfg"] = (f"{loss_in}.loss_cfg", f"this MindSpeed-MM reads loss_cfg from {loss_in}")
    collate = "data.dataloader_param.collate_param"
    if facts.get("collator_key") == "model_name":
        rules[f"{collate}.collator_id"] = (f"{collate}.model_name", "this MindSpeed-MM predates collator_id")
    return rules


def _in_settings(place: str) -> bool:
    return any(place == root or place.startswith(root + ".") for root in SETTINGS_ROOTS)


def schema_findings(cfg: dict[str, Any], fw: Framework) -> list[Finding]:
    """The YAML ``cfg`` against the checkout's settings (module docstring, 1)."""
    found: list[Finding] = []
    if not fw.places:
        return [Finding("warning", "no settings schema in this checkout (mindspeed_mm/fsdp/params/): settings not "
                        "checked", "run the check in a MindSpeed-MM checkout with the FSDP2 trainer")]
    rules = _moved_rules(fw.facts)

    def walk(place: str, node: dict[str, Any]) -> None:
        known = fw.places.get(place)
        for key, value in node.items():
            dotted = f"{place}.{key}".lstrip(".")
            if dotted in FREE_PLACES:
                continue
            if dotted in rules:
                target, why = rules[dotted]
                also = f" ({target} is set too: delete this one)" if dig(cfg, *target.split(".")) is not None else ""
                verb = "move" if target.rpartition(".")[2] == key else "rename"
                found.append(Finding("error", f"{dotted} has moved: {why}", f"{verb} it to {target}{also}"))
                continue
            if dotted in fw.deprecated:
                found.append(Finding("warning", f"{dotted} is deprecated in this MindSpeed-MM",
                                     _deprecated_fix(dotted, cfg)))
                continue
            if known is not None and key in known:
                if isinstance(value, dict) and dotted in fw.places:
                    walk(dotted, value)
                continue
            if known is not None and place and key in fw.extras:
                continue  # not a field, but the framework reads it (features.recompute at 57069cd5)
            if place == "" and isinstance(value, dict) and value:
                walk(dotted, value)  # an unknown section: say where each of its keys belongs
                continue
            elsewhere = [p for p, keys in fw.places.items() if key in keys and p != place and _in_settings(p)]
            if elsewhere:
                where = ", ".join(f"{p}.{key}" for p in elsewhere[:3])
                found.append(Finding("error", f"{dotted} is not a setting at {place or 'the top level'}: this "
                                     f"MindSpeed-MM has it at {where}", f"move it to {elsewhere[0]}.{key}"))
                continue
            close = difflib.get_close_matches(str(key), known or [], n=1)
            fix = (f"rename it to {place}.{close[0]}" if close else "remove it, or set what it meant as "
                   "mindspeed_mm/fsdp/params/ define")
            found.append(Finding("error", f"{dotted} is not a setting of this MindSpeed-MM: the trainer ignores it",
                                 fix))

    walk("", cfg)
    return found


def _deprecated_fix(dotted: str, cfg: dict[str, Any]) -> str:
    place, _, key = dotted.rpartition(".")
    if key == "model_name" and place.endswith("collate_param"):
        current = dig(cfg, *place.split("."), "collator_id")
        value = dig(cfg, *dotted.split("."))
        if current is not None:
            return "delete it: collator_id is set" if current == value else (
                f"delete it: it names {value!r}, collator_id names {current!r} (the trainer refuses both)")
        return f"rename it to collator_id: {value}"
    return "replace it as its help in mindspeed_mm/fsdp/params/ says"


# --- files of a model and its plugins ----------------------------------------------------------------------


def own_dirs(dest: Path, model_id: str) -> list[Path]:
    """The folders msmm-migrate generated for ``model_id`` (those that exist)."""
    dirs = [dest / scaffold.example_dir(model_id), dest / scaffold.model_plugin_dir(model_id),
            dest / scaffold.dataset_dir(model_id)]
    return [d for d in dirs if d.is_dir()]


def _files(root: Path, suffix: str = "") -> Iterator[Path]:
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


def _parse(path: Path) -> ast.Module | None:
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
        tree = _parse(path)
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
        own=_registrations(module for folder in own_dirs(fw.dest, model_id)[1:] for module in _files(folder, ".py")))
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


# --- 3-5. plugin files -------------------------------------------------------------------------------------


def _module_file(dest: Path, parts: list[str]) -> Path | None:
    """The file (or namespace folder) of the module ``parts`` under ``dest``, if any."""
    base = dest.joinpath(*parts) if parts else dest
    for path in (base.with_suffix(".py") if parts else None, base / "__init__.py"):
        if path is not None and path.is_file():
            return path
    return base if base.is_dir() else None


def _defines(module: Path, name: str) -> bool:
    """Does ``module`` (a file, or a namespace folder) bind ``name`` at module level, or hold a submodule of it?"""
    folder = module if module.is_dir() else module.parent if module.name == "__init__.py" else None
    if folder is not None and ((folder / f"{name}.py").is_file() or (folder / name).is_dir()):
        return True
    if module.is_dir():
        return False
    tree = _parse(module)
    if tree is None:
        return True  # cannot tell
    names = _bindings(tree.body)
    return name in names or "*" in names


def _bindings(body: Iterable[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    names.add("*")
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for block in ("body", "orelse", "finalbody"):
                names |= _bindings(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                names |= _bindings(handler.body)
    if "*" in names or "__getattr__" in names:
        names.add("*")
    return names


def import_findings(dest: Path, path: Path, tree: ast.Module) -> list[Finding]:
    """Names ``path`` imports from ``mindspeed_mm`` or relatively that the checkout does not have."""
    found: list[Finding] = []
    rel = path.relative_to(dest)
    for node in ast.walk(tree):
        targets: list[tuple[list[str], Path, list[str]]] = []  # (module parts, root, imported names)
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names if a.name != "*"]
            if node.level:
                root = path.parent
                for _ in range(node.level - 1):
                    root = root.parent
                targets.append(((node.module or "").split(".") if node.module else [], root, names))
            elif (node.module or "").split(".")[0] == "mindspeed_mm":
                targets.append((node.module.split("."), dest, names))
        elif isinstance(node, ast.Import):
            targets += [(a.name.split("."), dest, []) for a in node.names if a.name.split(".")[0] == "mindspeed_mm"]
        for parts, root, names in targets:
            shown = "." * getattr(node, "level", 0) + ".".join(parts)
            module = _module_file(root, parts)
            if module is None:
                found.append(Finding("error", f"{rel}:{node.lineno} imports {shown}, which this checkout does not "
                                     "have", "restore the module or re-render the model against this checkout"))
                continue
            missing = [n for n in names if not _defines(module, n)]
            if missing:
                found.append(Finding("error", f"{rel}:{node.lineno} imports {', '.join(missing)} from {shown}, which "
                                     f"{module.relative_to(dest)} does not define",
                                     "re-render the model against this checkout (the framework renamed or removed "
                                     "it)"))
    return found


def function_arity(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int | None]:
    """(required, most) positional arguments a caller passes, without ``self``/``cls``; most None with ``*args``."""
    args = func.args.posonlyargs + func.args.args
    static = any(getattr(d, "id", None) == "staticmethod" for d in func.decorator_list)
    if not static and args:
        args = args[1:]
    required = len(args) - len(func.args.defaults)
    return max(required, 0), None if func.args.vararg else len(args)


def plugin_findings(dest: Path, model_id: str, answers: dict[str, Any], arity: int) -> list[Finding]:
    """Plugin files parse, their imports resolve, the hook's arity, the forward-key filter (3-5)."""
    found: list[Finding] = []
    modeling = dest / scaffold.modeling_file(model_id)
    if not modeling.is_file():
        found.append(Finding("error", f"{modeling.relative_to(dest)} is missing",
                             f"re-render: {update_command(model_id)}"))
    forward_params = list((answers.get("model_facts") or {}).get("forward_params") or [])
    for folder in own_dirs(dest, model_id)[1:]:
        for path in _files(folder, ".py"):
            rel = path.relative_to(dest)
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
                where = f":{exc.lineno}" if isinstance(exc, SyntaxError) and exc.lineno else ""
                found.append(Finding("error", f"{rel}{where} does not parse ({type(exc).__name__}: "
                                     f"{getattr(exc, 'msg', exc)})",
                                     "fix the file (an unresolved merge?) or re-render it"))
                continue
            found += import_findings(dest, path, tree)
            for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
                for item in cls.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                            item.name == "overwrite_transformer_config":
                        low, high = function_arity(item)
                        if not (low <= arity and (high is None or arity <= high)):
                            args = "transformer_config, model_args" + (", feature_args" if arity > 2 else "")
                            found.append(Finding("error", f"{rel}:{item.lineno} {cls.name}."
                                                 "overwrite_transformer_config "
                                                 f"takes {low if high == low else f'{low}-{high}'} arguments; this "
                                                 f"checkout's ModelHub passes {arity}", f"make it ({args})"))
                    keys = _forward_keys(item)
                    if keys is not None and forward_params:
                        dropped = [p for p in forward_params if p not in keys]
                        if dropped:
                            found.append(Finding("warning", f"{rel}:{item.lineno} {cls.name}._FORWARD_KEYS drops "
                                                 f"{', '.join(dropped)}, which the model's forward takes",
                                                 "add them to _FORWARD_KEYS (or re-render the plugin)"))
    return found


def _forward_keys(node: ast.stmt) -> set[str] | None:
    """The literal set of ``_FORWARD_KEYS = frozenset([...])`` (None for anything else)."""
    if not (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_FORWARD_KEYS" for t in node.targets)):
        return None
    value = node.value
    if isinstance(value, ast.Call) and getattr(value.func, "id", None) in ("frozenset", "set") and value.args:
        value = value.args[0]
    try:
        keys = ast.literal_eval(value)
    except ValueError:
        return None
    return {str(k) for k in keys} if isinstance(keys, (list, tuple, set, frozenset)) else None


# --- 6. conflicts ------------------------------------------------------------------------------------------


def conflict_findings(dest: Path, model_id: str) -> list[Finding]:
    """Merge-conflict markers in the model's generated files and ``.rej`` files next to them."""
    found: list[Finding] = []
    answers = dest / scaffold.answers_file(model_id)
    files = [answers] + [p for d in own_dirs(dest, model_id) for p in _files(d)]
    files += [dest / p for p in StPaths(model_id).triple()]  # the system test, rendered and recorded with the rest
    rejects = [p for p in files if p.suffix == ".rej"] + [p for p in (answers.with_name(answers.name + ".rej"),)
                                                           if p.is_file()]
    for path in files:
        if not path.is_file() or path.suffix == ".rej":
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        starts = [i for i, line in enumerate(lines, 1) if line.startswith("<<<<<<<")]
        ends = [i for i, line in enumerate(lines, 1) if line.startswith(">>>>>>>")]
        middles = [i for i, line in enumerate(lines, 1) if line.rstrip() == "======="]
        if (starts or ends) and (middles or (starts and ends)):
            count = max(len(starts), len(ends))
            found.append(Finding("error", f"{path.relative_to(dest)}:{(starts or ends)[0]} has merge-conflict "
                                 f"markers ({len(starts) or len(ends)} conflict{'s' if count > 1 else ''})",
                                 "resolve them (keep one side, delete the <<<<<<< ======= >>>>>>> lines)"))
    for path in rejects:
        target = path.with_suffix("")
        found.append(Finding("error", f"{path.relative_to(dest)}: a change that did not apply to "
                             f"{target.relative_to(dest)}", f"apply it by hand to {target.name}, then delete the .rej"))
    return found


# --- 7. revision, smoke ------------------------------------------------------------------------------------


def revision_findings(answers: dict[str, Any], fw: Framework, model_id: str) -> list[Finding]:
    recorded = (answers.get("framework") or {}).get("revision")
    current = fw.facts.get("revision") or ""
    if not recorded:
        return [Finding("info", "the answers record no framework revision (migrated by an older msmm-migrate)",
                        f"run the update to record it: {update_command(model_id)}")]
    if current and recorded != current:
        return [Finding("info", f"migrated against {_short(recorded)}, checkout is {_short(current)}",
                        f"run the update: {update_command(model_id)}")]
    return []


def _short(revision: str) -> str:
    return revision if revision.startswith("sha256:") else revision[:12]


def smoke_findings(dest: Path, answers_path: Path) -> list[Finding]:
    """Run the model's smoke in the checkout (MIGRATION.md left as is) and report its verdict."""
    command = [sys.executable, "-m", "hooks.smoke", str(answers_path.relative_to(dest)), "--dest", str(dest),
               "--no-report"]
    done = subprocess.run(command, cwd=dest, env=env_with_hooks(), capture_output=True, text=True, check=False)
    lines = [line.strip() for line in (done.stdout + "\n" + done.stderr).splitlines() if line.strip()]
    verdict = next((line for line in reversed(lines) if line.startswith("smoke[")), lines[-1] if lines else "")
    log = next((line.removeprefix("full log: ") for line in reversed(lines) if line.startswith("full log: ")), "")
    if done.returncode == 0:
        return [Finding("info", f"smoke passed: {verdict}", "nothing to do")]
    hint = next((line.removeprefix("hint: ") for line in reversed(lines) if line.startswith("hint: ")), "")
    where = f" (full log: {log})" if log else ""
    return [Finding("error", f"smoke failed: {verdict or f'exit {done.returncode}'}{where}",
                    hint or f"re-run it: python -m hooks.smoke {answers_path.relative_to(dest)}")]


# --- the check ---------------------------------------------------------------------------------------------


def check_model(answers_path: Path, fw: Framework, *, smoke: bool = False) -> list[Finding]:
    """Every finding for one migrated model."""
    import yaml

    dest = fw.dest
    model_id = answers_path.stem
    found: list[Finding] = []
    try:
        answers = yaml.safe_load(answers_path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        answers = {}
        found.append(Finding("error", f"{answers_path.relative_to(dest)} does not parse ({type(exc).__name__})",
                             "resolve its merge conflict or restore it from git"))
    model_id = str(answers.get("model_id") or model_id)
    config = dest / scaffold.config_yaml(model_id)
    cfg: dict[str, Any] | None = None
    if not config.is_file():
        found.append(Finding("error", f"{config.relative_to(dest)} is missing",
                             f"re-render: {update_command(model_id)}"))
    else:
        try:
            cfg = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            found.append(Finding("error", f"{config.relative_to(dest)} does not parse ({type(exc).__name__})",
                                 "fix the YAML (an unresolved merge?)"))
    if isinstance(cfg, dict):
        found += schema_findings(cfg, fw)
        plugins = []
        for entry in dig(cfg, "training", "plugin") or []:
            path = plugin_path(dest, str(entry))
            if path is None:
                found.append(Finding("error", f"training.plugin names {entry}, which is not in this checkout "
                                     "(the trainer skips it with 'Import failed')", "fix the path or remove it"))
            else:
                plugins.append(path)
        found += registry_findings(cfg, fw, model_id, plugins, answers)
    found += plugin_findings(dest, model_id, answers, int(fw.facts.get("hook_arity") or 3))
    found += conflict_findings(dest, model_id)
    found += revision_findings(answers, fw, model_id)
    found += [Finding(f.level, f.what, f.fix) for f in baseline_findings(dest, model_id, fw.facts.get("revision"))]
    if smoke and not any(f.level == "error" for f in found):
        found += smoke_findings(dest, answers_path)
    elif smoke:
        found.append(Finding("info", "smoke not run: fix the errors above first",
                             f"python -m hooks.check --smoke {dest}"))
    order = {level: i for i, level in enumerate(LEVELS)}
    found.sort(key=lambda f: order[f.level])
    return [replace(f, model=model_id) for f in found]


def check(dest: Path, *, smoke: bool = False) -> tuple[list[Finding], int]:
    """(findings, number of models) for the checkout ``dest``."""
    answers = sorted((dest / scaffold.ANSWERS_DIR).glob("*.yml"))
    if not answers:
        return [], 0
    fw = Framework.read(dest)
    return [f for path in answers for f in check_model(path, fw, smoke=smoke)], len(answers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.check", description=__doc__.splitlines()[0])
    parser.add_argument("checkout", nargs="?", type=Path, default=Path.cwd(),
                        help="MindSpeed-MM checkout root (default: cwd)")
    parser.add_argument("--smoke", action="store_true", help="also run each model's smoke (minutes per model)")
    args = parser.parse_args(argv)
    dest = args.checkout.resolve()
    if not dest.is_dir():
        print(f"error: {dest} is not a folder", file=sys.stderr)
        return 2
    findings, models = check(dest, smoke=args.smoke)
    if not models:
        print(f"no migrated models in {dest} (no {scaffold.ANSWERS_DIR}/*.yml): nothing to check")
        return 0
    for finding in findings:
        print(finding.line())
    counts = {level: sum(f.level == level for f in findings) for level in LEVELS}
    failing = sorted({f.model for f in findings if f.level == "error"})
    print(f"checked {models} migrated model{'s' if models != 1 else ''} in {dest}: {counts['error']} errors, "
          f"{counts['warning']} warnings, {counts['info']} info"
          + (f" ({', '.join(failing)} failing)" if failing else ""), flush=True)
    return 1 if counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())

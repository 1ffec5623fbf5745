"""3-5. The model's plugin files: their imports exist, the hook takes the checkout's arguments, the forward-key
filter keeps every forward parameter.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hooks import scaffold
from hooks.check.findings import Finding, update_command
from hooks.check.registries import files_under, own_dirs, parse_module
from hooks.model.facts import ModelFacts

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
    tree = parse_module(module)
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
    facts = ModelFacts.of(answers.get("model_facts"))
    forward_params = list(facts.forward_params) if facts else []
    for folder in own_dirs(dest, model_id)[1:]:
        for path in files_under(folder, ".py"):
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



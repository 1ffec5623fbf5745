"""The hooks/ tree keeps its shape: no import circles, fixtures apart from the pipeline.

Imports are read from the source (function-level ones included, since the hooks import heavy
modules lazily), so a circle that only closes at run time is still found.
"""

from __future__ import annotations

import ast
from pathlib import Path

HOOKS = Path(__file__).resolve().parent.parent / "hooks"
# Files that are not modules of the pipeline: the model's own code (fixture) and the trainer's sitecustomize.
NOT_MODULES = ("remote_vlm", "bridges")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(HOOKS.rglob("*.py")):
        rel = path.relative_to(HOOKS.parent).with_suffix("")
        if any(part in NOT_MODULES for part in rel.parts) or rel.name == "__main__":
            continue
        name = ".".join(rel.parts)
        found[name.removesuffix(".__init__")] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the hooks modules it imports anywhere in its source."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "hooks":
                for alias in node.names:  # ``from hooks.smoke import prestart`` imports a module
                    sub = f"{node.module}.{alias.name}"
                    graph[name].add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in modules)
        graph[name].discard(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def test_no_import_circles() -> None:
    cycles = _cycles(import_graph())
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_pipeline_does_not_import_the_test_and_demo_fixtures() -> None:
    """The tiny builders serve tests and the demo; a user's copy never needs them."""
    users = {name for name, deps in import_graph().items()
             if any(dep == "hooks.tiny" or dep.startswith("hooks.tiny.") for dep in deps)}
    assert {u for u in users if not u.startswith("hooks.tiny")} <= {"hooks.demo"}


def test_the_tree_shows_the_pipeline() -> None:
    """model facts -> plans (model/) -> data path (data/) -> render (render/) -> smoke (smoke/) -> report;
    ``check`` and ``update`` are whole-checkout commands over what the pipeline left (every answers file)."""
    packages = {p.name for p in HOOKS.iterdir() if (p / "__init__.py").is_file()}
    assert {"model", "data", "render", "smoke", "tiny"} <= packages
    flat = {p.stem for p in HOOKS.glob("*.py")} - {"__init__"}
    assert flat <= {"compat", "demo", "lifetime", "check", "update"}, flat

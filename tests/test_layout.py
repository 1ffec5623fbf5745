"""The hooks/ tree keeps its shape: imports follow the pipeline, no circles, fixtures apart.

Imports are read from the source (function-level ones included, since the hooks import heavy
modules lazily), so a circle that only closes at run time is still found.
"""

from __future__ import annotations

import ast
import re
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


STAGES = ("model", "data", "render", "smoke", "report")  # facts and plans -> data path -> render -> smoke -> report
# Any stage may use these (and the package root).
SHARED = ("hooks.compat", "hooks.lifetime", "hooks.terminal", "hooks.scaffold", "hooks.framework")
COMMANDS = ("hooks.probe", "hooks.check", "hooks.update", "hooks.demo")  # whole-pipeline commands: they compose stages


def _stage(module: str) -> int | None:
    parts = module.split(".")
    return STAGES.index(parts[1]) if len(parts) > 1 and parts[1] in STAGES else None


def _is(module: str, names: tuple[str, ...]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in names)


def back_edges(graph: dict[str, set[str]]) -> list[str]:
    """Imports against the pipeline: a stage importing a later stage or a command, shared code importing either."""
    found = []
    for module, deps in sorted(graph.items()):
        for dep in sorted(deps):
            if _is(module, COMMANDS) or _is(module, ("hooks.tiny",)) or dep == "hooks" or _is(dep, ("hooks.tiny",)):
                continue
            if _is(dep, COMMANDS):
                found.append(f"{module} -> {dep} (a command)")
            elif (module == "hooks" or _is(module, SHARED)) and _stage(dep) is not None:
                found.append(f"{module} -> {dep} (shared code importing a stage)")
            elif _stage(module) is not None and _stage(dep) is not None and _stage(dep) > _stage(module):
                found.append(f"{module} -> {dep} (a later stage)")
    return found


def test_imports_follow_the_pipeline() -> None:
    """model facts -> plans (model/) -> data path (data/) -> render (render/) -> smoke (smoke/) -> report (report/):
    each stage imports only earlier stages and shared code (``framework``: the target checkout, ``compat``,
    ``lifetime``); the commands (``probe``, ``check``, ``update``, ``demo``) are the only modules that put stages
    together. Read off the source, function-body imports included."""
    assert not back_edges(import_graph()), "\n".join(back_edges(import_graph()))


def test_a_back_edge_is_caught() -> None:
    """The check above is not vacuous: an import of a later stage from a function body fails it."""
    graph = import_graph()
    graph["hooks.model.plan"] = {*graph["hooks.model.plan"], "hooks.data.candidates"}
    graph["hooks.framework.checkout"] = {*graph["hooks.framework.checkout"], "hooks.smoke.run"}
    graph["hooks.smoke.run"] = {*graph["hooks.smoke.run"], "hooks.probe"}
    assert back_edges(graph) == ["hooks.framework.checkout -> hooks.smoke.run (shared code importing a stage)",
                                 "hooks.model.plan -> hooks.data.candidates (a later stage)",
                                 "hooks.smoke.run -> hooks.probe (a command)"]


def test_a_back_edge_in_a_function_body_is_read(tmp_path) -> None:
    """``import_graph`` reads imports inside function bodies (the hooks import heavy modules lazily)."""
    import ast

    source = "def late():\n    from hooks.report.document import Report\n"
    found = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    assert found == {"hooks.report.document"}
    assert "hooks.render.evidence" in import_graph()["hooks.probe"]  # a function-body import in the real tree


def test_the_tree_shows_the_pipeline() -> None:
    """The stages are packages, in the order above; ``tiny`` holds the test and demo fixtures; the flat
    modules are shared code and the commands."""
    packages = {p.name for p in HOOKS.iterdir() if (p / "__init__.py").is_file()}
    assert {*STAGES, "framework", "tiny"} <= packages
    flat = {p.stem for p in HOOKS.glob("*.py")} - {"__init__"}
    assert flat <= {"compat", "lifetime", "terminal", "scaffold", "probe", "check", "update", "demo"}, flat


QUESTION_MODULES = ("copier_ext", "validators", "session", "evidence", "files")  # what copier's questions run


def _starts_process(call: ast.Call) -> str:
    """``owner.name`` of a call that starts a process (``subprocess.*``, ``os.fork``/``spawn*``/``system``/``popen``,
    ``multiprocessing.*``), else ""."""
    if not isinstance(call.func, ast.Attribute) or not isinstance(call.func.value, ast.Name):
        return ""
    owner, name = call.func.value.id, call.func.attr
    starts = owner in ("subprocess", "multiprocessing") or (
        owner == "os" and (name in ("fork", "system", "popen") or name.startswith("spawn")))
    return f"{owner}.{name}" if starts else ""


def launches(path: Path) -> list[tuple[str, str]]:
    """(call, "") for each process start in a module's source, and ("-m", module) for each ``[..., "-m", module, ...]``
    command list it builds."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and (call := _starts_process(node)):
            found.append((call, ""))
        elif isinstance(node, ast.List):
            items = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if "-m" in items and items.index("-m") + 1 < len(items):
                found.append(("-m", items[items.index("-m") + 1]))
    return found


def test_the_questions_launch_nothing_but_the_probe() -> None:
    """Questions compute, they do not launch (issue 25): the modules copier's validators and defaults run start
    processes in one place only (``hooks.render.session``), and that place runs one command, the probe, whose
    process the question waits for."""
    render = HOOKS / "render"
    starts = {name: launches(render / f"{name}.py") for name in QUESTION_MODULES}
    assert all(not calls for name, calls in starts.items() if name != "session"), starts
    assert {module for call, module in starts["session"] if call == "-m"} == {"hooks.probe"}
    assert {call for call, _ in starts["session"] if call != "-m"} == {"subprocess.run"}  # run() waits; never Popen


def _top_level_names(path: Path) -> list[str]:
    """The public names a module defines at its top level (functions, classes, constants)."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in names if not n.startswith("_") and n != "main"]


def _pipeline_modules() -> dict[str, Path]:
    """The pipeline's modules (the fixtures in tiny/ and the code that runs inside the trainer's ranks aside)."""
    return {name: path for name, path in _modules().items()
            if not name.startswith("hooks.tiny") and "observer" not in path.parts}


def test_a_public_name_has_one_home() -> None:
    """Issue 34: no public name is defined in two modules (two ``settings_findings`` with different meanings, or one
    constant spelled twice, is how facts drift apart)."""
    homes: dict[str, list[str]] = {}
    for module, path in _pipeline_modules().items():
        for name in _top_level_names(path):
            homes.setdefault(name, []).append(module)
    twice = {name: modules for name, modules in homes.items() if len(modules) > 1}
    assert not twice, twice


def test_no_module_imports_another_modules_private_name() -> None:
    """A name used across modules is public where it is defined."""
    found = []
    for module, path in _pipeline_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hooks"):
                found += [f"{module} imports {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert not found, found


SCAFFOLD_SPELLINGS = re.compile(r"^examples(/|$)|\.copier-answers|mindspeed_mm/fsdp/models/|mindspeed_mm/fsdp/data/"
                                r"datasets|tests/st/(shell_scripts|run_configs|baseline_results)")


# The framework's own files, and a command's help naming the argument it takes (``.copier-answers/<model_id>.yml``).
FRAMEWORK_OR_HELP = re.compile(r"mindspeed_mm/fsdp/models/modelhub\.py|<model_id>|<id>")


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the string constants that are docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_scaffold_paths_are_spelled_in_one_module() -> None:
    """Where a copy's files live is ``hooks.scaffold``'s to say: no other module builds such a path itself."""
    found = []
    for module, path in _pipeline_modules().items():
        if module == "hooks.scaffold":
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                    and SCAFFOLD_SPELLINGS.search(node.value) and not FRAMEWORK_OR_HELP.search(node.value)):
                found.append(f"{module}:{node.lineno}: {node.value[:60]!r}")
    assert not found, "\n".join(found)


def test_no_stage_edits_a_rendered_file_between_markers() -> None:
    """Issue 34: copier renders MIGRATION.md, and the report stage writes REPORT.md whole (``hooks.report.document``);
    no template leaves a marker block for a later stage to fill in, and no module writes into one."""
    root = HOOKS.parent
    rendered = [p for folder in ("partials", "template_vlm_branch_a", "template_vlm_branch_b",
                                 "template_custom_dataset_c") for p in (root / folder).rglob("*") if p.is_file()]
    markers = [str(p.relative_to(root)) for p in rendered if re.search(r"<!-- *msmm-[\w-]+:(begin|end)", p.read_text())]
    writers = [m for m, p in _pipeline_modules().items() if re.search(r":(begin|end) -->", p.read_text())]
    assert not markers and not writers, (markers, writers)


# Issue 34: stage data crosses a boundary as typed fields, not through string keys (ModelFacts with its Plan,
# ProcessorFacts and its ChatSlots, MediaFacts, AudioFacts and SampleForm, TrainedStage; DataEvidence; the batch
# check's BatchSpec; the loss reference's ReferenceSpec; SmokeRecord; the training YAML through TrainingYaml).
# These modules still read dicts through ``(... or {}).get(`` chains: config.json's sub-configs (shrink), the YAML's
# preprocess_parameters (batch), the sample convention inside the data stage that wrote it (media), the observer's
# per-rank records and the gradient norms the trainer logged (smoke); the count may only fall.
STRING_KEY_CHAINS = {
    "hooks.data.batch": 1,
    "hooks.data.media": 2,
    "hooks.model.shrink_families": 3,
    "hooks.smoke.media_proof": 2,
    "hooks.smoke.reference": 1,
}


def test_no_new_string_key_chains() -> None:
    grown = {}
    for module, path in _pipeline_modules().items():
        count = path.read_text().count("or {}).get(")
        if count > STRING_KEY_CHAINS.get(module, 0):
            grown[module] = (STRING_KEY_CHAINS.get(module, 0), count)
    assert not grown, "new (... or {}).get( chains (pinned, found): " + f"{grown}; give the data a typed field"

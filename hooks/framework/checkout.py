"""What a MindSpeed-MM checkout offers, read from its own files at copy and update time.

The framework moves: templates and collators are added (``qwen3_6``, ``qwen3_asr``) and older
checkouts lack some (``step3_vl``, ``kimi_k3``); settings move between sections and keys are renamed
(``collate_param.model_name`` became ``collator_id`` on 2026-06-09; recompute and ``loss_cfg`` moved
from ``parallel``/``model`` to a new ``features`` section on 2026-04-27, after which unknown keys are
accepted silently). So the scaffold is rendered against *framework facts* read from the checkout it
is written into (``facts``), recorded in the answers file beside the model facts:

* the settings **schema**: the dataclasses under ``mindspeed_mm/fsdp/params/`` from the root
  ``Arguments`` down (a field whose type is another settings class is a nested section), and the
  fields whose help says they are deprecated;
* where each setting the scaffold writes lives: ``recompute_in`` (``features`` where that section
  has ``recompute_plan``, else ``parallel``), ``loss_in`` (``features``/``model``),
  ``collator_key`` (``collator_id``/``model_name``), ``hf_load`` (``training.load_format`` exists, so
  ``training.load`` may name a Hugging Face folder; before it, weights come from ``from_pretrained``);
* the registries (templates, collators), the arity of ``overwrite_transformer_config`` as
  ModelHub calls it (two arguments before 2026-05-20, three after), and whether the train engine
  hands ``output_router_logits`` to every model (before 2026-05; a dense model must drop it);
* the revision: the last git commit that changed one of those files, else their content hash.

The files are parsed, never imported: copier's interpreter need not have torch, and importing the
framework would run its registration side effects. Outside a checkout (a plain render, tier 1) the
facts of the pinned MindSpeed-MM (57069cd5) stand in.
"""

from __future__ import annotations

import ast
import hashlib
import subprocess
from pathlib import Path
from typing import Any

TEMPLATE_FILE = Path("mindspeed_mm/fsdp/data/data_utils/func_utils/template.py")
COLLATOR_FILE = Path("mindspeed_mm/fsdp/data/dataloader/data_collator.py")
# Where no checkout is at hand: the registries of the pinned MindSpeed-MM (57069cd5) the project tests on.
KNOWN_TEMPLATES = ("qwen2vl", "qwen3_vl", "qwen3_vl_nothink", "glm4.1v", "glm4v_moe", "kimi_k25", "kimi_k3",
                   "step3_vl", "qwen2_omni", "qwen3_omni", "qwen3_omni_nothink")
KNOWN_COLLATORS = ("qwen3vl", "qwen3omni", "step3_vl")
PARAMS_DIR = Path("mindspeed_mm/fsdp/params")
MODELHUB_FILE = Path("mindspeed_mm/fsdp/models/modelhub.py")
TRAIN_ENGINE_FILE = Path("mindspeed_mm/fsdp/train/train_engine.py")
LOSS_FILE = Path("mindspeed_mm/fsdp/loss/loss_func.py")
ROOT_CLASS = "Arguments"


def _registered(path: Path, function: str, keyword: str | None) -> list[str]:
    """Names passed to module-level ``function(...)`` calls in ``path`` (keyword ``keyword``, else the first
    positional argument), in file order."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    names = []
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if not isinstance(call, ast.Call) or getattr(call.func, "id", None) != function:
            continue
        args = [k.value for k in call.keywords if k.arg == keyword] if keyword else call.args[:1]
        names += [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return names


def templates(dest: str | Path) -> list[str]:
    """Chat templates the checkout registers (``_register_template(name=...)``)."""
    found = _registered(Path(dest) / TEMPLATE_FILE, "_register_template", "name")
    return found or list(KNOWN_TEMPLATES)


def _dict_keys(path: Path, name: str) -> list[str]:
    """String keys of a module-level ``name = {...}`` in ``path`` (older checkouts' ``DATA_COLLATOR``)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(getattr(t, "id", None) == name for t in node.targets)):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def collators(dest: str | Path) -> list[str]:
    """Data collators the checkout registers (``_register_data_collator("id", ...)``; before 2026-06-09 the
    keys of ``DATA_COLLATOR``)."""
    path = Path(dest) / COLLATOR_FILE
    found = _registered(path, "_register_data_collator", None) or _dict_keys(path, "DATA_COLLATOR")
    return found or list(KNOWN_COLLATORS)


def _fact_files(dest: Path) -> list[Path]:
    """The files the facts are read from (relative to ``dest``)."""
    rel = [TEMPLATE_FILE, COLLATOR_FILE, MODELHUB_FILE, TRAIN_ENGINE_FILE]
    return rel + sorted(p.relative_to(dest) for p in (dest / PARAMS_DIR).glob("*.py"))


def revision(dest: str | Path) -> str:
    """The framework's revision: the last git commit that changed a file the facts are read from (so committing a
    migrated model does not change it), else a content hash of those files ("" outside a checkout)."""
    dest = Path(dest)
    files = _fact_files(dest)
    if not any((dest / f).is_file() for f in files):
        return ""
    done = subprocess.run(["git", "-C", str(dest), "log", "-1", "--format=%H", "--", *map(str, files)],
                          capture_output=True, text=True, check=False)
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip()
    digest = hashlib.sha256()
    for path in files:
        digest.update((dest / path).read_bytes() if (dest / path).is_file() else b"")
    return "sha256:" + digest.hexdigest()[:16]


def _annotation_class(node: ast.expr | None) -> str | None:
    """The class a field's annotation names (``X``, ``Optional[X]``, ``"X"``), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "Optional":
        return _annotation_class(node.slice)
    return None


def _is_deprecated(value: ast.expr | None) -> bool:
    """``field(metadata={"help": "... deprecated ..."})``."""
    return value is not None and "deprecated" in ast.unparse(value).lower()


def _settings_classes(checkout: Path) -> dict[str, dict[str, tuple[str | None, bool]]]:
    """Every class under ``params/``: field -> (annotated class name, deprecated), bases' fields first."""
    classes: dict[str, dict[str, tuple[str | None, bool]]] = {}
    bases: dict[str, list[str]] = {}
    for path in sorted((checkout / PARAMS_DIR).glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
            classes[node.name] = {
                item.target.id: (_annotation_class(item.annotation), _is_deprecated(item.value))
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                and not item.target.id.startswith("_")}
    for name in classes:  # inherited fields (BaseArguments has none)
        inherited: dict[str, tuple[str | None, bool]] = {}
        for base in bases[name]:
            inherited.update(classes.get(base, {}))
        classes[name] = {**inherited, **classes[name]}
    return classes


def schema(dest: str | Path) -> dict[str, list[str]]:
    """The settings keys per place: ``""`` -> the sections, ``"parallel.fsdp_plan"`` -> its fields, ...

    Only classes defined under ``params/`` are followed; a field typed by a class from elsewhere
    (the data section's dataset parameters) is a leaf here. Empty outside a checkout.
    """
    return _places(_settings_classes(Path(dest)))


def _places(classes: dict[str, dict[str, tuple[str | None, bool]]]) -> dict[str, list[str]]:
    if ROOT_CLASS not in classes:
        return {}
    places: dict[str, list[str]] = {}

    def walk(cls: str, path: str, seen: tuple[str, ...]) -> None:
        places[path] = list(classes[cls])
        for name, (sub, _) in classes[cls].items():
            if sub in classes and sub not in seen:
                walk(sub, f"{path}.{name}".lstrip("."), (*seen, sub))

    walk(ROOT_CLASS, "", (ROOT_CLASS,))
    return places


def deprecated(dest: str | Path) -> list[str]:
    """Dotted keys whose field help says they are deprecated (``data.dataloader_param.collate_param.model_name``)."""
    classes = _settings_classes(Path(dest))  # parsed once for both the places and the flags
    found = []
    for path, keys in _places(classes).items():
        cls = _class_at(classes, path)
        found += [f"{path}.{k}".lstrip(".") for k in keys if cls and classes[cls][k][1]]
    return found


def _class_at(classes: dict[str, dict[str, tuple[str | None, bool]]], path: str) -> str | None:
    cls: str | None = ROOT_CLASS
    for part in filter(None, path.split(".")):
        cls = classes.get(cls or "", {}).get(part, (None, False))[0]
    return cls if cls in classes else None


def hook_arity(dest: str | Path) -> int:
    """How many arguments ModelHub passes to a plugin's ``overwrite_transformer_config`` (3 outside a checkout)."""
    try:
        tree = ast.parse((Path(dest) / MODELHUB_FILE).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return 3
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "overwrite_transformer_config":
            return len(node.args) + len(node.keywords)
    return 3


def router_flag_always(dest: str | Path) -> bool:
    """Whether the train engine adds ``output_router_logits`` to every batch (``=coef > 0``, before 2026-05),
    not only ``=True`` for MoE runs: a dense model's forward then hands it to the loss function, which refuses it."""
    try:
        tree = ast.parse((Path(dest) / TRAIN_ENGINE_FILE).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    return any(isinstance(node, ast.keyword) and node.arg == "output_router_logits"
               and not (isinstance(node.value, ast.Constant) and node.value.value is True)
               for node in ast.walk(tree))


def loss_types(dest: str | Path) -> list[str]:
    """The ``loss_type`` values the trainer acts on (``loss_type == "..."`` in its loss and engine code)."""
    found: list[str] = []
    for rel in (LOSS_FILE, TRAIN_ENGINE_FILE):
        try:
            tree = ast.parse((Path(dest) / rel).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Compare) and ast.unparse(node.left).endswith("loss_type")
                    and isinstance(node.ops[0], ast.Eq) and isinstance(node.comparators[0], ast.Constant)):
                found.append(str(node.comparators[0].value))
    return sorted(set(found))


# The facts of the pinned MindSpeed-MM 57069cd5, for a render outside a checkout.
_PINNED = {"recompute_in": "features", "loss_in": "features", "collator_key": "collator_id", "hf_load": True,
           "load_strict": True,
           "sections": ["parallel", "model", "data", "training", "tools", "features"], "hook_arity": 3,
           "router_flag_always": False}


def recorded_revision(answers: dict[str, Any]) -> str:
    """The framework revision an answers file's scaffold was rendered against (its ``framework`` answer, ``facts``
    below), "" where none was recorded (a scaffold of an older msmm-migrate)."""
    framework = answers.get("framework")
    return str(framework.get("revision") or "") if isinstance(framework, dict) else ""


def facts(dest: str | Path) -> dict[str, object]:
    """The framework facts the scaffold is rendered against (module docstring); JSON-able, deterministic."""
    dest = Path(dest)
    places = schema(dest)
    if not places:
        found: dict[str, object] = dict(_PINNED)
    else:
        found = {
            "recompute_in": "features" if "recompute_plan" in places.get("features", []) else "parallel",
            "loss_in": "features" if "loss_cfg" in places.get("features", []) else "model",
            "collator_key": ("collator_id" if "collator_id" in places.get("data.dataloader_param.collate_param", [])
                             else "model_name"),
            "hf_load": "load_format" in places.get("training", []),
            "load_strict": "load_strict" in places.get("training", []),
            "sections": places[""],
            "hook_arity": hook_arity(dest),
            "router_flag_always": router_flag_always(dest),
        }
    return {"revision": revision(dest), **found, "templates": templates(dest), "collators": collators(dest)}

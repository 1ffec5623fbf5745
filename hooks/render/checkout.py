"""What a MindSpeed-MM checkout offers, read from its own files at copy time.

The framework moves: templates and collators are added (``qwen3_6``, ``qwen3_asr``) and older
checkouts lack some (``step3_vl``, ``kimi_k3``). So the ``chat_template`` and ``collator_id``
choices come from the checkout the scaffold is written into, not from a list in ``copier.yml``,
and the answers file records which framework revision the model was migrated against.

The files are parsed, never imported: copier's interpreter need not have torch, and importing the
framework would run its registration side effects. Outside a checkout (a plain render, tier 1) the
lists below stand in.
"""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
from pathlib import Path

TEMPLATE_FILE = Path("mindspeed_mm/fsdp/data/data_utils/func_utils/template.py")
COLLATOR_FILE = Path("mindspeed_mm/fsdp/data/dataloader/data_collator.py")
# Where no checkout is at hand: the registries of the pinned MindSpeed-MM (57069cd5) the project tests on.
KNOWN_TEMPLATES = ("qwen2vl", "qwen3_vl", "qwen3_vl_nothink", "glm4.1v", "glm4v_moe", "kimi_k25", "kimi_k3",
                   "step3_vl", "qwen2_omni", "qwen3_omni", "qwen3_omni_nothink")
KNOWN_COLLATORS = ("qwen3vl", "qwen3omni", "step3_vl")


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


def collators(dest: str | Path) -> list[str]:
    """Data collators the checkout registers (``_register_data_collator("id", ...)``)."""
    found = _registered(Path(dest) / COLLATOR_FILE, "_register_data_collator", None)
    return found or list(KNOWN_COLLATORS)


def choices_yaml(dest: str | Path, kind: str) -> str:
    """The ``kind`` ("templates"/"collators") list as YAML (JSON) for a copier ``choices`` string."""
    return json.dumps(templates(dest) if kind == "templates" else collators(dest))


def revision(dest: str | Path) -> str:
    """The checkout's git commit, else a content hash of the registry files read here ("" outside a checkout)."""
    dest = Path(dest)
    done = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if done.returncode == 0 and (dest / "mindspeed_mm").is_dir():
        return done.stdout.strip()
    digest = hashlib.sha256()
    files = [dest / TEMPLATE_FILE, dest / COLLATOR_FILE]
    if not any(f.is_file() for f in files):
        return ""
    for path in files:
        digest.update(path.read_bytes() if path.is_file() else b"")
    return "sha256:" + digest.hexdigest()[:16]

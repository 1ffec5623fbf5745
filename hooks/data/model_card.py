"""The model card's own definitions: preprocessing a release ships only in its README.md quick-start.

Many remote-code releases (InternVL2 and its kin) keep the image preprocessing their ``chat()``
expects (``build_transform``, ``dynamic_preprocess``, ``load_image``) nowhere but in the model card's
Python code blocks, the snippet every user of the model runs. Rather than re-deriving it, this module
takes the card's own text for a named function and exactly what it needs: the top-level definitions
(functions, classes, constants, imports) of the same code block that the function refers to, followed
name by name. The block's script lines (downloading and loading the model, ``generate``) and every
definition the function does not reach (video readers whose packages may not be installed) are left
out. The result is a module, ``model_card.py``, whose text is the card's, in the card's order: the
probe runs it (same consent as the folder's code), the post-generation task writes it beside the
copied remote code, and the dataset plugin imports it from there.
"""

from __future__ import annotations

import ast
import linecache
import types
from pathlib import Path

CARD = "README.md"
CARD_MODULE = "model_card"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _defined(node: ast.stmt) -> list[str]:
    """Top-level names a definition statement binds (none for script lines)."""
    if isinstance(node, _DEFS):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        try:
            ast.literal_eval(node.value)  # constants only: a call (from_pretrained) is script, not definition
        except ValueError:
            return []
        return [t.id for t in node.targets]
    return []


def _used(node: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def definitions(card_text: str, name: str) -> str | None:
    """The card's source for ``name`` and what it needs, from the first code block that defines it."""
    from hooks.data.records import dataset_runtime

    for block in dataset_runtime().card_blocks(card_text):  # the same reader the dataset plugin runs
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue  # a shell session or pseudo-code marked as python
        where: dict[str, ast.stmt] = {}
        for node in tree.body:
            for bound in _defined(node):
                where.setdefault(bound, node)
        if not isinstance(where.get(name), _DEFS):
            continue
        keep, todo = set(), [name]
        while todo:
            node = where.get(todo.pop())
            if node is not None and id(node) not in keep:
                keep.add(id(node))
                todo += sorted(_used(node))
        nodes, text = [n for n in tree.body if id(n) in keep], ""
        for before, node in zip([None, *nodes], nodes, strict=False):
            apart = isinstance(node, _DEFS) or isinstance(before, _DEFS)
            text += ("" if before is None else "\n\n\n" if apart else "\n") + ast.get_source_segment(block, node)
        return text + "\n"
    return None


def module_text(model_dir: Path, name: str) -> str | None:
    """``model_card.py`` as written beside the remote code: a header naming its source, then the card's text."""
    card = Path(model_dir) / CARD
    if not card.is_file():
        return None
    source = definitions(card.read_text(encoding="utf-8", errors="replace"), name)
    if source is None:
        return None
    return (f'"""{name} and what it needs, taken verbatim from the model card ({CARD}) by msmm-migrate '
            f'(hooks/data/model_card.py);\nthe card\'s script lines and unrelated definitions are left out."""\n\n'
            + source)


def load_card(model_dir: Path, name: str) -> types.ModuleType | None:
    """The card's definitions for ``name`` as a module named ``model_card`` (None when the card has none)."""
    text = module_text(model_dir, name)
    if text is None:
        return None
    from hooks.compat import ensure_torchvision

    ensure_torchvision()  # the card's preprocessing imports torchvision.transforms
    module = types.ModuleType(CARD_MODULE)
    module.__file__ = f"{CARD_MODULE}.py (from {Path(model_dir) / CARD})"
    linecache.cache[module.__file__] = (len(text), None, text.splitlines(True), module.__file__)  # getsource
    exec(compile(text, module.__file__, "exec"), module.__dict__)  # noqa: S102 - the user consented to the release's code
    return module

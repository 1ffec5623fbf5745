"""Where a copy writes, settled before anything is written: the answers' paths resolved once, the destination a
checkout's root, and no path of the copy already someone else's.

copier renders relative to its destination and runs the copy's tasks there, while the answers' paths were typed
relative to the folder the user ran copier in: a ``model_path`` of ``../models/x`` is read from one folder by the
questions and from another by the smoke and the trainer. So each path answer is resolved once, against the
folder the copy runs in, and the resolved value is what the answers file, the YAML and MIGRATION.md hold
(``resolved``, the ``msmm_path`` filter; only while copying: an update keeps what the copy recorded).

A destination inside a MindSpeed-MM checkout but not its root would get a second ``mindspeed_mm/`` tree nested in
the real one, which the trainer never reads; and a path the copy writes that already holds a file which no answers
file of this model accounts for is the user's own, or another model's: copier would ask to overwrite it, or with
``--defaults`` leave a half-written scaffold. Both stop at the first question, naming the path and the way out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hooks import load_answers, scaffold
from hooks.framework.environment import is_mindspeed_mm_checkout

PATH_ANSWERS = ("model_path", "data_json", "media_root", "sample_builder", "python")


def resolved(answer: object, field: str = "model_path") -> str:
    """A path answer made absolute against the current folder, ``~`` expanded; symlinks are kept (a venv's
    ``python`` is one). Empty stays empty; ``python`` given as a bare command (``python3``) stays a command; the
    sample builder keeps its ``:function``."""
    text = str(answer or "").strip()
    if not text:
        return str(answer or "")
    if field == "python" and os.sep not in text and not text.startswith("~"):
        return text  # found on PATH, as the user meant it
    if field == "sample_builder":
        path, sep, function = text.rpartition(":")
        return f"{_absolute(path)}:{function}" if sep and path else text
    return _absolute(text)


def _absolute(text: str) -> str:
    return os.path.abspath(os.path.expanduser(text))


def resolved_answers(answers: dict[str, Any]) -> dict[str, Any]:
    """copier's answers with each path answer resolved (what the answers file records)."""
    return {key: resolved(value, key) if key in PATH_ANSWERS and isinstance(value, str) else value
            for key, value in answers.items()}


def destination_root(dst_path: str) -> Path:
    """The destination as an absolute folder (copier's ``dst_path``, relative to the folder copier runs in)."""
    return Path(_absolute(str(dst_path or ".")))


def destination_error(dst_path: str) -> str:
    """A destination inside a MindSpeed-MM checkout that is not the checkout's root ("" otherwise: the root, or a
    folder in no checkout, where the copy renders without the framework)."""
    dst = destination_root(dst_path)
    if is_mindspeed_mm_checkout(dst):
        return ""
    for parent in dst.parents:
        if is_mindspeed_mm_checkout(parent):
            return (f"destination: {dst} is inside the MindSpeed-MM checkout {parent}, not its root, so the copy "
                    "would write a second mindspeed_mm/ tree that the trainer never reads; give the checkout's root "
                    f"as copier's destination (copier copy --trust <template> {parent}); nothing was written")
    return ""


def collision_error(model_id: str, dst_path: str) -> str:
    """The first path a copy of ``model_id`` writes that already exists in the destination while no answers file
    of ``model_id`` is there (a re-run or an update of the same model has one, and may rewrite its own files)."""
    dst = destination_root(dst_path)
    answers = scaffold.answers_file(model_id)
    if (dst / answers).exists():
        return ""
    for other in sorted((dst / answers).parent.glob("*.yml")):
        if _recorded(other).get("model_id") == model_id:
            return (f"model_id: {model_id!r} is the model_id of {other.relative_to(dst)}, another model's answers "
                    f"file; choose another model_id, or update that model with copier update -a "
                    f"{other.relative_to(dst)}")
    for rel in scaffold.claimed(model_id):
        path = dst / rel
        if path.exists() or path.is_symlink():
            return (f"model_id: {rel} already exists in {dst} and was not written by a copy of {model_id!r} (no "
                    f"{answers}): a file of yours or another model's; choose another model_id, or move or remove "
                    f"{rel}")
    return ""


def owner_error(model_id: str, model_path: str, dst_path: str) -> str:
    """``model_id`` already holds another model in the destination: its answers file records another model folder
    than ``model_path`` ("" for the same folder, a re-run, and where no copy of ``model_id`` is there)."""
    answers = destination_root(dst_path) / scaffold.answers_file(model_id)
    if not model_id or not str(model_path or "").strip() or not answers.is_file():
        return ""
    recorded = str(_recorded(answers).get("model_path") or "")
    if not os.path.isabs(os.path.expanduser(recorded)):
        return ""  # relative to a folder the answers file does not record: nothing to compare
    here, there = Path(resolved(model_path)), Path(_absolute(recorded))
    if here == there or (here.exists() and there.exists() and os.path.samefile(here, there)):
        return ""
    return (f"model_path: {here} is not the model that model_id {model_id!r} holds in this checkout ({recorded}, "
            f"recorded in {scaffold.answers_file(model_id)}); choose another model_id for this model, or answer "
            f"model_path={recorded} to copy that model again (copier update -a {scaffold.answers_file(model_id)} "
            "updates it)")


def _recorded(answers: Path) -> dict[str, Any]:
    """An answers file's answers ({} where it does not read: copier then says why)."""
    try:
        found = load_answers(answers)
    except (OSError, ValueError, SystemExit):
        return {}
    return found if isinstance(found, dict) else {}

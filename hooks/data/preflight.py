"""Pre-flight for the data answers: the training data checked before anything is written.

copier renders the scaffold only after the last question; a data file that does not parse, holds
no records, or names media that are not there would otherwise surface as a traceback in the smoke,
after the checkout was changed (or, worse, not at all: the smoke trains on its own sample). Each
check here returns one line, ``<field>: <what is wrong>; <how to fix>``, or "" when the answer is
fine; copier's validators (``hooks.render.copier_ext``) show it or stop an unattended copy with it.

- ``data_error``: the file parses (a JSON list, or JSONL: one object per line), holds records, and
  (branches a and b) they are in the huggingface shape the framework's builder reads;
- ``media_error``: ``media_root`` is a folder, and every image or video the first records name
  exists under it (relative paths resolve against it, else against the data file's folder, as the
  YAML's ``dataset_dir`` does), inside it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHECKED_RECORDS = 64  # media of the first records are checked; the smoke trains on the first few
MEDIA_KEYS = ("images", "videos")


class DataError(ValueError):
    """A problem with the data answers, worded as ``<field>: <what>; <fix>``."""


def read_records(data_json: Path) -> list[dict[str, Any]]:
    """The records of a JSON list or a JSONL file; raises DataError naming the field and the fix."""
    try:
        text = data_json.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"data_json: cannot read {data_json} ({type(err).__name__}: {err}); give a readable "
                        "UTF-8 JSON or JSONL file") from err
    lines = [(1, text)] if text.startswith("[") else [(n, line) for n, line in enumerate(text.splitlines(), 1)
                                                       if line.strip()]
    values = []
    for number, chunk in lines:
        try:
            values.append(json.loads(chunk))
        except json.JSONDecodeError as err:
            raise DataError(f"data_json: {data_json} is not valid JSON or JSONL (line {number + err.lineno - 1}, "
                            f"column {err.colno}: {err.msg}); fix the file (a JSON list of records, or one JSON "
                            "object per line)") from err
    records = values[0] if text.startswith("[") else values
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DataError(f"data_json: {data_json} is not a list of records (JSON objects); write a JSON list of "
                        "objects, or one object per line (JSONL)")
    if not records:
        raise DataError(f"data_json: {data_json} holds no records; give at least one training sample")
    return records


def data_error(data_json: str, data_branch: str = "a") -> str:
    """Why ``data_json`` cannot be trained on ("" when it can, or when it is not given)."""
    if not str(data_json or "").strip():
        return ""
    path = Path(os.path.expanduser(str(data_json)))
    if not path.is_file():
        return f"data_json: {path} is not an existing file; fix the path or leave it empty"
    try:
        records = read_records(path)
    except DataError as err:
        return str(err)
    if data_branch == "c":
        return ""  # any shape: data_fields maps it (checked at that question)
    for index, record in enumerate(records[:CHECKED_RECORDS], 1):
        messages = record.get("messages")
        if not isinstance(messages, list) or not messages:
            return (f"data_json: record {index} of {path} has no 'messages' list (the huggingface shape: messages "
                    "with role/content, images, videos); convert it, or answer data_branch=c and map its keys "
                    "with data_fields")
    return ""


def huggingface_media(record: dict[str, Any]) -> list[str]:
    """Media paths of a record in the huggingface shape."""
    found: list[str] = []
    for key in MEDIA_KEYS:
        value = record.get(key) or []
        found += [value] if isinstance(value, str) else [str(v) for v in value if isinstance(v, str)]
    return found


def media_error(data_json: str, media_root: str,
                media_of: Callable[[dict[str, Any]], list[str]] = huggingface_media) -> str:
    """Why the media of the first records cannot be found ("" when they all exist under the media folder)."""
    root_answer = str(media_root or "").strip()
    if root_answer:
        root = Path(os.path.expanduser(root_answer))
        if not root.is_dir():
            return f"media_root: {root} is not an existing folder; give the folder the data's media paths start in"
    if not str(data_json or "").strip():
        return ""
    path = Path(os.path.expanduser(str(data_json)))
    try:
        records = read_records(path)
    except (DataError, OSError):
        return ""  # data_json's own check says why
    root = (Path(os.path.expanduser(root_answer)) if root_answer else path.parent).resolve()
    field = "media_root" if root_answer else "data_json"
    for index, record in enumerate(records[:CHECKED_RECORDS], 1):
        try:
            names = media_of(record)
        except (KeyError, TypeError, AttributeError):
            return ""  # a mapping problem: data_fields' own check says why
        for name in names:
            if "://" in name:
                continue  # fetched by the data path itself
            target = (root / os.path.expanduser(name)).resolve()
            if not target.is_relative_to(root):
                return (f"{field}: record {index} names {name}, outside {root}; keep the media under media_root "
                        "(relative paths) or set media_root to a folder that holds them all")
            if not target.is_file():
                return (f"{field}: record {index} names {name}, but {target} does not exist; fix the record, or "
                        "set media_root to the folder its media paths start in")
    return ""

"""Branch C's data: the user's records read through a field mapping, samples made by the processor.

The runtime (``partials/processor_dataset.py``) is copied beside the generated dataset plugin; this
module is its copy-time side:

- ``sample_format``: which convention the processor builds a training sample in, read off the
  processor (a chat template: ``chat``; a ``suffix`` argument, PaliGemma: ``suffix``; else the
  processor's own prompt: ``prompt``, with its own query from the image alone for GOT-OCR2, or the
  record's prompt after the image the processor places, Fuyu and Kosmos-2) rather than a table of
  model types;
- ``parse_fields``: the ``data_fields`` answer checked, so that a wrong key fails at the question
  that set it, naming the field and the fix, before anything is written;
- ``fields_error``: whether the user's first record has the mapped keys.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from dataclasses import fields as dataclass_fields
from pathlib import Path
from types import ModuleType
from typing import Any

from hooks import TEMPLATE_ROOT

RUNTIME = TEMPLATE_ROOT / "partials" / "processor_dataset.py"


def runtime() -> ModuleType:
    """``partials/processor_dataset.py`` as a module (the same file the plugin imports)."""
    name = "msmm_processor_dataset"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, RUNTIME)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def sample_format(processor: Any) -> dict[str, str]:
    """How ``processor`` makes a training sample: ``chat``, ``suffix`` or ``prompt`` (with its end of turn)."""
    if getattr(processor, "chat_template", None):
        return {"kind": "chat", "end_of_turn": ""}
    call = type(processor).__call__
    if "suffix" in inspect.signature(call).parameters or "suffix" in inspect.getsource(call):
        return {"kind": "suffix", "end_of_turn": ""}  # PaliGemma: the processor labels the answer itself
    end = getattr(processor, "message_end_token", None) or processor.tokenizer.eos_token or ""
    return {"kind": "prompt", "end_of_turn": end, "own_query": _writes_own_query(processor)}


def _writes_own_query(processor: Any) -> bool:
    """Whether the processor writes the whole prompt from the image alone (GOT-OCR2's OCR query) and takes a
    text as the finished prompt; one that places the image before a text it is given (Fuyu, Kosmos-2) does not."""
    from PIL import Image

    image = Image.new("RGB", (64, 64), "red")
    try:
        if "input_ids" not in processor(images=[image], return_tensors="pt"):
            return False
    except Exception:  # noqa: BLE001 - it needs a text: the record's prompt is written after the image tokens
        return False
    try:
        given = processor(text=["Hi"], images=[image], return_tensors="pt")["input_ids"].tolist()
    except Exception:  # noqa: BLE001 - no prompt of its own is taken: the query is the processor's
        return True
    return given == processor.tokenizer(["Hi"])["input_ids"]


FIELD_NAMES = tuple(f.name for f in dataclass_fields(runtime().FieldMap))


def parse_fields(text: str) -> dict[str, str]:
    """The ``data_fields`` answer as a mapping; raises ValueError naming the problem and the fix."""
    if not str(text or "").strip():
        return {}
    try:
        value = json.loads(text) if isinstance(text, str) else dict(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"data_fields: not a JSON object ({err.msg}); e.g. "
                         '\'{"images": "img", "prompt": "q", "response": "a"}\'') from err
    if not isinstance(value, dict) or not all(isinstance(v, str) and v for v in value.values()):
        raise ValueError('data_fields: a JSON object of field -> record key, e.g. {"images": "img", "prompt": "q"}')
    unknown = sorted(set(value) - set(FIELD_NAMES))
    if unknown:
        raise ValueError(f"data_fields: unknown field(s) {unknown}; known: {', '.join(FIELD_NAMES)}")
    if bool(value.get("prompt")) != bool(value.get("response")):
        raise ValueError("data_fields: give both prompt and response (or conversations for multi-turn records)")
    return value


def fields_error(data_json: str, text: str) -> str:
    """Why the first record of ``data_json`` does not fit the mapping ("" if it does)."""
    try:
        mapping = runtime().FieldMap(**parse_fields(text))
    except ValueError as err:
        return str(err)
    if not str(data_json or "").strip():
        return ""
    try:
        first = runtime().read_records(Path(data_json).expanduser())[0]
        turns = mapping.turns(first)
    except (OSError, ValueError, IndexError) as err:
        return f"data_json: cannot read a record from {data_json} ({type(err).__name__}: {err})"
    except (KeyError, TypeError, AttributeError) as err:
        return (f"data_fields: the first record of {data_json} has no key {err} for the mapping "
                f"{parse_fields(text) or '(default: messages, images)'}; map the record's own keys")
    if not any(role == "assistant" and text.strip() for role, text in turns):
        return f"data_fields: the first record of {data_json} gives no response to train on; map the answer's key"
    return ""

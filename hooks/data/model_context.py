"""Branch c for a release whose images travel as file paths in the text: its own ``make_context`` and ``chat()``.

Qwen-VL-Chat ships no processor class and no chat template. Its model card writes a query with
``tokenizer.from_list_format([{'image': path}, {'text': ...}])`` (``Picture 1: <img>path</img>``),
``model.chat()`` wraps it with ``make_context`` (ChatML, the default system message) and the model's
forward opens each image file from the ids between ``<img>`` and ``</img>``. Rather than re-deriving
any of that, this module

- finds ``make_context`` in the model's own modules and ``from_list_format`` on its tokenizer;
- runs ``chat()`` on the model built without weights, ``generate`` replaced by a recorder, on a query
  with one image file, and checks that ``make_context`` with ``chat()``'s defaults (its system
  message, its generation config's chat format) rebuilds that prompt token for token;
- checks, in data parity, the dataset plugin's samples against ``chat()`` on the same image file and
  question: ids up to the answer equal, the answer and its end of turn trained.
"""

from __future__ import annotations

import inspect
import sys
import tempfile
from pathlib import Path
from typing import Any

from hooks.data import IGNORE_INDEX, first_difference
from hooks.data.batch_spec import BatchSpec
from hooks.data.model_code import code_modules, find_function, recording

CONTEXT_FUNCTION, LIST_FORMAT = "make_context", "from_list_format"


class _Recorded(Exception):
    """Raised by the stand-in ``generate``: ``chat()`` has said what it would run."""


def with_generation_config(model: Any, model_dir: Path) -> Any:
    """``model`` with the folder's ``generation_config.json`` (``chat()`` reads its chat format and window), which
    only ``from_pretrained`` loads: the weightless build has none."""
    from transformers import GenerationConfig

    if getattr(model, "generation_config", None) is None and (Path(model_dir) / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(str(model_dir))
    return model


def record_chat(model: Any, tokenizer: Any, query: str) -> list[int]:
    """The ids the model's own ``chat(tokenizer, query, history=None)`` hands to ``generate``."""
    calls: dict[str, Any] = {}

    def record(*args: Any, **kwargs: Any) -> Any:
        calls["input_ids"] = args[0] if args else kwargs["input_ids"]
        raise _Recorded

    try:
        with recording(model, record):
            model.chat(tokenizer, query, history=None)
    except _Recorded:
        pass
    if "input_ids" not in calls:
        raise ValueError(f"{type(model).__name__}.chat() returned without calling generate")
    return calls["input_ids"][0].tolist()


def _defaults(cls: type, model: Any) -> tuple[str, str]:
    """(system message, chat format) as ``chat()`` passes them to ``make_context`` by default."""
    system = inspect.signature(cls.chat).parameters.get("system")
    chat_format = getattr(getattr(model, "generation_config", None), "chat_format", None) or "chatml"
    return (system.default if system is not None and isinstance(system.default, str) else ""), chat_format


def context_end_of_turn(make_context: Any, tokenizer: Any, chat_format: str) -> str:
    """What ``make_context`` writes right after an answer in the history, up to whitespace (``<|im_end|>``)."""
    text = make_context(tokenizer, "Q", history=[("q", "\x00")], system="", chat_format=chat_format)[0]
    after = text.split("\x00", 1)[1].split()
    return after[0] if after else ""


def context_facts(cls: type, model: Any, model_dir: Path, trust_remote_code: bool) -> dict[str, Any]:
    """The ``context`` sample format for the probe's facts; {} where the release has no such entry points."""
    from PIL import Image
    from transformers import AutoTokenizer

    make_context = find_function(code_modules(cls), CONTEXT_FUNCTION)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
    if make_context is None or not callable(getattr(tokenizer, LIST_FORMAT, None)) or not callable(
            getattr(cls, "chat", None)):
        return {}
    system, chat_format = _defaults(cls, with_generation_config(model, model_dir))
    with tempfile.TemporaryDirectory(prefix="msmm-context-") as tmp:
        path = Path(tmp) / "image.png"
        Image.new("RGB", (64, 64), "red").save(path)
        query = getattr(tokenizer, LIST_FORMAT)([{"image": str(path)}, {"text": "Describe it."}])
        ids = record_chat(model, tokenizer, query)
        rebuilt = list(make_context(tokenizer, query, history=[], system=system, max_window_size=1 << 30,
                                    chat_format=chat_format)[1])
    problems = [] if rebuilt == ids else [
        f"make_context() with chat()'s defaults does not rebuild chat()'s prompt (first difference at token "
        f"{first_difference(rebuilt, ids)}); the dataset plugin needs review"]
    module = sys.modules[make_context.__module__].__name__.rpartition(".")[2]
    return {"sample_format": {"kind": "context", "function": f"{module}.{CONTEXT_FUNCTION}",
                              "system_message": system, "chat_format": chat_format,
                              "end_of_turn": context_end_of_turn(make_context, tokenizer, chat_format)},
            "problems": problems}


# --- data parity (run by hooks.data.batch inside the framework's environment) ----------------------


def check_context(batches: list[tuple[int, Any]], samples: list[tuple[str, list[Path], str, str | None]],
                  model_dir: Path, spec: BatchSpec) -> dict[str, Any]:
    """Compare the dataset plugin's batches with the model's own ``chat()`` on the same image file and question.

    ``samples``: (name, image files, the user's first turn as the record writes it, its answer) per batch.
    The plugin writes each image as a PNG of the same pixels in its own folder: the ids between ``<img>`` and
    ``</img>`` name that file, so the comparison reads ``chat()``'s query with the plugin's file in it.
    """
    import transformers

    from hooks.model.build import build_structure
    from hooks.model.loading import load_config_and_class

    fmt = spec.sample_format
    trust = spec.trust_remote_code
    config, cls, _ = load_config_and_class(model_dir, trust_remote_code=trust)
    model = with_generation_config(build_structure(cls, config, model_dir)[0], model_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust)
    start_tag, end_tag = tokenizer.image_start_tag, tokenizer.image_end_tag
    details, names = [], []
    for (name, images, question, answer), (_, ours) in zip(samples, batches, strict=True):
        names.append(name)
        if isinstance(ours, Exception):
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"{name}: the dataset plugin fails on it ({type(ours).__name__}: {ours})"]}
        ids, labels = ours["input_ids"][0].tolist(), ours["labels"][0].tolist()
        text = tokenizer.decode([t for t, m in zip(ids, ours["attention_mask"][0].tolist(), strict=True) if m])
        if not images:
            masked = tokenizer.decode([t for t, m in zip(ids, ours["attention_mask"][0].tolist(), strict=True)
                                       if not m])
            if start_tag not in masked:
                return {"verdict": "mismatch", "samples": names, "details": [
                    *details, f"{name}: the batch lacks a masked stand-in image (a rank without images would hang "
                              "the others)"]}
            details.append(f"{name}: a masked, untrained stand-in image added")
            continue
        if len(images) != 1 or answer is None:
            details.append(f"{name}: built; not compared (the model's own chat() takes one query)")
            continue
        file = text.split(start_tag, 1)[1].split(end_tag, 1)[0]
        query = tokenizer.from_list_format([{"image": file}, {"text": question.replace("<image>", "")}])
        prompt = record_chat(model, tokenizer, query)
        if ids[:len(prompt)] != prompt:
            at = first_difference(ids, prompt)
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"{name}: input_ids differ from the model's own chat() at token {at}: the plugin writes "
                          f"{tokenizer.decode(ids[max(at - 3, 0):at + 4])!r}, chat() "
                          f"{tokenizer.decode(prompt[max(at - 3, 0):at + 4])!r}"]}
        trained = tokenizer.decode([t for t, lab in zip(ids, labels, strict=True) if lab != IGNORE_INDEX])
        if any(lab != IGNORE_INDEX for lab in labels[:len(prompt)]) or trained != answer + fmt["end_of_turn"]:
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"{name}: trains {trained!r}, not the answer and its end of turn "
                          f"{answer + fmt['end_of_turn']!r}"]}
        from PIL import Image

        if list(Image.open(file).convert("RGB").getdata()) != list(Image.open(images[0]).convert("RGB").getdata()):
            return {"verdict": "mismatch", "samples": names,
                    "details": [*details, f"{name}: the image file the plugin writes differs from the record's"]}
        details.append(f"{name}: same ids as the model's own chat() up to the answer (its image file the record's "
                       f"pixels), the answer and {fmt['end_of_turn']!r} trained")
    return {"verdict": "match", "samples": names, "details": details}

"""Branch C's data: the user's records read through a field mapping, samples made by the processor.

The runtime (``partials/processor_dataset.py``) is copied beside the generated dataset plugin; this
module is its copy-time side:

- ``sample_format``: which convention the processor builds a training sample in, read off the
  processor (a chat template, the processor's or only its tokenizer's: ``chat``, with the processor's
  own image mark in string content when the template takes no typed image items; a processor whose
  ``__call__`` takes no clips while its own chat-template call reads them from files, Voxtral:
  ``template``, with the mode its tokenizer must be loaded in to write an answer; a ``suffix``
  argument, PaliGemma: ``suffix``; else the processor's own prompt: ``prompt``, with its own query
  from the image alone for GOT-OCR2, or the record's prompt after the image the processor places,
  Fuyu and Kosmos-2) rather than a table of model types;
- ``parse_fields``: the ``data_fields`` answer checked, so that a wrong key fails at the question
  that set it, naming the field and the fix, before anything is written;
- ``fields_error``: whether the user's first record has the mapped keys, and some record an answer;
- ``answer_error``: the rule every branch's data answer meets: at least one record has a non-empty answer.
"""

from __future__ import annotations

import inspect
import json
import tempfile
from collections.abc import Mapping
from dataclasses import fields as dataclass_fields
from pathlib import Path
from types import ModuleType
from typing import Any

from hooks import TEMPLATE_ROOT, load_partial

DATASET_RUNTIME = TEMPLATE_ROOT / "partials" / "processor_dataset.py"


def dataset_runtime() -> ModuleType:
    """``partials/processor_dataset.py`` as a module (the same file branch c's plugin imports)."""
    return load_partial("processor_dataset.py")


def sample_format(processor: Any, folder: Path | None = None) -> dict[str, Any]:
    """How ``processor`` makes a training sample: ``chat``, ``template``, ``suffix`` or ``prompt`` (with its end of
    turn). ``folder``: where it was loaded from, to load it again in a training mode (``template_form``)."""
    own_token = getattr(processor, "boi_token", None) or getattr(processor, "image_token", None)
    if getattr(processor, "chat_template", None):
        return {"kind": "chat", "end_of_turn": "", **_chat_call(processor, {})[0]}
    if getattr(processor.tokenizer, "chat_template", None):
        # A template on the tokenizer only is the prompt format where the processor has no image token to write a
        # prompt with (Phi-3-vision), or where it takes the image and closes each answer with an end of turn (a
        # release that keeps the processor's template in tokenizer_config.json); a text-only template that writes
        # no end of turn (Chameleon's tokenizer) leaves the processor's own prompt convention.
        form, expands = _chat_call(processor, {"template_on": "tokenizer"})
        end = _chat_end_of_turn(processor, form)
        if not own_token or (end and expands):
            return {"kind": "chat", "end_of_turn": end, **form}
    if template := template_form(processor, folder):
        return template
    call = type(processor).__call__
    if "suffix" in inspect.signature(call).parameters or "suffix" in inspect.getsource(call):
        return {"kind": "suffix", "end_of_turn": ""}  # PaliGemma: the processor labels the answer itself
    end = getattr(processor, "message_end_token", None) or processor.tokenizer.eos_token or ""
    return {"kind": "prompt", "end_of_turn": end, "own_query": _writes_own_query(processor)}


def template_form(processor: Any, folder: Path | None = None) -> dict[str, Any] | None:
    """The ``template`` convention, or None: the processor takes audio, its ``__call__`` no clips, and its own
    ``apply_chat_template(tokenize=True, return_dict=True)`` on a clip named as a file and a question returns more
    tokens than on the question alone, and the clip's features (Voxtral, as its model card calls it).

    A processor that refuses a conversation ending in an answer as loaded (mistral_common validates a request for
    inference by default) is loaded again from ``folder`` in the training mode its tokenizer's ``from_pretrained``
    names (``training_mode_of``); ``load_mode`` records it when that processor writes the answer. Left empty when
    nothing takes an answer: the probe's one-clip sample then fails, naming why."""
    from hooks.data.audio import audio_kwarg, extractor_of, sample_clip, sampling_rate

    if (extractor_of(processor)[1] is None or audio_kwarg(processor)
            or not callable(getattr(processor, "apply_chat_template", None))):
        return None
    rt = dataset_runtime()
    form = {"kind": "template", "end_of_turn": "", "media": ["audio"], "sampling_rate": sampling_rate(processor)}
    question, answer = [("user", rt.AUDIO_PLACEHOLDER + "Describe it.")], [("assistant", "A tone.")]
    with tempfile.TemporaryDirectory(prefix="msmm-clips-") as tmp:
        fmt, call = rt.SampleFormat(**form), rt.TemplateCall(processor, processor, Path(tmp))
        try:
            heard = rt._template_sample(call, fmt, question, [sample_clip()])
            text = rt._template_sample(call, fmt, [("user", "Describe it.")], [])
        except Exception:  # noqa: BLE001 - could not evaluate: another convention may fit
            return None
        if heard["input_ids"].shape[-1] <= text["input_ids"].shape[-1] or set(heard) <= set(text):
            return None
        mode = training_mode_of(processor.tokenizer)
        for load_mode in ("", mode) if mode and folder else ("",):
            try:
                trainer = (type(processor).from_pretrained(str(folder), mode=rt.training_mode(load_mode))
                           if load_mode else processor)
                sample = rt._template_sample(rt.TemplateCall(trainer, processor, Path(tmp)), fmt, question + answer,
                                             [sample_clip()])
            except Exception:  # noqa: BLE001 - not in this mode: the next, or none (the probe's sample says why)
                continue
            trained = sample["input_ids"][0][sample["labels"][0] != rt.IGNORE].tolist()
            written = processor.tokenizer.decode(trained, skip_special_tokens=False)
            at = written.rfind(answer[0][1])
            return {**form, "load_mode": load_mode,
                    "end_of_turn": written[at + len(answer[0][1]):] if at >= 0 else ""}
    return form


def training_mode_of(tokenizer: Any) -> str:
    """The mode a tokenizer is loaded in to encode training samples, ``module.Enum.member`` ("" when it has none):
    a ``mode`` parameter of its ``from_pretrained`` whose default belongs to an enum with a ``finetuning`` member
    (mistral_common's ``ValidationMode``: a conversation for fine-tuning ends in an answer, one for serving does
    not)."""
    try:
        default = inspect.signature(type(tokenizer).from_pretrained).parameters["mode"].default
    except (KeyError, TypeError, ValueError):
        return ""
    enum = type(default)
    if not isinstance(getattr(enum, "__members__", None), Mapping) or "finetuning" not in enum.__members__:
        return ""
    return f"{enum.__module__}.{enum.__qualname__}.finetuning"


def template_call(processor: Any, fmt: dict[str, Any], folder: Path | None, audio_dir: Path) -> Any:
    """The runtime's ``TemplateCall`` for ``processor`` (loaded as its model card loads it): loaded again from
    ``folder`` in ``fmt``'s training mode, as the generated dataset plugin loads it."""
    rt = dataset_runtime()
    form = rt.SampleFormat(**fmt)
    trainer = processor
    if form.load_mode:
        trainer = type(processor).from_pretrained(str(folder), mode=rt.training_mode(form.load_mode))
    return rt.TemplateCall(trainer, processor, Path(audio_dir))


def _chat_call(processor: Any, fmt: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """How the chat template and the processor take an image: typed ``{"type": "image"}`` items and a batch of
    one, as transformers' processors do; else the processor's own image mark written into string content, in a
    batch of one or one string per call (Phi-3-vision's model card: ``<|image_1|>`` in the prompt,
    ``processor(prompt, [image])``). A form that raises is not evidence, only one that expands the image is;
    with none, the typed form stays (False: nothing expanded) and the probe's one-image call reports why."""
    if _expands(processor, fmt, typed=True):
        return fmt, True
    for mark in image_marks(processor):
        for one_text in (False, True):
            trial = {**fmt, "image_mark": mark, **({"one_text": True} if one_text else {})}
            if _expands(processor, trial):
                return trial, True
    return fmt, False


def _chat_end_of_turn(processor: Any, fmt: dict[str, Any]) -> str:
    """The special tokens the template writes right after an answer (Phi-3's ``<|end|>``), for a template the
    chat-format derivation cannot read (typed items only): the data parity's reference trains them too."""
    from hooks.data.chat_format import closing_tokens

    rt = dataset_runtime()
    form = rt.SampleFormat(kind="chat", **fmt)
    typed = [{"role": role, "content": [{"type": "text", "text": text}]} for role, text in
             (("user", "Hi"), ("assistant", "OK"))]
    try:
        text = rt.template_owner(processor, form).apply_chat_template(
            rt.as_template_reads(typed, (), form.image_mark), tokenize=False)
    except Exception:  # noqa: BLE001 - could not evaluate: no end of turn is claimed
        return ""
    tokenizer = processor.tokenizer
    return "".join(closing_tokens(text[text.rfind("OK") + 2:], [*tokenizer.all_special_tokens,
                                                                *tokenizer.get_added_vocab()]))


def one_image_call(processor: Any, fmt: dict[str, Any]) -> Any:
    """The processor's output for one 64x64 image and a short user turn, called as the data path calls it."""
    from PIL import Image

    rt = dataset_runtime()
    form = rt.SampleFormat(**fmt)
    image = Image.new("RGB", (64, 64), "red")
    if form.kind == "chat":
        typed = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe it."}]}]
        text = rt.template_owner(processor, form).apply_chat_template(
            rt.as_template_reads(typed, (), form.image_mark), add_generation_prompt=True, tokenize=False)
    else:
        token = getattr(processor, "boi_token", None) or getattr(processor, "image_token", None) or ""
        text = f"{token} Describe it."
    if form.one_text:  # one string and its images, as the model card calls it (Phi-3-vision)
        return processor(text, [image], return_tensors="pt")
    return processor(text=[text], images=[image], return_tensors="pt")


def one_audio_call(processor: Any, fmt: dict[str, Any], folder: Path | None = None) -> Any:
    """The processor's output for the demo clip and a short user turn (chat convention), called as branch c's
    dataset plugin calls it: the template renders a typed audio item, the processor expands it for the clip.
    ``template`` convention: the whole one-clip sample, built as the plugin builds it (``folder``: where the
    processor is loaded from in its training mode)."""
    from hooks.data.audio import sample_clip

    rt = dataset_runtime()
    if fmt.get("kind") == "template":
        turns = [("user", rt.AUDIO_PLACEHOLDER + "Describe it."), ("assistant", "A tone.")]
        with tempfile.TemporaryDirectory(prefix="msmm-clips-") as tmp:
            sample = rt.build_sample(template_call(processor, fmt, folder, Path(tmp)), rt.SampleFormat(**fmt), turns,
                                     [], 1 << 30, [sample_clip()])
        return {key: value for key, value in sample.items() if key != "labels"}  # what the processor returned
    form = rt.SampleFormat(**{"kind": "chat", **fmt})
    typed = [{"role": "user", "content": [rt.audio_item(), {"type": "text", "text": "Describe it."}]}]
    text = rt.template_owner(processor, form).apply_chat_template(
        rt.as_template_reads(typed, (), form.image_mark), add_generation_prompt=True, tokenize=False)
    return rt.call(processor, text, [], form.one_text, [sample_clip()], form.audio_kwarg or "audio", form.sampling_rate)


def _expands(processor: Any, fmt: dict[str, Any], typed: bool = False) -> bool:
    """Whether the one-image call works in ``fmt``; with a written mark, also whether the image became more
    tokens than the text alone has (a mark the processor does not know stays text)."""
    from hooks.data.audio import audio_kwarg, processor_media, sampling_rate

    try:
        if "image" in processor_media(processor):
            ids = one_image_call(processor, {"kind": "chat", **fmt})["input_ids"]
        else:  # an audio-only chat model (Qwen2-Audio): its form is the one that takes a clip
            ids = one_audio_call(processor, {**fmt, "audio_kwarg": audio_kwarg(processor),
                                             "sampling_rate": sampling_rate(processor)})["input_ids"]
    except Exception:  # noqa: BLE001 - could not evaluate this form: another may work
        return False
    if typed:
        return True
    mark = fmt["image_mark"].format(n=1)
    return ids.shape[-1] > len(processor.tokenizer(mark + "\nDescribe it.", add_special_tokens=True)["input_ids"]) + 8


def image_marks(processor: Any) -> list[str]:
    """Texts the processor may expand into an image's tokens, read off its own attributes: a string that looks
    like a special mark naming an image (``<|image|>``, ``<image>``), and a numbered list of them (Phi-3-vision's
    ``img_tokens``: ``<|image_{n}|>``, ``{n}`` counting from 1)."""
    names = sorted({*vars(processor), *(n for c in type(processor).__mro__ for n in vars(c))})
    marks: list[str] = []
    for name in (n for n in names if not n.startswith("_")):
        try:
            value = getattr(processor, name)
        except Exception:  # noqa: BLE001 - a property that needs more state: not a mark
            continue
        if isinstance(value, str) and _looks_like_mark(value):
            marks.append(value.replace("{", "{{").replace("}", "}}"))
        elif isinstance(value, (list, tuple)) and len(value) > 1 and all(isinstance(v, str) for v in value[:2]):
            marks += [p for p in _numbered(value[0], value[1]) if _looks_like_mark(value[0])]
    return list(dict.fromkeys(marks))


def _looks_like_mark(text: str) -> bool:
    return len(text) < 40 and text[:1] in "<[" and ("image" in text.lower() or "img" in text.lower())


def _numbered(first: str, second: str) -> list[str]:
    """``first`` as a pattern with ``{n}`` where its 1 becomes the 2 of ``second``."""
    escaped = first.replace("{", "{{").replace("}", "}}")
    return [p for i, ch in enumerate(escaped) if ch == "1"
            for p in [escaped[:i] + "{n}" + escaped[i + 1:]] if p.format(n=1) == first and p.format(n=2) == second]


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


FIELD_NAMES = tuple(f.name for f in dataclass_fields(dataset_runtime().FieldMap))


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
        mapping = dataset_runtime().FieldMap(**parse_fields(text))
    except ValueError as err:
        return str(err)
    if not str(data_json or "").strip():
        return ""
    try:
        records = dataset_runtime().read_records(Path(data_json).expanduser())
        from hooks.data.shapes import mapped_error

        shaped = mapped_error(records, mapping)
        if shaped:
            return shaped
        mapping.turns(records[0])
    except (OSError, ValueError, IndexError) as err:
        return f"data_json: cannot read a record from {data_json} ({type(err).__name__}: {err})"
    except (KeyError, TypeError, AttributeError) as err:
        return (f"data_fields: the first record of {data_json} has no key {err} for the mapping "
                f"{parse_fields(text) or '(default: messages, images)'}; map the record's own keys")
    return answer_error(data_json, records, mapping)


def answered(record: dict[str, Any], mapping: Any) -> bool:
    """Whether ``record`` read through ``mapping`` (a ``FieldMap``) has an assistant turn with text: the tokens
    the loss is computed on. A record the mapping cannot read has none."""
    try:
        return any(role == "assistant" and text.strip() for role, text in mapping.turns(record))
    except (KeyError, TypeError, AttributeError):
        return False


def answer_error(data_json: str | Path, records: list[dict[str, Any]], mapping: Any) -> str:
    """The one rule for every branch: at least one record has a non-empty answer, else there is nothing to train.

    Branches a and b read the huggingface shape (``FieldMap()``: ``messages`` of role/content turns, as the
    YAML's ``role_tag``/``content_tag`` say), branch c its ``data_fields`` mapping. Without one answer every
    label is masked: the framework's loss has no token (or trains the end of turn alone), which the smoke
    would report only after the checkout was written.
    """
    if any(answered(record, mapping) for record in records):
        return ""
    return (f"data_json: no record of {data_json} has a non-empty answer to train on; write each record's answer "
            "as an assistant turn (branch c: map the key that holds it with data_fields)")

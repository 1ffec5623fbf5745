"""Branch c for a model without a processor class: its own data code, found and measured.

InternVL-Chat-style releases ship no processor: image tiling lives in a function of the model's
Python files (``load_image``), the chat format in a FastChat-style conversation module
(``get_conv_template``), and the one complete statement of how they combine is the model's own
``chat()``: it sets an attribute the forward needs (the image-context token's id), writes each
image as a start token, one context token per feature of every tile and an end token, and passes
per-tile tensors (``image_flags``). Rather than re-deriving any of that, this module

- finds the two functions by name in the model class's module and the modules it imports
  relatively (the files the post-generation task copies into the plugin's ``remote_code/``);
- runs ``chat()`` on the model built without weights, with ``forward``/``generate`` replaced by a
  recorder, and reads the format off what it would have passed: the ids (how an image is written,
  context tokens per tile), the per-tile tensors, the attributes it set on the model, the
  conversation template it asked for and the system message it left in it;
- checks that the dataset runtime (``partials/processor_dataset.py``, ``code`` convention) rebuilds
  ``chat()``'s prompt from those facts token for token. Data parity (``hooks.data.batch``) runs the
  same recording on the user-facing samples as the reference.

Running ``chat()`` needs the user's remote-code consent, which the probe has already been given.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from hooks.data import IGNORE_INDEX, first_difference, value_difference
from hooks.data.batch_spec import BatchSpec

IMAGE_FUNCTION, CONVERSATION_FUNCTION = "load_image", "get_conv_template"
PASSED_THROUGH = ("input_ids", "attention_mask", "pixel_values", "labels", "position_ids")


class _Recorded(Exception):
    """Raised by the stand-in ``forward``/``generate``: ``chat()`` has said what it would run."""


@dataclass
class ChatCall:
    """What the model's ``chat()`` would have run: its inputs, the attributes it set, its conversation."""

    input_ids: list[int]
    inputs: dict[str, Any]
    attributes: dict[str, Any]
    template: str | None
    system_message: str | None
    prompt_text: str | None = None  # the text chat() tokenized last: its prompt, to extend with an answer


def code_modules(cls: type) -> list[ModuleType]:
    """The class's module and the loaded modules it imports relatively (the files postgen copies)."""
    from transformers.dynamic_module_utils import get_relative_import_files

    module = sys.modules[cls.__module__]
    files = {Path(module.__file__).resolve(), *(Path(f).resolve() for f in get_relative_import_files(module.__file__))}
    found = [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) and Path(m.__file__).resolve()
             in files]
    return sorted({id(m): m for m in found}.values(), key=lambda m: m.__name__)


def own_modules(cls: type, model_dir: Path) -> list[ModuleType]:
    """The class's code modules, then the model card's definitions of the image function when the code lacks it
    (``hooks.data.model_card``: releases whose preprocessing is only in the README's quick-start)."""
    from hooks.data import model_card

    modules = code_modules(cls)
    if find_function(modules, IMAGE_FUNCTION) is None and (card := model_card.load_card(model_dir, IMAGE_FUNCTION)):
        modules.append(card)
    return modules


def data_functions(cls: type, model_dir: Path, builder: str = "") -> tuple[Any | None, Any | None]:
    """(image function, conversation function): the user's sample builder when an answer names one
    (``hooks.data.builder``: a release that ships no image preprocessing), else the model's own, from its
    code and then its model card."""
    modules = own_modules(cls, model_dir) if not builder else code_modules(cls)
    get_conv = find_function(modules, CONVERSATION_FUNCTION)
    if builder:
        from hooks.data import builder as sample_builder

        return sample_builder.load_builder(builder), get_conv
    return find_function(modules, IMAGE_FUNCTION), get_conv


def opens_file(function: Any) -> bool:
    """Whether the image function opens its first argument as a file (the card's ``load_image(image_file)``)."""
    first = next(iter(inspect.signature(function).parameters), "")
    return bool(first) and re.search(rf"Image\.open\(\s*{re.escape(first)}\b", inspect.getsource(function)) is not None


def find_function(modules: list[ModuleType], name: str) -> Any | None:
    """The function ``name`` defined in one of ``modules`` (not merely imported there)."""
    for module in modules:
        value = getattr(module, name, None)
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            return value
    return None


@contextlib.contextmanager
def recording(model: Any, record: Any) -> Iterator[None]:
    """``model.forward`` and ``model.generate`` replaced by ``record`` and ``model.device`` reading CPU (``chat()``
    moves its ids to ``model.device``: the weightless build's meta would lose them), restored afterwards."""
    import torch

    cls = type(model)
    model.forward = model.generate = record
    model.__class__ = type(cls.__name__, (cls,), {"device": property(lambda _self: torch.device("cpu"))})
    try:
        yield
    finally:
        del model.forward, model.generate
        model.__class__ = cls


def capture_chat(model: Any, tokenizer: Any, pixel_values: Any, question: str) -> ChatCall:
    """Run the model's own ``chat()`` up to the model call, on ``model`` (built without weights)."""

    calls: dict[str, Any] = {}
    conversations: list[tuple[str | None, Any]] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        calls.update(kwargs)
        raise _Recorded

    chat_module = sys.modules[type(model).chat.__module__]
    original = getattr(chat_module, CONVERSATION_FUNCTION, None)

    def conversation(name: str | None = None, *args: Any, **kwargs: Any) -> Any:
        conv = original(name, *args, **kwargs) if name is not None else original(*args, **kwargs)
        conversations.append((name, conv))
        return conv

    texts: list[str] = []
    tokenizer_class = type(tokenizer)
    tokenize, own_call = tokenizer_class.__call__, "__call__" in vars(tokenizer_class)

    def tokenizing(self: Any, text: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(text, str):
            texts.append(text)
        return tokenize(self, text, *args, **kwargs)

    before = {k: v for k, v in vars(model).items() if not k.startswith("_")}
    if original is not None:
        setattr(chat_module, CONVERSATION_FUNCTION, conversation)
    params = inspect.signature(model.chat).parameters
    extra = {"generation_config": {"max_new_tokens": 1}} if "generation_config" in params else {}
    tokenizer_class.__call__ = tokenizing
    try:
        with recording(model, record):
            model.chat(tokenizer, pixel_values, question, **extra)
    except _Recorded:
        pass
    finally:
        if own_call:
            tokenizer_class.__call__ = tokenize
        else:  # inherited: the class is left as it was, without a __call__ of its own
            del tokenizer_class.__call__
        if original is not None:
            setattr(chat_module, CONVERSATION_FUNCTION, original)
    if "input_ids" not in calls:
        raise ValueError(f"{type(model).__name__}.chat() returned without calling the model")
    attributes = {k: v for k, v in vars(model).items()
                  if not k.startswith("_") and isinstance(v, (int, str)) and before.get(k) != v}
    name, conv = conversations[-1] if conversations else (None, None)
    return ChatCall(input_ids=calls["input_ids"][0].tolist(), inputs=calls, attributes=attributes, template=name,
                    system_message=getattr(conv, "system_message", None), prompt_text=texts[-1] if texts else None)


def selecting_flags(cls: type, call: ChatCall) -> list[str]:
    """``forward`` inputs that select the real tiles' features (``vit_embeds[image_flags == 1]``) and that
    ``chat()`` does not pass (its ``generate`` embeds the image itself): training needs them, 1 per real tile."""
    source = inspect.getsource(cls.forward)
    return [name for name in inspect.signature(cls.forward).parameters
            if name not in call.inputs and re.search(rf"\[\s*{re.escape(name)}\s*==\s*1\s*\]", source)]


def image_text(call: ChatCall, tokenizer: Any, tiles: int) -> tuple[list[str], int]:
    """(start, context token, end) of the image in ``chat()``'s ids, and context tokens per tile."""
    context = next((v for k, v in call.attributes.items() if k.endswith("token_id") and isinstance(v, int)), None)
    if context is None or context not in call.input_ids:
        raise ValueError("chat() set no token-id attribute that its ids use for the image")
    ids = call.input_ids
    first, count = ids.index(context), ids.count(context)
    last = first + count - 1
    if ids[first:last + 1] != [context] * count or count % tiles or not 0 < first < last + 1 < len(ids):
        raise ValueError("chat()'s image is not one run of context tokens between a start and an end token")
    names = tokenizer.convert_ids_to_tokens([ids[first - 1], context, ids[last + 1]])
    return names, count // tiles


def code_facts(cls: type, model: Any, model_dir: Path, trust_remote_code: bool, builder: str = "") -> dict[str, Any]:
    """The ``code`` sample format and model attributes for the probe's facts; ``problems`` if it cannot be read.

    ``builder``: the user's sample builder (``path.py:function``, absolute), in place of an image function the
    release does not ship; ``needs_builder`` says that only that function is missing."""
    from PIL import Image
    from transformers import AutoTokenizer

    try:
        load_image, get_conv = data_functions(cls, model_dir, builder)
    except Exception as err:  # noqa: BLE001 - the user's file: never evidence, the cause is the answer
        return {"problems": [f"could not evaluate the sample builder {builder} ({type(err).__name__}: "
                             f"{str(err)[:300]})"], "builder": builder}
    missing = [name for name, f in ((IMAGE_FUNCTION, load_image), (CONVERSATION_FUNCTION, get_conv)) if f is None]
    if missing or not callable(getattr(cls, "chat", None)):
        what = ", ".join([*missing, *([] if callable(getattr(cls, "chat", None)) else ["a chat() method"])])
        card = (model_dir / "README.md").is_file()
        return {"problems": [f"neither the model's code nor its model card ({model_dir.name}/README.md "
                             f"{'code blocks' if card else 'absent'}) defines {what}"], "model_card": card,
                "needs_builder": what == IMAGE_FUNCTION}
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
    image = Image.new("RGB", (128, 64), "red")  # wider than tall: more than one tile where the model tiles
    image_file = opens_file(load_image)
    if builder:
        from hooks.data.builder import contract_problems

        if problems := contract_problems(load_image, model.config, image, image_file):
            return {"problems": problems, "builder": builder}
    from hooks.data.records import dataset_runtime

    data = dataset_runtime()
    pixels = data.code_tiles(data.ModelCode(tokenizer, load_image, None), data.SampleFormat(kind="code",
                                                                                        image_file=image_file), image)
    call = capture_chat(model, tokenizer, pixels, "Describe it.")
    names, per_tile = image_text(call, tokenizer, pixels.shape[0])
    flags = sorted({*(k for k, v in call.inputs.items() if k not in PASSED_THROUGH and hasattr(v, "shape")
                      and v.shape[:1] == pixels.shape[:1] and bool((v == 1).all())), *selecting_flags(cls, call)})
    fmt = {"kind": "code", "image_text": names, "per_tile": per_tile, "tile_flags": flags,
           "image_function": f"{load_image.__module__.rpartition('.')[2]}.{load_image.__name__}",
           "image_defaults": {k: p.default for k, p in list(inspect.signature(load_image).parameters.items())[1:]
                              if p.default is not inspect.Parameter.empty},
           "conversation": f"{get_conv.__module__.rpartition('.')[2]}.{CONVERSATION_FUNCTION}",
           "template": call.template, "system_message": call.system_message, "image_file": image_file,
           **({"builder": builder} if builder else {})}
    rebuilt = rebuild_prompt(fmt, tokenizer, load_image, get_conv, image, "Describe it.")
    problems = [] if rebuilt == call.input_ids else [
        f"the conversation and image text read off chat() do not rebuild its prompt (first difference at token "
        f"{first_difference(rebuilt, call.input_ids)}); the dataset plugin needs review"]
    return {"sample_format": fmt, "model_attributes": dict(sorted(call.attributes.items())),
            "model_attribute_tokens": {k: tokenizer.convert_ids_to_tokens(v) for k, v in call.attributes.items()
                                       if isinstance(v, int)}, "problems": problems}


def runtime_code(fmt: dict[str, Any], tokenizer: Any, load_image: Any, get_conv: Any) -> tuple[Any, Any]:
    """(ModelCode, SampleFormat) of the dataset runtime for these facts, as the generated plugin makes them."""
    from hooks.data.records import dataset_runtime

    data = dataset_runtime()

    def conversation() -> Any:
        conv = get_conv(fmt["template"]) if fmt.get("template") is not None else get_conv()
        if fmt.get("system_message") is not None:
            conv.system_message = fmt["system_message"]
        return conv

    return (data.ModelCode(tokenizer, load_image, conversation),
            data.SampleFormat(kind="code", image_text=tuple(fmt["image_text"]), per_tile=fmt["per_tile"],
                              tile_flags=tuple(fmt["tile_flags"]), image_file=bool(fmt.get("image_file"))))


def rebuild_prompt(fmt: dict[str, Any], tokenizer: Any, load_image: Any, get_conv: Any, image: Any,
                   question: str) -> list[int]:
    """The runtime's ids up to the answer, for one image and ``question``."""
    code, sample_format = runtime_code(fmt, tokenizer, load_image, get_conv)
    from hooks.data.records import dataset_runtime

    sample = dataset_runtime().build_sample(code, sample_format, [("user", question), ("assistant", "Yes.")], [image],
                                            1 << 20)
    labels = sample["labels"][0].tolist()
    return sample["input_ids"][0].tolist()[:next(i for i, v in enumerate(labels) if v != -100)]


# --- data parity (run by hooks.data.batch inside the framework's environment) ----------------------


def code_end_of_turn(get_conv: Any, fmt: dict[str, Any]) -> str:
    """What the model's conversation writes right after an answer, up to whitespace (``<|im_end|>``)."""
    conv = runtime_code(fmt, None, None, get_conv)[0].conversation()
    conv.append_message(conv.roles[0], "Q")
    conv.append_message(conv.roles[1], "\x00")
    after = conv.get_prompt().split("\x00", 1)[1].split()
    return after[0] if after else ""


def _trains_answer(trained: list[int], tokenizer: Any, call: ChatCall, answer: str) -> bool:
    """Whether ``trained`` are the answer's tokens as the model's own tokenizer writes them after ``chat()``'s
    prompt: its prompt text and the answer tokenized as one text (a sentencepiece tokenizer decodes a lone
    answer with a leading space it never wrote), else, where the prompt text is unknown, the decoded text."""
    if call.prompt_text is not None:
        whole = tokenizer(call.prompt_text + answer)["input_ids"]
        if whole[:len(call.input_ids)] == call.input_ids:
            return trained == whole[len(call.input_ids):]
    return tokenizer.decode(trained) == answer


def check_code(batches: list[tuple[int, Any]], samples: list[tuple[str, list[Path], str, str]], model_dir: Path,
               spec: BatchSpec, model_class: type | None) -> dict[str, Any]:
    """Compare the dataset plugin's batches with the model's own ``chat()`` on the same image and question.

    ``samples``: (name, image files, the user's first turn as the record writes it, its answer) per batch.
    ``chat()`` takes one image and one question: that sample is compared token for token, pixel for
    pixel and flag for flag; the others must build; the text-only batch must carry stand-in tiles
    that are flagged 0 and add no tokens. ``model_class``: the model plugin's registered class, whose
    build must carry every attribute ``chat()`` sets.
    """
    import torch
    import transformers
    from PIL import Image

    from hooks.model.build import build_structure
    from hooks.model.loading import load_config_and_class

    trust = spec.trust_remote_code
    config, cls, _ = load_config_and_class(model_dir, trust_remote_code=trust)
    model, _, _ = build_structure(cls, config, model_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust)
    load_image, get_conv = data_functions(cls, model_dir, spec.sample_format.get("builder", ""))
    eot = code_end_of_turn(get_conv, spec.sample_format)
    details, names, call = [], [], None
    for (name, images, question, answer), (length, ours) in zip(samples, batches, strict=True):
        names.append(name)
        if isinstance(ours, Exception):
            return {"verdict": "mismatch", "details": [*details, f"{name}: the dataset plugin fails on it "
                                                                 f"({type(ours).__name__}: {ours})"], "samples": names}
        if not images:  # text only: stand-in tiles, flagged 0, no tokens
            flags = [ours[k] for k in spec.sample_format["tile_flags"]]
            if ours["input_ids"].shape[1] != length or "pixel_values" not in ours or any(bool(f.any()) for f in flags):
                return {"verdict": "mismatch", "details": [*details, f"{name}: the batch lacks stand-in tiles flagged "
                                                                     "0 (a rank without images would hang the others)"],
                        "samples": names}
            details.append(f"{name}: stand-in tiles added, flagged 0, no tokens")
            continue
        if len(images) != 1 or answer is None:
            details.append(f"{name}: built; not compared (the model's own chat() takes one image and one question)")
            continue
        file_image = spec.sample_format.get("image_file")  # the card's recipe: load_image('./image1.jpg')
        pixels = load_image(str(images[0]) if file_image else Image.open(images[0]).convert("RGB"))
        call = capture_chat(model, tokenizer, pixels, question)
        ids, labels = ours["input_ids"][0].tolist(), ours["labels"][0].tolist()
        prompt = call.input_ids
        if ids[:len(prompt)] != prompt:
            at = first_difference(ids, prompt)
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"{name}: input_ids differ from the model's own chat() at token {at}: the plugin writes "
                          f"{tokenizer.decode(ids[max(at - 3, 0):at + 4])!r}, chat() "
                          f"{tokenizer.decode(prompt[max(at - 3, 0):at + 4])!r}"]}
        trained = [t for t, lab in zip(ids, labels, strict=True) if lab != IGNORE_INDEX]
        if any(lab != IGNORE_INDEX for lab in labels[:len(prompt)]) or not _trains_answer(trained, tokenizer, call,
                                                                                    answer + eot):
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"{name}: trains {tokenizer.decode(trained)!r}, not the answer and its end of turn "
                          f"{answer + eot!r}"]}
        for key, value in call.inputs.items():
            if key in ("input_ids", "attention_mask") or not isinstance(value, torch.Tensor):
                continue
            difference = "missing" if key not in ours else value_difference(ours[key], value)
            if difference:
                return {"verdict": "mismatch", "samples": names,
                        "details": [*details, f"{name}: {key!r} differs from what chat() passes ({difference})"]}
        details.append(f"{name}: same ids as the model's own chat() up to the answer, the answer and {eot!r} "
                       f"trained, same {', '.join(sorted(k for k in call.inputs if k != 'input_ids'))}")
    if model_class is not None and call is not None:
        built, _, _ = build_structure(model_class, config, model_dir)
        wrong = {k: getattr(built, k, None) for k, v in call.attributes.items() if getattr(built, k, None) != v}
        if wrong:
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"the model plugin's build has {wrong}, where chat() sets {call.attributes}"]}
        details.append(f"the model plugin sets {call.attributes}, as chat() does")
    return {"verdict": "match", "details": details, "samples": names}

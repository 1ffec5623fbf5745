"""Training samples built by the model's own processor, from records of any shape (copied in by msmm-migrate).

Branch C's dataset plugin reads the user's JSON or JSONL records through a field mapping
(``FieldMap``: which key holds the images, the prompt, the response, the system prompt or a whole
conversation) and lets the model's processor build every sample, in one of eight conventions
(``SampleFormat``) read off the processor at copy time:

- ``chat``: the model's chat template renders the conversation; each answer's tokens (with the
  template's end of turn) are trained. Token positions come from the processor itself: the
  rendered text before an answer, and through its end of turn, are run through the processor with
  the images they hold, and their lengths bound the answer (checked against the whole sample's ids).
  The template may live on the tokenizer only, and a template that reads string content gets the
  processor's own image mark written into the text (Phi-3-vision: ``<|image_1|>``, numbered, and
  one string per processor call, as its model card's recipe does);
- ``template``: the processor's own chat-template call builds the sample, tokens and media alike: its
  ``__call__`` takes no clips, its ``apply_chat_template(conversation, tokenize=True, return_dict=True)``
  reads each clip from a file named by its audio item (Voxtral, as its model card calls it). Each clip is
  written as a WAV file (float32, lossless: the waveform the other conventions hand the processor) that the
  call reads; a conversation ending in an answer is taken by the processor loaded in its training mode
  (``load_mode``: mistral_common's ``ValidationMode.finetuning``), and the conversation before an answer by
  the processor as its model card loads it (``TemplateCall``). Every answer through its end of turn is
  trained, bounded by the same call on the conversation so far, as in ``chat``;
- ``suffix``: the processor takes the answer as ``suffix=`` and returns the labels (PaliGemma);
- ``prompt``: the processor builds the prompt (its own query when the record has none, as
  GOT-OCR2 does; the image where its image token stands, or placed by the processor itself, as
  Fuyu and Kosmos-2 do), the answer and the end-of-turn token follow it and are trained;
- ``code``: no processor class (InternVL-Chat-style remote code): the model's own preprocessing
  function makes each image's tiles and its own conversation object writes the text (``ModelCode``,
  from the copy of its files beside the model plugin); each image mark becomes the image text its
  ``chat()`` writes (start, one context token per feature of every tile, end), and every per-tile
  input its ``forward`` takes is 1 for each real tile. Answers are bounded as in ``chat``;
- ``context``: no processor class, images as file paths in the text (Qwen-VL-Chat): the model's own
  ``make_context`` writes the conversation as its ``chat()`` does, each query written with its images
  by the tokenizer's ``from_list_format`` (``Picture 1: <img>path</img>``); each image is saved as a
  PNG file (lossless) that the model's forward opens; every answer and its end of turn are trained;
- ``method``: no processor class, and the release writes training samples itself: a method of the
  model (Ovis2's ``preprocess_inputs(conversations, images, return_labels=True)``, the one its model
  card calls) returns the ids, the media and the labels; it runs on the model built without weights
  (``ModelMethod``), the record's turns given in the conversation form it reads. Its media reach
  ``forward`` as one entry per sample (a text-only sample gets a stand-in image's, the model masks it);
- ``recipe``: no processor class and no method that writes samples, but the model card's quick-start
  code shows the way (LLaVA's original code and the small VLMs built on it: render the chat template,
  split at ``<image>``, tokenize around it, splice a negative sentinel id, preprocess with the image
  processor a vision submodule builds, ``generate(inputs=..., images=...)``). The card's code block
  runs as published (``ModelRecipe``) on the model built without weights, the record's first user
  turn and image given in place of the card's; what reaches ``generate`` is the prompt and media.
  The answer and its end of turn follow as the tokenizer's chat template writes them after the
  generation prompt, and are trained; media reach ``forward`` as one entry per sample, as ``method``.
  A release whose processor's entry is a named method (Molmo's ``processor.process(images=, text=)``, returning
  one sample's unbatched tensors that the caller batches) and whose model generates from a batch
  (``generate_from_batch(batch, ...)``) takes the same path with that call as its recipe
  (``processor_entry``): the processor writes the prompt itself, so the answer follows as the processor writes
  text (``answer_prefix``) with the token generation stops at (EOS), and the media are stacked into one tensor,
  each sample's padded with -1, the value the model's own code reads as "no crop" / "no position".

This file imports neither MindSpeed-MM nor msmm-migrate: the dataset plugin next to it does.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IMAGE_PLACEHOLDER = "<image>"
AUDIO_PLACEHOLDER = "<audio>"
_MARKS = re.compile(f"({re.escape(IMAGE_PLACEHOLDER)}|{re.escape(AUDIO_PLACEHOLDER)})")
IGNORE = -100
USER_ROLES, ASSISTANT_ROLES = ("user", "human"), ("assistant", "gpt")


@dataclass(frozen=True)
class FieldMap:
    """Which record key holds what; ``conversations`` (a list of turns) or ``prompt``/``response``."""

    images: str = "images"
    audios: str = "audios"
    prompt: str = ""
    response: str = ""
    system: str = ""
    conversations: str = "messages"

    def turns(self, record: dict[str, Any]) -> list[tuple[str, str]]:
        """The record as (role, text) turns, roles ``system``/``user``/``assistant``."""
        turns = [("system", str(record[self.system]))] if self.system and record.get(self.system) else []
        if self.prompt and self.response:
            return [*turns, ("user", str(record[self.prompt])), ("assistant", str(record[self.response]))]
        for turn in record[self.conversations]:
            role = str(turn.get("role", turn.get("from", ""))).lower()
            text = turn.get("content", turn.get("value", ""))
            text = parts_text(text) if isinstance(text, list) else str(text)
            turns.append(("user" if role in USER_ROLES else "assistant" if role in ASSISTANT_ROLES else role, text))
        return turns

    def images_of(self, record: dict[str, Any]) -> list[str]:
        return _paths(record.get(self.images))

    def audios_of(self, record: dict[str, Any]) -> list[str]:
        return _paths(record.get(self.audios))


def parts_text(parts: list[Any]) -> str:
    """Content given as typed parts (``[{"type": "text", "text": ...}, {"type": "image"}]``, chat style) as the text
    the samples are built from: each text part's text, a placeholder where an image or audio part stands (the files
    are the record's mapped images/audios, in order). A part of another kind cannot be placed: refused."""
    marks = {"image": IMAGE_PLACEHOLDER, "audio": AUDIO_PLACEHOLDER}
    out = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            out.append(str(part.get("text", "")))
        elif kind in marks:
            out.append(marks[kind])
        else:
            raise TypeError(f"a content part of type {kind!r} (this dataset plugin reads text, image and audio parts)")
    return "".join(out)


def _paths(value: Any) -> list[Any]:
    """A media column's entries, a ``{"path": ...}`` object read as its path (other entries as given)."""
    entries = [] if not value else [value] if isinstance(value, (str, dict)) else list(value)
    return [e["path"] if isinstance(e, dict) and isinstance(e.get("path"), str) else e for e in entries]


@dataclass(frozen=True)
class SampleFormat:
    """How the processor makes a training sample (``chat``, ``suffix`` or ``prompt``) and its end of turn."""

    kind: str
    end_of_turn: str = ""  # ``prompt``: the text that closes an answer
    own_query: bool = False  # ``prompt``: the processor writes the prompt from the image alone (GOT-OCR2)
    string_roles: tuple[str, ...] = ()  # ``chat``: roles whose text-only content the template reads as a string
    image_text: tuple[str, ...] = ()  # ``code``: what replaces an image mark: start, context token, end
    per_tile: int = 0  # ``code``: context tokens per tile
    tile_flags: tuple[str, ...] = ()  # ``code``: per-tile forward inputs (1 for a real tile, 0 for the stand-in)
    image_file: bool = False  # ``code``: the image function opens a file itself (a model card's load_image)
    template_on: str = ""  # ``chat``: "tokenizer" when the chat template lives on the tokenizer only
    image_mark: str = ""  # ``chat``: the processor's own image text in string content, ``{n}`` its number from 1
    one_text: bool = False  # the processor takes one string per call, not a batch list (Phi-3-vision)
    method: str = ""  # ``method``: the model's own sample method
    turn_keys: tuple[str, ...] = ()  # ``method``: a turn's role key and text key (``from``, ``value``)
    roles: tuple[str, ...] = ()  # ``method``: its names for the system, user and assistant roles
    method_kwargs: tuple[tuple[str, Any], ...] = ()  # ``method``: the arguments that make it write labels
    per_sample: tuple[str, ...] = ()  # media ``forward`` takes as a list with one entry per sample
    media: tuple[str, ...] = ("image",)  # what the processor takes: image, audio (an omni model both)
    sampling_rate: int = 0  # audio: the rate its feature extractor expects (clips are loaded at it)
    audio_kwarg: str = ""  # audio: the keyword of the processor's __call__ for clips
    audio_keys: tuple[str, ...] = ()  # audio: the processor outputs forward takes (never laid over tokens)
    system_message: str = ""  # ``context``: the system message the model's chat() passes by default
    chat_format: str = ""  # ``context``: the chat format its generation config names (``chatml``)
    load_mode: str = ""  # ``template``: the mode its processor is loaded in for samples that end in an answer
    recipe_block: int = -1  # ``recipe``: which of the model card's Python code blocks is its quick-start
    processor_method: str = ""  # ``recipe``: the processor's own entry method (Molmo's ``process``), not a card block
    generate_method: str = ""  # ``recipe``: the model's generation entry that takes a batch (``generate_from_batch``)
    answer_prefix: str = ""  # ``recipe`` with a processor method: what the processor starts each text with (" ")
    positions: tuple[str, ...] = ()  # media holding token positions (-1: none): -1 throughout for a stand-in image
    stacked: bool = False  # ``per_sample`` media stacked into one tensor, each padded with MEDIA_PAD, not a list
    # (``module.Enum.member`` of its tokenizer's ``from_pretrained(mode=)``: mistral_common's ValidationMode.finetuning)


@dataclass(frozen=True)
class ModelCode:
    """``code`` convention: the model's own data code in place of a processor."""

    tokenizer: Any
    load_image: Any  # PIL image -> its tiles' pixel values, (tiles, 3, H, W)
    conversation: Any  # () -> a FastChat-style conversation (roles, system_message, append_message, get_prompt)


@dataclass(frozen=True)
class ModelMethod:
    """``method`` convention: the model's own sample method, bound to the model built without weights."""

    tokenizer: Any
    method: Any  # (conversation, images, **kwargs) -> (prompt, input_ids, media, labels)


@dataclass(frozen=True)
class ModelContext:
    """``context`` convention (Qwen-VL-Chat): the model's own ``make_context`` writes the prompt, its tokenizer's
    ``from_list_format`` writes images into a query as file paths, which the model's forward opens itself."""

    tokenizer: Any
    make_context: Any  # (tokenizer, query, history, system, max_window_size, chat_format) -> (text, ids)
    image_dir: Path  # where each image is written as PNG for the model to open


@dataclass(frozen=True)
class TemplateCall:
    """``template`` convention: the processor whose own chat-template call builds a sample, twice: loaded in its
    training mode (``SampleFormat.load_mode``; it writes a conversation ending in an answer and the end of turn),
    and as its model card loads it (``prompts``: a conversation ending in a user turn, the text before an answer;
    the same processor when one mode takes both). Clips are written into ``audio_dir`` for the call to read."""

    processor: Any
    prompts: Any
    audio_dir: Path

    @property
    def tokenizer(self) -> Any:
        return self.processor.tokenizer


@dataclass(frozen=True)
class ModelRecipe:
    """``recipe`` convention: the model card's quick-start code (``recipe_code``), run on the model built without
    weights (``recording_model``) with a record's user turn and image in place of the card's; what reaches its
    ``generate`` is the record's prompt and media."""

    tokenizer: Any
    model: Any
    code: Any  # the card's code block compiled with the user turn as a parameter (``recipe_code``), or the
    # user's prompt builder: (model, tokenizer, text, images) -> what the model's generate takes for that prompt


MEDIA_PAD = -1  # a padded crop's pixels and a padded position: the model's own code reads -1 as nothing there
RECIPE_USER = "_msmm_user_turn"  # the name the card's user-turn text (the literal holding <image>) is replaced by
RECIPE_PROMPT = "_msmm_prompt"  # the same, for a card that formats its prompt into an f-string around <image>
_FENCE = re.compile(r"^```(?:python|py)[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


class _Recorded(Exception):  # noqa: N818 - control flow: the card's generate call, stopped before generating
    """Raised by the recording model's ``generate``: carries what the card handed it."""


def card_blocks(card_text: str) -> list[str]:
    """The model card's fenced Python code blocks, in order."""
    return [m.group(1) for m in _FENCE.finditer(card_text)]


def recipe_code(card_text: str, block: int) -> Any:
    """The card's code block ``block`` compiled with its user turn as a parameter: the string literal that holds
    ``<image>`` becomes the name ``RECIPE_USER`` (an f-string around ``<image>`` keeps its text, its formatted
    values become ``RECIPE_PROMPT``). Everything else runs as the card wrote it."""
    import ast

    source = card_blocks(card_text)[block]
    tree = ast.parse(source)

    class Parameterize(ast.NodeTransformer):
        done = False

        def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:  # noqa: N802 - ast's visitor names
            if self.done or not any(isinstance(v, ast.Constant) and IMAGE_PLACEHOLDER in str(v.value)
                                    for v in node.values):
                return node
            self.done = True
            node.values = [ast.FormattedValue(ast.Name(RECIPE_PROMPT, ast.Load()), -1, None)
                           if isinstance(v, ast.FormattedValue) else v for v in node.values]
            return node

        def visit_Constant(self, node: ast.Constant) -> ast.AST:  # noqa: N802
            if self.done or not isinstance(node.value, str) or IMAGE_PLACEHOLDER not in node.value:
                return node
            self.done = True
            return ast.copy_location(ast.Name(RECIPE_USER, ast.Load()), node)

    tree = ast.fix_missing_locations(Parameterize().visit(tree))
    return compile(tree, f"<model card code block {block}>", "exec")


def recording_model(model_class: Any, path: str) -> Any:
    """``weightless`` whose ``generate`` records what it is handed (and stops), and whose ``device`` and ``dtype``
    are the CPU and float32: the card moves its tensors there (``.to(model.device, dtype=model.dtype)``), and a
    model on the meta device would take their values away."""
    import torch

    model = weightless(model_class, path)
    base = type(model)

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise _Recorded(args, kwargs)

    entries = {name: generate for name in dir(base) if name == "generate" or name.startswith("generate_")}
    model.__class__ = type(base.__name__, (base,), {
        "device": property(lambda self: torch.device("cpu")), "dtype": property(lambda self: torch.float32),
        **entries, "__module__": base.__module__})
    return model


def processor_entry(processor: Any, fmt: SampleFormat) -> Any:
    """The release's own inference call as a recipe: ``processor.<processor_method>(text=, images=)``, its
    unbatched tensors made a batch of one (as the caller of Molmo's ``process`` does), handed to the model's
    ``generate_method`` (recorded). ``text`` is the user turn without its image mark: the processor places images."""

    def entry(model: Any, tokenizer: Any, text: str, images: list[Any]) -> Any:
        from transformers import GenerationConfig

        prompt = text.replace(IMAGE_PLACEHOLDER, "", 1).lstrip("\n")
        out = getattr(processor, fmt.processor_method)(text=prompt, images=list(images))
        unbatched = out["input_ids"].dim() == 1  # one sample's tensors: the caller makes them a batch of one
        batch = {key: value[None] if unbatched else value for key, value in out.items()}
        if fmt.generate_method == "generate":
            return model.generate(**batch, max_new_tokens=1)
        return getattr(model, fmt.generate_method)(batch, GenerationConfig(max_new_tokens=1), tokenizer=tokenizer)

    return entry


def run_recipe(recipe: ModelRecipe, user_text: str, images: list[Any]) -> dict[str, Any]:
    """Run the card's code with ``user_text`` as its user turn and ``images`` as the files it opens; what its
    ``generate`` call was handed: ``input_ids`` (its ``inputs``), ``attention_mask`` and every tensor argument
    (the media: ``images``); generation settings (``max_new_tokens``) are dropped. Loading calls return the model
    built without weights and the folder's tokenizer; printing is silenced."""
    import contextlib
    import io

    import PIL.Image
    import transformers

    if callable(recipe.code):  # the user's prompt builder (hooks.data.builder, contract "prompt"), or the
        try:  # processor's own entry (``processor_entry``), which calls the model's recorded generate itself
            return _recorded((), dict(recipe.code(recipe.model, recipe.tokenizer, user_text, list(images))))
        except _Recorded as call:
            return _recorded(*call.args)
    opened = iter(images)
    loaders = {"AutoTokenizer": lambda *a, **k: recipe.tokenizer, "Image.open": lambda *a, **k: next(opened).copy()}
    for name in ("AutoModelForCausalLM", "AutoModel", "AutoModelForVision2Seq", "AutoModelForImageTextToText"):
        loaders[name] = lambda *a, **k: recipe.model
    saved = []
    for name, loader in loaders.items():
        owner, attr = (PIL.Image, "open") if name == "Image.open" else (getattr(transformers, name, None),
                                                                         "from_pretrained")
        if owner is not None:
            saved.append((owner, attr, vars(owner).get(attr, None)))
            setattr(owner, attr, loader)
    prompt = user_text.replace(IMAGE_PLACEHOLDER, "", 1).lstrip("\n")
    scope = {"__name__": "__model_card__", RECIPE_USER: user_text, RECIPE_PROMPT: prompt}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(recipe.code, scope)  # noqa: S102 - the card's code, under the consent given to the release's code
    except _Recorded as call:
        args, kwargs = call.args
    else:
        raise ValueError("the model card's code block never called generate")
    finally:
        for owner, attr, before in saved:
            if before is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, before)
    return _recorded(args, kwargs)


def _recorded(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A generate call's arguments as a sample's prompt: ids (``inputs``, ``input_ids`` or the first positional
    argument), the attention mask (ones when absent) and every tensor argument (the media)."""
    import torch

    if args and isinstance(args[0], dict):  # a batch (``generate_from_batch(batch, ...)``): its entries
        args, kwargs = (), {**args[0], **kwargs}
    ids = kwargs.pop("inputs", None)
    ids = kwargs.pop("input_ids", None) if ids is None else ids
    ids = args[0] if ids is None and args else ids
    out = {"input_ids": ids.reshape(1, -1), "attention_mask": kwargs.pop("attention_mask", None)}
    if out["attention_mask"] is None:
        out["attention_mask"] = torch.ones_like(out["input_ids"])
    out.update({k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)})
    return out


def recipe_turns(tokenizer: Any, fmt: SampleFormat, turns: list[tuple[str, str]]) -> list[tuple[str, bool]]:
    """After the card's prompt: each answer with its end of turn (trained), each later user turn (not), as the
    tokenizer's chat template writes them (without a template: the answer and ``fmt.end_of_turn``)."""
    pieces, messages = [], []
    for index, (role, text) in enumerate(turns):
        messages.append({"role": role, "content": text})
        if role != "assistant":
            continue
        if fmt.processor_method or not getattr(tokenizer, "chat_template", None):
            if index != 1:
                raise ValueError(f"the {_recipe_name(fmt)} writes one prompt: one prompt and one answer per sample")
            pieces.append((fmt.answer_prefix + text + fmt.end_of_turn, True))
            continue
        asked = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
        said = tokenizer.apply_chat_template(messages, tokenize=False)
        before = (tokenizer.apply_chat_template(messages[:-2], tokenize=False) if index > 1 else asked)
        if not said.startswith(asked) or not asked.startswith(before):
            raise ValueError("the chat template writes an earlier turn differently once an answer follows it")
        if index > 1:
            pieces.append((asked[len(before):], False))
        pieces.append((said[len(asked):], True))
    return pieces


def _recipe_name(fmt: SampleFormat) -> str:
    """How a refusal names the recipe (the plugin's refusals are recognised by it)."""
    return (f"model's own processor.{fmt.processor_method}() recipe" if fmt.processor_method else
            "model card's recipe")


def _image_tokens_dropped(ids: Any, tokenizer: Any, text: str) -> Any:
    """A stand-in image's prompt without the image: its placeholder ids (negative, LLaVA's sentinel) and, for a
    processor that writes the image as tokens itself, the tokenizer's added tokens the text does not hold (Molmo's
    ``<im_start>``, ``<im_patch>``, ``<im_col>``, ``<im_end>``; BOS/EOS stay)."""
    import torch

    keep = {tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id}
    held = set(tokenizer(text, add_special_tokens=False)["input_ids"])
    image = {i for i in getattr(tokenizer, "added_tokens_decoder", {}) if i not in keep and i not in held}
    return ids[0][torch.tensor([t >= 0 and t not in image for t in ids[0].tolist()])].reshape(1, -1)


def _recipe_sample(recipe: ModelRecipe, fmt: SampleFormat, turns: list[tuple[str, str]],
                   images: list[Any]) -> dict[str, Any]:
    """The card's recipe on the first user turn and its image (a text-only sample: with a stand-in image whose
    sentinel and media are then dropped), then the answers as ``recipe_turns`` writes them."""
    import torch
    from PIL import Image

    name = _recipe_name(fmt)
    if any(role == "system" for role, _ in turns):
        raise ValueError(f"the {name} writes its own system prompt: a record's system prompt has no place in it")
    if len(images) > 1 or any(IMAGE_PLACEHOLDER in text for _, text in turns[1:]):
        raise ValueError(f"the {name} takes one image, in the first user turn")
    if [role for role, _ in turns[:2]] != ["user", "assistant"]:
        raise ValueError(f"the {name} needs a user turn and its answer first")
    user = turns[0][1]
    if IMAGE_PLACEHOLDER not in user:  # where the card puts it; a stand-in's mark alone (its ids are dropped)
        user = IMAGE_PLACEHOLDER + ("\n" if images else "") + user
    stand_in = [Image.new("RGB", (64, 64), "white")]
    out = run_recipe(recipe, user, images or stand_in)
    ids = out.pop("input_ids")
    if not images:  # the text around the stand-in image, tokenized as the recipe tokenizes it
        ids = (_image_tokens_dropped(ids, recipe.tokenizer, user) if fmt.processor_method else
               ids[ids >= 0].reshape(1, -1))
        out = {}
    else:
        out.pop("attention_mask")
    parts = [(ids, False)]
    for text, trained in recipe_turns(recipe.tokenizer, fmt, turns):
        parts.append((recipe.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"], trained))
    full = torch.cat([part for part, _ in parts], dim=1)
    labels = torch.cat([part if trained else torch.full_like(part, IGNORE) for part, trained in parts], dim=1)
    sample = {"input_ids": full, "attention_mask": torch.ones_like(full), "labels": labels}
    if images:
        sample.update(out)
    return sample


def audio_file(wave: Any, rate: int, folder: Path) -> str:
    """``wave`` (float32 at ``rate``) as a float WAV file in ``folder`` named by its content: lossless, so the
    template call reads back the very samples the clip was loaded as."""
    import io

    import soundfile

    encoded = io.BytesIO()
    soundfile.write(encoded, wave, rate, format="WAV", subtype="FLOAT")
    return _content_file(encoded.getvalue(), folder, ".wav")


def _content_file(data: bytes, folder: Path, suffix: str) -> str:
    """``data`` written once into ``folder`` under a name made of its hash (atomically: ranks share the folder)."""
    import hashlib

    path = Path(folder) / f"{hashlib.sha256(data).hexdigest()[:32]}{suffix}"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(path)
    return str(path.resolve())


def training_mode(load_mode: str) -> Any:
    """``SampleFormat.load_mode`` (``module.Enum.member``) as the value the processor's ``from_pretrained(mode=)``
    takes."""
    import importlib

    module, enum, member = load_mode.rsplit(".", 2)
    return getattr(getattr(importlib.import_module(module), enum), member)


def image_file(image: Any, folder: Path) -> str:
    """``image`` as a PNG file in ``folder`` named by its content (lossless: the model opens the same pixels)."""
    import io

    encoded = io.BytesIO()
    image.save(encoded, format="PNG")
    return _content_file(encoded.getvalue(), folder, ".png")


def weightless(model_class: Any, path: str) -> Any:
    """``model_class`` built from the folder's config on the meta device: its tokenizers and image processor
    (loaded in ``__init__``) are real, its weights absent. The data path never runs attention, so a flash
    attention the config asks for (and its import check) is not requested here."""
    import torch

    config = model_class.config_class.from_pretrained(path)
    config._name_or_path = str(path)  # where ``__init__`` loads the tokenizers from (as ``from_pretrained`` sets it)
    for key in ("llm_attn_implementation", "attn_implementation"):
        if getattr(config, key, None) == "flash_attention_2":
            setattr(config, key, None)
    with torch.device("meta"):
        return model_class(config)


def code_tiles(code: ModelCode, fmt: SampleFormat, image: Any) -> Any:
    """An image's tiles from the model's own image function; one that opens a file itself is given the image
    as PNG bytes (lossless: the same RGB pixels it would read from the record's file)."""
    if not fmt.image_file:
        return code.load_image(image)
    import io

    encoded = io.BytesIO()
    image.save(encoded, format="PNG")
    encoded.seek(0)
    return code.load_image(encoded)


def read_records(path: Path) -> list[dict[str, Any]]:
    """A JSON list, or JSONL (one object per line)."""
    text = Path(path).read_text(encoding="utf-8").strip()
    if text.startswith("["):
        return list(json.loads(text))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_audios(paths: list[str], root: Path, rate: int) -> list[Any]:
    """Each clip as MindSpeed-MM's mm_plugin reads it: librosa, resampled to the feature extractor's rate."""
    import librosa

    if paths and not rate:
        raise ValueError(f"the record names audio files ({', '.join(map(str, paths[:3]))}) but this data path takes "
                         "no audio: the model would train on the placeholder's text")
    return [librosa.load(str(Path(root) / path), sr=rate)[0] for path in paths]


def audio_item() -> dict[str, Any]:
    """A typed audio item as chat templates test for it (``item.type == 'audio'`` or ``'audio' in item``)."""
    return {"type": "audio", "audio": ""}


def load_images(paths: list[str], root: Path) -> list[Any]:
    from PIL import Image

    images = []
    for path in paths:
        with Image.open(Path(root) / path) as image:
            images.append(image.convert("RGB"))
    return images


def build_sample(processor: Any, fmt: SampleFormat, turns: list[tuple[str, str]], images: list[Any],
                 cutoff: int, audios: list[Any] = ()) -> dict[str, Any]:
    """One sample: ``input_ids``, ``attention_mask``, ``labels`` and the processor's media outputs.

    A record with audio (clips, or ``<audio>`` in its text) for a data path that takes none is refused, naming
    it: its placeholder would be trained as text and its sound never heard."""
    if (audios or any(AUDIO_PLACEHOLDER in text for _, text in turns)) and "audio" not in fmt.media:
        raise ValueError(f"the record has audio ({len(audios)} clip(s), {AUDIO_PLACEHOLDER!r} in its text) but this "
                         "data path takes none: the model would train on the placeholder's text")
    if "image" not in fmt.media and (images or any(IMAGE_PLACEHOLDER in text for _, text in turns)):
        raise ValueError(f"the record has images ({len(images)}, {IMAGE_PLACEHOLDER!r} in its text) but this model's "
                         "processor takes none")
    if fmt.kind == "chat":
        sample = _chat_sample(processor, turns, images, fmt, list(audios))
    elif fmt.kind == "template":
        sample = _template_sample(processor, fmt, turns, list(audios))
    elif fmt.kind == "suffix":
        sample = _suffix_sample(processor, turns, images)
    elif fmt.kind == "code":
        sample = _code_sample(processor, fmt, turns, images)
    elif fmt.kind == "method":
        sample = _method_sample(processor, fmt, turns, images)
    elif fmt.kind == "context":
        sample = _context_sample(processor, fmt, turns, images)
    elif fmt.kind == "recipe":
        sample = _recipe_sample(processor, fmt, turns, images)
    else:
        sample = _prompt_sample(processor, fmt, turns, images)
    length = sample["input_ids"].shape[-1]
    if length > cutoff:
        raise ValueError(f"sample of {length} tokens exceeds cutoff_len {cutoff}; raise basic_parameters.cutoff_len")
    if not (sample["labels"] != IGNORE).any():
        raise ValueError("sample without a trained token: its answer is empty")
    return sample


def _messages(turns: list[tuple[str, str]], images_left: list[int], audios_left: int = 0) -> list[dict[str, Any]]:
    """Chat-template messages with typed items: ``<image>``/``<audio>`` marks (or, without any of a kind, the
    first user turn, audio before images) carry the media."""
    marks = {IMAGE_PLACEHOLDER: {"type": "image"}, AUDIO_PLACEHOLDER: audio_item()}
    unmarked = [(audio_item(), audios_left)] if not any(AUDIO_PLACEHOLDER in t for _, t in turns) else []
    if not any(IMAGE_PLACEHOLDER in text for _, text in turns):
        unmarked.append(({"type": "image"}, images_left[0]))
    messages = []
    for role, text in turns:
        items: list[dict[str, Any]] = []
        if role == "user" and unmarked:
            items += [dict(item) for item, count in unmarked for _ in range(count)]
            unmarked = []
        for piece in _MARKS.split(text):
            if piece in marks:
                items.append(dict(marks[piece]))
            elif piece:
                items.append({"type": "text", "text": piece})
        messages.append({"role": role, "content": items})
    return messages


def as_template_reads(messages: list[dict[str, Any]], string_roles: tuple[str, ...] | list[str] = (),
                      image_mark: str = "") -> list[dict[str, Any]]:
    """Typed messages in the form the chat template reads: a text-only turn of a role it reads as a string
    (GLM-4.1V's assistant) as a string; with ``image_mark`` every content a string, each image written as the
    processor's own mark (numbered from 1 in order), followed by the newline the model card writes after it
    (``<|image_1|>\\n``) unless whitespace follows anyway."""
    numbered, out = 0, []
    for message in messages:
        items = message["content"]
        if image_mark:
            parts = []
            for index, item in enumerate(items):
                if item["type"] == "image":
                    numbered += 1
                    follows = items[index + 1] if index + 1 < len(items) else {"type": "text", "text": ""}
                    spaced = follows["type"] == "text" and follows["text"][:1].isspace()
                    parts.append(image_mark.format(n=numbered) + ("" if spaced else "\n"))
                else:
                    parts.append(item["text"])
            out.append({"role": message["role"], "content": "".join(parts)})
            continue
        text_only = all(item["type"] == "text" for item in items)
        content = "".join(item["text"] for item in items) if message["role"] in string_roles and text_only else items
        out.append({"role": message["role"], "content": content})
    return out


def template_owner(processor: Any, fmt: SampleFormat) -> Any:
    """What renders the chat template: the processor, or its tokenizer when only that one has it."""
    return processor.tokenizer if fmt.template_on == "tokenizer" else processor


def call(processor: Any, text: str, images: list[Any], one_text: bool = False, audios: list[Any] = (),
         audio_kwarg: str = "audio", sampling_rate: int = 0) -> Any:
    """The processor on one rendered text and its media: as a batch of one (no added special tokens when the
    text starts with the BOS), or, for a processor that takes one string, as its model card calls it. Clips go
    by the processor's own keyword with their rate, only when there are some (an image-only processor never
    sees either)."""
    clips = {audio_kwarg: list(audios), **({"sampling_rate": sampling_rate} if sampling_rate else {})} if audios else {}
    if one_text:
        return processor(text, images or None, return_tensors="pt", **clips)
    bos = getattr(processor.tokenizer, "bos_token", None)
    pictures = {"images": [images]} if images else {}
    return processor(text=[text], return_tensors="pt", add_special_tokens=not (bos and text.startswith(bos)),
                     **pictures, **clips)


def _chat_sample(processor: Any, turns: list[tuple[str, str]], images: list[Any], fmt: SampleFormat,
                 audios: list[Any] = ()) -> dict[str, Any]:
    """The processor's sample for the chat template's rendering; each answer (from where its text starts,
    so a block the template writes before past answers, GLM-4.5V's ``<think></think>``, stays untrained)
    through the template's end of turn is trained."""
    typed = _messages(turns, [len(images)], len(audios))
    messages = as_template_reads(typed, fmt.string_roles, fmt.image_mark)
    owner = template_owner(processor, fmt)

    def held(kind: str, upto: int) -> int:
        return sum(item["type"] == kind for m in typed[:upto] for item in m["content"])

    def run(text: str, upto: int) -> Any:
        return call(processor, text, images[:held("image", upto)], fmt.one_text, audios[:held("audio", upto)],
                    fmt.audio_kwarg, fmt.sampling_rate)

    out = run(owner.apply_chat_template(messages, tokenize=False), len(typed))
    ids = out["input_ids"][0]
    labels = ids.new_full(ids.shape, IGNORE)
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        through = owner.apply_chat_template(messages[:index + 1], tokenize=False)
        answer = turns[index][1].strip()
        at = through.rfind(answer) if answer else -1
        prompt = (through[:at] if at >= 0 else
                  owner.apply_chat_template(messages[:index], tokenize=False, add_generation_prompt=True))
        start, end = (_boundary(ids, run(text, index)["input_ids"][0], index) for text in (prompt, through))
        labels[start:end] = ids[start:end]
    return {**dict(out.items()), "labels": labels.unsqueeze(0)}


def _template_sample(call: TemplateCall, fmt: SampleFormat, turns: list[tuple[str, str]],
                     audios: list[Any]) -> dict[str, Any]:
    """The processor's own chat-template call on the conversation, each clip an audio item naming its WAV file
    (where ``<audio>`` marks it, else first in the first user turn); each answer through its end of turn is
    trained, bounded by the call on the conversation before it (``call.prompts``) and through it."""
    typed = _messages(turns, [0], len(audios))
    marked = sum(item["type"] == "audio" for m in typed for item in m["content"])
    if marked != len(audios):
        raise ValueError(f"the record marks {marked} clip(s) with {AUDIO_PLACEHOLDER!r} but names {len(audios)} "
                         "audio file(s)")
    files = iter([audio_file(clip, fmt.sampling_rate, call.audio_dir) for clip in audios])
    typed = [{"role": m["role"], "content": [{"type": "audio", "path": next(files)} if item["type"] == "audio" else
                                             item for item in m["content"]]} for m in typed]

    def run(processor: Any, upto: int) -> Any:  # the call rewrites the messages it reads: each call gets its own
        conversation = [{"role": m["role"], "content": [dict(item) for item in m["content"]]} for m in typed[:upto]]
        return processor.apply_chat_template(conversation, tokenize=True, return_dict=True)

    out = run(call.processor, len(typed))
    ids = out["input_ids"][0]
    labels = ids.new_full(ids.shape, IGNORE)
    for index, message in enumerate(typed):
        if message["role"] == "assistant":
            start = _boundary(ids, run(call.prompts, index)["input_ids"][0], index)
            end = _boundary(ids, run(call.processor, index + 1)["input_ids"][0], index)
            labels[start:end] = ids[start:end]
    return {**dict(out.items()), "labels": labels.unsqueeze(0)}


def _boundary(ids: Any, part: Any, turn: int) -> int:
    """Where ``part`` (the conversation so far) ends in the sample's ``ids``.

    Where the tokenizer merges text across the boundary (LLaVA's answer ends in a space that
    joins the next ``USER``), the merged token goes to the turn its last character belongs to:
    the boundary is the common prefix, one token short of ``part``.
    """
    common = 0
    for a, b in zip(ids.tolist(), part.tolist(), strict=False):
        if a != b:
            break
        common += 1
    if common < len(part) - 1:
        raise ValueError(f"turn {turn}: the processor's ids for the conversation so far differ from the whole "
                         f"sample's at token {common}, not only across the turn boundary")
    return common


def _single_turn(turns: list[tuple[str, str]]) -> tuple[str, str]:
    talk = [(role, text) for role, text in turns if role != "system"]
    if [role for role, _ in talk] != ["user", "assistant"]:
        raise ValueError("this model's processor takes one prompt and one answer per sample (no chat template)")
    return talk[0][1].replace(IMAGE_PLACEHOLDER, ""), talk[1][1]


def _suffix_sample(processor: Any, turns: list[tuple[str, str]], images: list[Any]) -> dict[str, Any]:
    prompt, answer = _single_turn(turns)
    return dict(processor(text=[prompt], images=[images] if images else None, suffix=[answer], return_tensors="pt"))


def _prompt_sample(processor: Any, fmt: SampleFormat, turns: list[tuple[str, str]],
                   images: list[Any]) -> dict[str, Any]:
    import torch

    prompt, answer = _single_turn(turns)
    if fmt.own_query:  # the processor's own query (GOT-OCR2 builds it from the image alone)
        out = processor(images=images, return_tensors="pt")
    else:  # the processor's image token per image; without one, it places the image itself (Fuyu, Kosmos-2)
        items = (getattr(processor, "image_token", None) or "") * len(images)
        out = processor(text=[items + prompt], images=images or None, return_tensors="pt")
    answer_ids = processor.tokenizer(answer + fmt.end_of_turn, add_special_tokens=False, return_tensors="pt")
    added = answer_ids["input_ids"].shape[1]
    sample = {}
    for key, value in out.items():  # token types and the like: the answer is text (0)
        value, fill = _prompt_part(value, out["input_ids"])
        sample[key] = torch.nn.functional.pad(value, (0, added), value=fill) if _per_token(
            value, out["input_ids"]) else value
    sample["input_ids"] = torch.cat([out["input_ids"], answer_ids["input_ids"]], dim=1)
    sample["attention_mask"] = torch.ones_like(sample["input_ids"])
    sample["labels"] = torch.cat([torch.full_like(out["input_ids"], IGNORE), answer_ids["input_ids"]], dim=1)
    return sample


def _images_first(turns: list[tuple[str, str]], count: int, mark: str) -> list[tuple[str, str]]:
    """Turns whose text marks no image get ``count`` marks at the start of the first user turn, as the models'
    own ``chat()`` and model cards put unmarked images (``mark``: the mark and what follows it)."""
    if not count or any(IMAGE_PLACEHOLDER in text for _, text in turns):
        return turns
    first = next(i for i, (role, _) in enumerate(turns) if role == "user")
    return [*turns[:first], ("user", mark * count + turns[first][1]), *turns[first + 1:]]


def _code_sample(code: ModelCode, fmt: SampleFormat, turns: list[tuple[str, str]],
                 images: list[Any]) -> dict[str, Any]:
    """The model's conversation over the turns, each image mark replaced by its tiles' image text (unmarked
    images go first in the first user turn, one mark and a newline each, as its ``chat()`` puts them)."""
    import torch

    pixels = [code_tiles(code, fmt, image) for image in images]
    start, context, end = fmt.image_text
    image_texts = [start + context * (fmt.per_tile * tiles.shape[0]) + end for tiles in pixels]
    turns = _images_first(turns, len(images), IMAGE_PLACEHOLDER + "\n")

    def tokens(upto: int, open_answer: bool = False, through: bool = False) -> Any:
        conv = code.conversation()
        for role, text in turns[:upto]:
            if role == "system":
                conv.system_message = text
            else:
                conv.append_message(conv.roles[role == "assistant"], text)
        if open_answer:
            conv.append_message(conv.roles[1], None)
        pieces = conv.get_prompt().split(IMAGE_PLACEHOLDER)
        text = pieces[0] + "".join(image_texts[i] + piece for i, piece in enumerate(pieces[1:]))
        return code.tokenizer(text.rstrip() if through else text, return_tensors="pt")["input_ids"][0]

    ids = tokens(len(turns))
    labels = ids.new_full(ids.shape, IGNORE)
    for index, (role, _) in enumerate(turns):
        if role == "assistant":  # through its end of turn (the separator's trailing whitespace stays untrained)
            begin = _boundary(ids, tokens(index, open_answer=True), index)
            end = _boundary(ids, tokens(index + 1, through=True), index)
            labels[begin:end] = ids[begin:end]
    sample = {"input_ids": ids[None], "attention_mask": torch.ones_like(ids)[None], "labels": labels[None]}
    if pixels:
        sample["pixel_values"] = torch.cat(pixels)
        tiles = sample["pixel_values"].shape[0]
        sample.update({name: torch.ones(tiles, 1, dtype=torch.long) for name in fmt.tile_flags})
    return sample


def _method_sample(code: ModelMethod, fmt: SampleFormat, turns: list[tuple[str, str]],
                   images: list[Any]) -> dict[str, Any]:
    """The model's own method on the turns in its conversation form (unmarked images first in the first user
    turn, one mark and a newline each, as its model card writes a query); its labels as it writes them."""
    import torch

    turns = _images_first(turns, len(images), IMAGE_PLACEHOLDER + "\n")
    role_key, text_key = fmt.turn_keys
    names = dict(zip(("system", "user", "assistant"), fmt.roles, strict=True))
    conversation = [{role_key: names[role], text_key: text} for role, text in turns]
    _, ids, media, labels = code.method(conversation, images or None, **dict(fmt.method_kwargs))
    sample = {"input_ids": ids.reshape(1, -1), "attention_mask": torch.ones_like(ids).reshape(1, -1),
              "labels": labels.reshape(1, -1)}
    if media is not None:
        sample[fmt.per_sample[0]] = media
    return sample


def _context_sample(code: ModelContext, fmt: SampleFormat, turns: list[tuple[str, str]],
                    images: list[Any]) -> dict[str, Any]:
    """``make_context`` over the turns as the model's ``chat()`` calls it (each query written with images by the
    tokenizer's ``from_list_format``, unmarked images first in the first query), then the last answer and the end
    of turn; every answer and its end of turn trained, each checked against the next turn's context."""
    import torch

    turns = _images_first(turns, len(images), IMAGE_PLACEHOLDER)
    files = iter([image_file(image, code.image_dir) for image in images])
    system = turns[0][1] if turns and turns[0][0] == "system" else fmt.system_message
    pairs: list[tuple[str, str]] = []
    for role, text in turns:
        if role == "user":
            pieces = text.split(IMAGE_PLACEHOLDER)
            items = [{"text": pieces[0]}] if pieces[0] else []
            for piece in pieces[1:]:
                items += [{"image": next(files)}, *([{"text": piece}] if piece else [])]
            pairs.append((code.tokenizer.from_list_format(items), ""))
        elif role == "assistant":
            pairs[-1] = (pairs[-1][0], text)

    def context(index: int) -> list[int]:
        return list(code.make_context(code.tokenizer, pairs[index][0], history=pairs[:index], system=system,
                                      max_window_size=1 << 30, chat_format=fmt.chat_format)[1])

    closing = code.tokenizer.encode(fmt.end_of_turn)
    ids = context(len(pairs) - 1) + code.tokenizer.encode(pairs[-1][1]) + closing
    labels = [IGNORE] * len(ids)
    for index, (_, answer) in enumerate(pairs):
        start = len(context(index))
        end = start + len(code.tokenizer.encode(answer)) + len(closing)
        if ids[start:end] != (code.tokenizer.encode(answer) + closing):
            raise ValueError(f"answer {index + 1} is not written where make_context() puts it")
        labels[start:end] = ids[start:end]
    sample = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
              "labels": torch.tensor([labels])}
    if images:  # not a forward input: tells collate_fn that this batch runs the vision tower already
        sample["image_files"] = torch.tensor([len(images)])
    return sample


def _prompt_part(value: Any, ids: Any) -> tuple[Any, int]:
    """An integer output laid over the prompt and the tokens the processor leaves room to generate (Fuyu's
    ``image_patches_indices``) cut to the prompt, with the processor's fill for that room; else as is, 0."""
    if (getattr(value, "dim", lambda: 0)() == 2 and not value.is_floating_point() and value.shape[0] == ids.shape[0]
            and value.shape[1] > ids.shape[1]):
        return value[:, :ids.shape[1]], int(value[0, -1])
    return value, 0


def _per_token(value: Any, ids: Any) -> bool:
    """Laid over the sample's tokens ([1, length, ...]: token types, Mllama's cross-attention mask)."""
    return getattr(value, "dim", lambda: 0)() >= 2 and tuple(value.shape[:2]) == tuple(ids.shape)


def stand_ins(processor: Any, fmt: SampleFormat) -> dict[str, dict[str, Any]]:
    """Each medium the processor takes, with its stand-in sample (``stand_in``)."""
    return {medium: stand_in(processor, fmt, medium) for medium in fmt.media}


def stand_in(processor: Any, fmt: SampleFormat, medium: str = "image") -> dict[str, Any]:
    """A 64x64 white image's sample (``audio``: 0.1 s of silence's, MindSpeed-MM's 1600 zero samples) with
    nothing attended or trained: added to a batch without that medium, so that every rank runs every tower
    each step (as MindSpeed-MM's collator does)."""
    import torch
    from PIL import Image

    if medium == "audio":
        import numpy as np

        turns, silence = [("user", AUDIO_PLACEHOLDER + " "), ("assistant", " ")], [np.zeros(1600, dtype=np.float32)]
        sample = (_template_sample(processor, fmt, turns, silence) if fmt.kind == "template" else
                  _chat_sample(processor, turns, [], fmt, silence))
        sample["attention_mask"] = torch.zeros_like(sample["attention_mask"])
        sample["labels"] = torch.full_like(sample["input_ids"], IGNORE)
        return sample
    turns = [("user", IMAGE_PLACEHOLDER + " "), ("assistant", " ")]
    white = [Image.new("RGB", (64, 64), "white")]
    if fmt.kind in ("method", "recipe"):  # a white image's media and no tokens: the model adds its features x 0
        white_sample = (_method_sample(processor, fmt, turns, white) if fmt.kind == "method" else
                        _recipe_sample(processor, fmt, [("user", IMAGE_PLACEHOLDER), ("assistant", " ")], white))
        return {key: white_sample[key].fill_(MEDIA_PAD) if key in fmt.positions else white_sample[key]
                for key in fmt.per_sample}  # placed nowhere: a position medium is -1 throughout
    if fmt.kind == "code":  # tiles whose flags are 0 and no tokens: the model drops their features itself
        empty = torch.zeros(1, 0, dtype=torch.long)
        tiles = code_tiles(processor, fmt, white[0])
        return {"input_ids": empty, "attention_mask": empty, "labels": empty, "pixel_values": tiles,
                **{name: torch.zeros(tiles.shape[0], 1, dtype=torch.long) for name in fmt.tile_flags}}
    sample = (_chat_sample(processor, turns, white, fmt) if fmt.kind == "chat" else
              _context_sample(processor, fmt, turns, white) if fmt.kind == "context" else
              _suffix_sample(processor, turns, white) if fmt.kind == "suffix" else
              _prompt_sample(processor, fmt, turns, white))
    sample["attention_mask"] = torch.zeros_like(sample["attention_mask"])
    sample["labels"] = torch.full_like(sample["input_ids"], IGNORE)
    sample.pop("image_files", None)
    return sample


def collate(samples: list[dict[str, Any]], pad_id: int, keys: frozenset[str],
            stand_in_samples: dict[str, dict[str, Any]] | None = None,
            audio_keys: frozenset[str] = frozenset(), stacked: bool = False) -> dict[str, Any]:
    """Right-pad the per-token tensors ([1, length]); concatenate media tensors along their first dim.

    ``keys``: what the model's forward takes; other processor outputs are dropped. A batch without a
    medium gets that medium's stand-in (``stand_ins``) appended to its first sample (masked, untrained); an
    image stand-in without tokens (``method``) names media passed as a list with one entry per sample instead.
    ``audio_keys`` (a clip's features, [clips, mel bins, frames]) are media whatever their shape: never laid
    over the tokens, as a sample with as many tokens as mel bins would otherwise have them. ``stacked``: those
    per-sample media are one tensor instead, each sample's ([1, crops, ...]) padded to the most crops with
    ``MEDIA_PAD`` (Molmo's ``generate_from_batch`` batch).
    """
    import torch

    stand_in_samples = stand_in_samples or {}
    image = stand_in_samples.get("image")
    if image is not None and "input_ids" not in image:  # ``method``: media without tokens
        media = {key: [s.get(key, value) for s in samples] for key, value in image.items()}
        samples = [{k: v for k, v in s.items() if k not in media} for s in samples]  # one entry per sample, a
        if stacked:  # text-only sample's the stand-in's
            media = {key: _stack(values) for key, values in media.items()}
        return {**collate(samples, pad_id, keys), **media}
    has = {"audio": any(k in audio_keys for s in samples for k in s),
           "image": not all(_per_token(v, s["input_ids"]) for s in samples for k, v in s.items()
                            if k not in audio_keys)}
    for medium, extra in stand_in_samples.items():
        if not has[medium]:
            samples = [_append(samples[0], extra, audio_keys), *samples[1:]]
    longest = max(s["input_ids"].shape[-1] for s in samples)
    batch: dict[str, Any] = {}
    for key in sorted({key for s in samples for key in s if key in keys or key == "labels"}):
        if key not in audio_keys and any(_per_token(s.get(key), s["input_ids"]) for s in samples):
            fill = pad_id if key == "input_ids" else IGNORE if key == "labels" else 0
            like = next(s[key] for s in samples if key in s)
            values = [s[key] if key in s else _token_zeros(s["input_ids"], like) for s in samples]
            batch[key] = torch.cat([torch.nn.functional.pad(v, (0, 0) * (v.dim() - 2) + (0, longest - v.shape[1]),
                                                            value=fill) for v in values])
        else:  # media: the samples' own, in order (a text-only sample has none); of differing shapes (Fuyu's
            media = [s[key] for s in samples if key in s]  # patches per image), a list, as the processor batches them
            same = len({tuple(m.shape[1:]) for m in media}) == 1
            batch[key] = torch.cat(media) if same else media
    return batch


def _stack(values: list[Any]) -> Any:
    """Per-sample media ([1, n, ...]) as one tensor [samples, most n, ...], the shorter padded with ``MEDIA_PAD``."""
    import torch

    most = max(v.shape[1] for v in values)
    return torch.cat([torch.nn.functional.pad(v, (0, 0) * (v.dim() - 2) + (0, most - v.shape[1]), value=MEDIA_PAD)
                      for v in values])


def _token_zeros(ids: Any, like: Any) -> Any:
    """Zeros laid over ``ids`` with ``like``'s trailing dims and dtype (a text-only sample's Mllama
    ``cross_attention_mask`` is [1, length, images, tiles] of zeros, not [1, length])."""
    import torch

    return torch.zeros((*ids.shape, *like.shape[2:]), dtype=like.dtype)


def _append(sample: dict[str, Any], extra: dict[str, Any], audio_keys: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``extra``'s tokens after ``sample``'s, its media as the sample's."""
    import torch

    out = dict(sample)
    ids, extra_ids = sample["input_ids"], extra["input_ids"]
    for key in {*sample, *extra}:
        mine, theirs = sample.get(key), extra.get(key)
        if key not in audio_keys and (_per_token(theirs, extra_ids) or _per_token(mine, ids)):
            mine = mine if mine is not None else _token_zeros(ids, theirs)
            theirs = theirs if theirs is not None else _token_zeros(extra_ids, mine)
            out[key] = torch.cat([mine, theirs.to(mine.dtype)], dim=1)
        elif theirs is not None:
            out[key] = theirs
    return out

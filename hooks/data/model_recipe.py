"""Branch c for a release whose model card shows the way: the card's quick-start code, executed, is the recipe.

LLaVA's original code, and the many small VLMs built on it (FastVLM, Bunny, nanoLLaVA, MobileVLM, ...),
ship no processor class, no ``chat()`` and no method that writes samples. Their model card's quick-start
renders the chat template, splits it at a literal ``<image>``, tokenizes the text around it, splices a
negative sentinel id (-200) where the image goes, preprocesses the image with the image processor a
vision submodule builds (``model.get_vision_tower().image_processor``) and calls
``generate(inputs=..., images=...)``. Rather than re-deriving that per family, this module runs the card's
own code block (the same consent as the release's code) on the model built without weights, with the
image and the user turn as parameters, and records what reaches ``generate``
(``partials/processor_dataset.py``: ``recipe_code``, ``recording_model``, ``run_recipe``):

- ``recipe_facts``: the first card code block that calls ``generate`` and holds ``<image>``, run on one image
  and a question: taken when what reaches ``generate`` carries media that ``forward`` takes and a placeholder
  the vocabulary does not hold (a negative or out-of-vocabulary id: ``sentinels``); the answer's end of turn is
  what the tokenizer's chat template writes after an answer;
- ``check_recipe``: data parity: the dataset plugin's ids up to the answer must be what the card hands
  ``generate``, token for token, its media the card's, its trained tokens the answer and the end of turn.

A release with a processor class whose entry is a named method, not ``__call__`` (Molmo's
``processor.process(images=, text=)``, one sample's unbatched tensors), and whose model generates from a batch
(``generate_from_batch(batch, GenerationConfig, tokenizer=)``) is the same convention with that call as its
recipe (``entry_method``, ``generate_entry``; ``processor_entry`` in the runtime): its own inference call, run on
one image and a question, records what reaches ``generate_from_batch``. Its image tokens are vocabulary tokens
placed by position media (``image_input_idx``), so no sentinel is asked for; the answer follows as the
processor writes text (``answer_prefix``) with the token generation stops at (EOS), and the media are stacked.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from hooks.data import IGNORE_INDEX, first_difference, per_sample_problem, value_difference
from hooks.data.batch_spec import BatchSpec
from hooks.data.model_card import CARD

PROBE_TURN, PROBE_ANSWER = "<image>\nDescribe it.", "Yes."


def recipe_blocks(card_text: str) -> list[int]:
    """Indexes of the card's Python blocks that could be its quick-start: they call ``generate`` and hold
    ``<image>`` (the user turn they ask about an image)."""
    from hooks.data.records import dataset_runtime

    return [i for i, block in enumerate(dataset_runtime().card_blocks(card_text))
            if ".generate(" in block and "<image>" in block]


def sentinels(ids: list[int], vocab_size: int) -> list[int]:
    """The placeholder ids no embedding row holds: negative (LLaVA's -200) or past the vocabulary."""
    return sorted({t for t in ids if t < 0 or t >= vocab_size})


def inside_model(model: Any) -> str:
    """Where the model builds its own image preprocessing: the first submodule with an ``image_processor``
    attribute that is an image processor (``vision_tower.image_processor``), "" when none does."""
    from transformers.image_processing_utils import BaseImageProcessor

    for name, module in model.named_modules():
        found = getattr(module, "image_processor", None)
        if isinstance(found, BaseImageProcessor):
            return f"{name + '.' if name else ''}image_processor ({type(found).__name__})"
    return ""


def entry_method(processor: Any) -> str:
    """The release's processor entry when it is a named method, not ``__call__`` ("" otherwise): a public method
    the release's own class defines (outside transformers) taking ``text`` and ``images`` (Molmo's ``process``)."""
    cls = type(processor)
    if cls.__module__.startswith("transformers.") or "__call__" in vars(cls):
        return ""
    for name, attr in vars(cls).items():
        if name.startswith("_") or not inspect.isfunction(attr):
            continue
        if {"text", "images"} <= set(inspect.signature(attr).parameters):
            return name
    return ""


def generate_entry(cls: type) -> str:
    """The model's own generation entry that takes a batch (Molmo's ``generate_from_batch(batch, ...)``), else
    ``generate``."""
    for name in sorted(dir(cls)):
        attr = getattr(cls, name, None)
        if (name.startswith("generate_") and inspect.isfunction(attr)
                and not attr.__module__.startswith(("transformers.", "torch."))
                and list(inspect.signature(attr).parameters)[1:2] == ["batch"]):
            return name
    return "generate"


def answer_prefix(processor: Any) -> str:
    """" " when the processor starts every text with a space (its text kwargs' ``always_start_with_space`` default,
    Molmo's ``" User: ... Assistant:"``): the answer is then written so too, else ""."""
    import sys

    module = sys.modules.get(type(processor).__module__)
    for value in vars(module).values() if module else ():
        defaults = getattr(value, "_defaults", None)  # a ProcessingKwargs class's defaults, per kind of input
        text = defaults.get("text_kwargs") if isinstance(defaults, dict) else None
        if isinstance(text, dict) and text.get("always_start_with_space"):
            return " "
    return ""


def positions(out: dict[str, Any], media: list[str]) -> list[str]:
    """Media that hold token positions of the prompt: integer tensors whose values are -1 (none) or an index of
    ``input_ids`` (Molmo's ``image_input_idx``); a stand-in image's are -1 throughout."""
    length = out["input_ids"].shape[-1]
    return [key for key in media if not out[key].is_floating_point() and out[key].numel()
            and int(out[key].min()) >= -1 and int(out[key].max()) < length]


def recipe_end_of_turn(tokenizer: Any) -> str:
    """What the chat template writes after an answer (``<|im_end|>`` and a newline), the EOS token without one."""
    if not getattr(tokenizer, "chat_template", None):
        return tokenizer.eos_token or ""
    user = [{"role": "user", "content": "Hi."}]
    asked = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    said = tokenizer.apply_chat_template([*user, {"role": "assistant", "content": PROBE_ANSWER}], tokenize=False)
    return said[len(asked) + len(PROBE_ANSWER):] if said.startswith(asked + PROBE_ANSWER) else ""


def recipe_facts(cls: type, model_dir: Path, forward_params: list[str], trust_remote_code: bool,
                 builder: str = "", processor: Any = None) -> dict[str, Any]:
    """The ``recipe`` sample format for the probe's facts; {} when the card has no quick-start that asks about an
    image, ``problems`` when none of its blocks hands ``generate`` a sample this convention can train on.

    ``builder``: the user's prompt builder (``hooks.data.prompt_builder``, ``path.py:function``) in place of the
    card's code blocks; its verdict stands alone. ``processor``: a processor whose entry is a named method
    (``entry_method``): its own call, with the model's ``generate_entry``, is the recipe."""
    from PIL import Image
    from transformers import AutoTokenizer

    from hooks.data.records import dataset_runtime

    data = dataset_runtime()
    card = Path(model_dir) / CARD
    entry: dict[str, Any] = {}
    if processor is not None:
        entry = {"processor_method": entry_method(processor), "generate_method": generate_entry(cls),
                 "answer_prefix": answer_prefix(processor), "stacked": True}
        function = data.processor_entry(processor, data.SampleFormat(kind="recipe", **entry))
        candidates = [(-1, f"the processor's own {entry['processor_method']}() with {entry['generate_method']}()",
                       function)]
    elif builder:
        from hooks.data.builder import load_builder

        try:
            candidates: list[tuple[int, str, Any]] = [(-1, f"the sample builder {builder}", load_builder(builder))]
        except Exception as err:  # noqa: BLE001 - the user's file: never evidence, the cause is the answer
            return {"problems": [f"could not evaluate the sample builder {builder} ({type(err).__name__}: "
                                 f"{str(err)[:300]})"], "builder": builder}
    else:
        text = card.read_text(encoding="utf-8", errors="replace") if card.is_file() else ""
        candidates = [(block, f"code block {block}", None) for block in recipe_blocks(text)]
        if not candidates:
            return {}
    tokenizer = (processor.tokenizer if processor is not None else
                 AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code))
    causes = []
    for block, label, function in candidates:
        try:
            model = data.recording_model(cls, str(model_dir))
            recipe = data.ModelRecipe(tokenizer, model, function or data.recipe_code(text, block))
            out = data.run_recipe(recipe, PROBE_TURN, [Image.new("RGB", (128, 64), "red")])
        except Exception as err:  # noqa: BLE001 - could not evaluate this block: another may be the quick-start
            causes.append(f"{label}: {type(err).__name__}: {str(err)[:160]}")
            continue
        media = [key for key in out if key not in ("input_ids", "attention_mask")]
        marks = sentinels(out["input_ids"][0].tolist(), len(tokenizer))
        if not media or any(key not in forward_params for key in media) or not (marks or entry):
            causes.append(f"{label}: hands generate {sorted(out)} ({', '.join(map(str, marks)) or 'no'} "
                          f"placeholder id outside the vocabulary; forward takes {', '.join(forward_params)})")
            continue
        if entry:  # the processor writes the prompt (no chat template): the answer ends where generation stops
            return {"sample_format": {"kind": "recipe", "end_of_turn": tokenizer.eos_token or "", "per_sample": media,
                                      "sentinels": marks, "positions": positions(out, media), **entry},
                    "one_image_tokens": int(out["input_ids"].shape[-1]), "output_keys": sorted(out), "problems": []}
        return {"sample_format": {"kind": "recipe", "recipe_block": block, "end_of_turn": recipe_end_of_turn(tokenizer),
                                  "per_sample": media, "sentinels": marks, **({"builder": builder} if builder else {})},
                "inside_model": inside_model(model), "problems": []}
    what = (f"the sample builder {builder}" if builder else candidates[0][1] if entry else
            "the model card's quick-start")
    return {"problems": [f"could not evaluate {what} on one image and a question ({'; '.join(causes)[:400]})"],
            **({"builder": builder} if builder else {})}


# --- data parity (run by hooks.data.batch inside the framework's environment) ----------------------


def _media_problem(name: str, ours: Any, fmt: dict[str, Any]) -> str:
    """``per_sample_problem`` for each medium; stacked media (``fmt['stacked']``) are one tensor with a row per
    sample instead of a list."""
    if not fmt.get("stacked") or isinstance(ours, Exception):
        return per_sample_problem(name, ours, fmt["per_sample"][0])
    rows = ours["input_ids"].shape[0]
    bad = [key for key in fmt["per_sample"] if getattr(ours.get(key), "shape", (None,))[0] != rows]
    return f"{name}: {', '.join(bad)} not stacked with a row per sample, as forward takes them" if bad else ""


def check_recipe(batches: list[tuple[int, Any]], samples: list[tuple[str, list[Path], str, str | None]],
                 model_dir: Path, spec: BatchSpec) -> dict[str, Any]:
    """Compare the dataset plugin's batches with the model card's recipe run on each one-image sample.

    ``samples``: (name, image files, the user's first turn as the record writes it, its answer) per batch. A
    one-image, one-answer sample is compared token for token up to the answer, media for media; a sample the
    recipe cannot take (two images, a system prompt) must be refused by the plugin, naming the recipe; the
    text-only batch must carry the stand-in media.
    """
    import transformers
    from PIL import Image

    from hooks.data.records import dataset_runtime
    from hooks.model.loading import load_config_and_class

    fmt = spec.sample_format
    trust = spec.trust_remote_code
    _, cls, _ = load_config_and_class(model_dir, trust_remote_code=trust)
    data = dataset_runtime()
    if fmt.get("processor_method"):  # the release's own processor call, with the model's batch generation
        from hooks.compat import ensure_torchvision

        ensure_torchvision()
        processor = transformers.AutoProcessor.from_pretrained(str(model_dir), trust_remote_code=trust)
        tokenizer, source = processor.tokenizer, f"the model's own processor.{fmt['processor_method']}()"
        hands = f"hands {fmt['generate_method']}()"
        code = data.processor_entry(processor, data.SampleFormat(
            kind="recipe", processor_method=fmt["processor_method"], generate_method=fmt["generate_method"]))
    else:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust)
        source = "your prompt builder" if fmt.get("builder") else "the model card"
        hands = "hands generate"
    if fmt.get("builder"):
        from hooks.data.builder import load_builder

        code = load_builder(fmt["builder"])
    elif not fmt.get("processor_method"):
        code = data.recipe_code((Path(model_dir) / CARD).read_text(encoding="utf-8"), fmt["recipe_block"])
    recipe = data.ModelRecipe(tokenizer, data.recording_model(cls, str(model_dir)), code)
    key = fmt["per_sample"][0]
    details, names = [], []
    for (name, images, question, answer), (_, ours) in zip(samples, batches, strict=True):
        if isinstance(ours, Exception) and "recipe" in str(ours):
            details.append(f"{name}: not compared: refused by the plugin, naming why ({ours})")
            continue  # not in ``samples``: a match does not cover it
        names.append(name)
        if problem := _media_problem(name, ours, fmt):
            return {"verdict": "mismatch", "samples": names, "details": [*details, problem]}
        if not images:
            details.append(f"{name}: a stand-in image's {key} added, no placeholder (the model adds nothing of it)")
            continue
        own = data.run_recipe(recipe, question, [Image.open(images[0]).convert("RGB")])
        prompt = own["input_ids"][0].tolist()
        ids, labels = ours["input_ids"][0].tolist(), ours["labels"][0].tolist()
        if ids[:len(prompt)] != prompt:
            at = first_difference(ids, prompt)
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"{name}: input_ids differ from what {source} {hands} at token {at}: the "
                          f"plugin writes {ids[max(at - 3, 0):at + 4]}, {source} {prompt[max(at - 3, 0):at + 4]}"]}
        trained = tokenizer.decode([t for t, lab in zip(ids, labels, strict=True) if lab != IGNORE_INDEX])
        expected = fmt.get("answer_prefix", "") + answer + fmt["end_of_turn"]
        if any(lab != IGNORE_INDEX for lab in labels[:len(prompt)]) or trained != expected:
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"{name}: trains {trained!r}, not the answer and its end of turn {expected!r}"]}
        for medium in fmt["per_sample"]:
            mine = ours[medium][:1, :own[medium].shape[1]] if fmt.get("stacked") else ours[medium][0]
            if difference := value_difference(mine, own[medium]):
                return {"verdict": "mismatch", "samples": names,
                        "details": [*details, f"{name}: {medium!r} differs from {source}'s ({difference})"]}
        details.append(f"{name}: ids up to the answer (placeholder {fmt['sentinels'] or 'none: vocabulary tokens'}), "
                       f"{', '.join(fmt['per_sample'])} and the trained answer + end of turn equal what {source} "
                       f"{hands}")
    return {"verdict": "match", "samples": names, "details": details}

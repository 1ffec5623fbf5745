"""Branch c for a release that writes its training samples itself: a model method that returns labels.

Ovis2 ships no processor class and no ``chat()``. Its model card calls ``model.preprocess_inputs(query,
images)``, and the same method with ``return_labels=True`` (and no generation preface) writes a whole
conversation in the release's own chat format: ids with the visual tokenizer's placeholders, the image
crops, and the labels the release trains on (each answer and its ``<|im_end|>``). Rather than
re-deriving any of that, this module

- finds such a method on the model class (a parameter named ``return_labels``);
- learns the conversation form it reads by trying the two forms releases use (ShareGPT's
  ``from``/``value`` with ``human``/``gpt``, and ``role``/``content`` with ``user``/``assistant``) on the
  model built without weights: a form is taken only when the method returns media and trains exactly
  the answer and what follows it; a call that raises is no evidence for any form;
- checks, in data parity, the dataset plugin's samples against the method as the model card calls it
  (``preprocess_inputs(query, images)``, the inference prompt): the plugin's ids up to the answer
  must be the card's prompt, token for token, its media the card's, its trained tokens the answer and
  the end of turn.
"""

from __future__ import annotations

import copy
import inspect
from pathlib import Path
from typing import Any

from hooks.data import IGNORE_INDEX, first_difference, per_sample_problem, value_difference
from hooks.data.batch_spec import BatchSpec

# (role key, text key, names of the system, user and assistant roles), in the order they are tried
CONVERSATION_FORMS = (("from", "value", ("system", "human", "gpt")),
                      ("role", "content", ("system", "user", "assistant")))
PROBE_ANSWER = "Yes."


def find_method(cls: type) -> str | None:
    """The name of the class's own method that writes labels (takes ``return_labels``), or None."""
    for name in sorted(vars(cls) | {n: None for c in cls.__mro__[1:] for n in vars(c)}):
        attr = inspect.getattr_static(cls, name, None)
        if not inspect.isfunction(attr) or attr.__module__.startswith(("transformers.", "torch.")):
            continue
        if "return_labels" in inspect.signature(attr).parameters:
            return name
    return None


def trial_kwargs(method: Any) -> list[dict[str, Any]]:
    """Arguments that may make ``method`` write a labelled sample: ``return_labels``, with a generation
    preface (the text it would open the answer with) set to None first, as a training call leaves it."""
    base: dict[str, Any] = {"return_labels": True}
    prefaces = [name for name in inspect.signature(method).parameters if "preface" in name or "prefix" in name]
    return [*({**base, name: None} for name in prefaces), base]


def _ids_text(tokenizer: Any, ids: Any) -> str:
    """Decoded ids, the method's negative media placeholders left out."""
    return tokenizer.decode([int(t) for t in ids if int(t) >= 0])


def method_facts(cls: type, model: Any, model_dir: Path, forward_params: list[str],
                 trust_remote_code: bool) -> dict[str, Any]:
    """The ``method`` sample format for the probe's facts; {} without such a method, ``problems`` when no
    conversation form makes it write a labelled sample."""
    from PIL import Image
    from transformers import AutoTokenizer

    name = find_method(cls)
    if name is None:
        return {}
    bound = getattr(model, name)
    media_key = next((p for p in forward_params if p.startswith("pixel")), None)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
    image = Image.new("RGB", (128, 64), "red")
    causes = []
    for role_key, text_key, roles in CONVERSATION_FORMS:
        for kwargs in trial_kwargs(bound):
            conversation = [{role_key: roles[1], text_key: "<image>\nDescribe it."},
                            {role_key: roles[2], text_key: PROBE_ANSWER}]
            try:
                out = bound(copy.deepcopy(conversation), [image], **kwargs)
                _, ids, media, labels = out
                trained = _ids_text(tokenizer, ids[labels != IGNORE_INDEX])
            except Exception as err:  # noqa: BLE001 - could not evaluate this form: another may work
                causes.append(f"{role_key}/{text_key}: {type(err).__name__}: {str(err)[:120]}")
                continue
            if media is None or media_key is None or not trained.startswith(PROBE_ANSWER):
                causes.append(f"{role_key}/{text_key}: no media or the answer not trained")
                continue
            return {"sample_format": {
                "kind": "method", "method": name, "turn_keys": [role_key, text_key], "roles": list(roles),
                "method_kwargs": sorted(kwargs.items()), "per_sample": [media_key],
                "end_of_turn": trained[len(PROBE_ANSWER):]}, "problems": []}
    return {"problems": [f"could not evaluate the model's own {name}() on one image and a conversation "
                         f"({'; '.join(causes)[:400]})"]}


# --- data parity (run by hooks.data.batch inside the framework's environment) ----------------------


def check_method(batches: list[tuple[int, Any]], samples: list[tuple[str, list[Path], str, str | None]],
                 model_dir: Path, spec: BatchSpec) -> dict[str, Any]:
    """Compare the dataset plugin's batches with the model's method as its model card calls it.

    ``samples``: (name, image files, the user's first turn as the record writes it, its answer) per batch.
    The card's call takes one query: a one-image, one-answer sample is compared token for token up to the
    answer, media for media; the others must build; the text-only batch must carry the stand-in media.
    """
    import torch
    import transformers
    from PIL import Image

    from hooks.data.records import dataset_runtime
    from hooks.model.loading import load_config_and_class

    fmt = spec.sample_format
    trust = spec.trust_remote_code
    _, cls, _ = load_config_and_class(model_dir, trust_remote_code=trust)
    method = getattr(dataset_runtime().weightless(cls, str(model_dir)), fmt["method"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust)
    key = fmt["per_sample"][0]
    details, names = [], []
    for (name, images, question, answer), (_, ours) in zip(samples, batches, strict=True):
        names.append(name)
        if problem := per_sample_problem(name, ours, key):
            return {"verdict": "mismatch", "samples": names, "details": [*details, problem]}
        if not images:
            details.append(f"{name}: a stand-in image's {key} added, no tokens (the model adds its features x 0)")
            continue
        if len(images) != 1 or answer is None:
            details.append(f"{name}: built; not compared (the model card's call takes one query)")
            continue
        _, prompt, own_media = method(question, [Image.open(images[0]).convert("RGB")])
        ids, labels, prompt = ours["input_ids"][0].tolist(), ours["labels"][0].tolist(), prompt.tolist()
        if ids[:len(prompt)] != prompt:
            at = first_difference(ids, prompt)
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"{name}: input_ids differ from the model card's {fmt['method']}() at token {at}: the "
                          f"plugin writes {_ids_text(tokenizer, ids[max(at - 3, 0):at + 4])!r}, the card "
                          f"{_ids_text(tokenizer, prompt[max(at - 3, 0):at + 4])!r}"]}
        trained = _ids_text(tokenizer, [t for t, lab in zip(ids, labels, strict=True) if lab != IGNORE_INDEX])
        if any(lab != IGNORE_INDEX for lab in labels[:len(prompt)]) or trained != answer + fmt["end_of_turn"]:
            return {"verdict": "mismatch", "samples": names, "details": [
                *details, f"{name}: trains {trained!r}, not the answer and its end of turn "
                          f"{answer + fmt['end_of_turn']!r}"]}
        difference = value_difference(ours[key][0], own_media) if isinstance(own_media, torch.Tensor) else "missing"
        if difference:
            return {"verdict": "mismatch", "samples": names,
                    "details": [*details, f"{name}: {key!r} differs from the model card's ({difference})"]}
        details.append(f"{name}: ids up to the answer, {key} and the trained answer + end of turn equal the model "
                       f"card's {fmt['method']}()")
    return {"verdict": "match", "samples": names, "details": details}

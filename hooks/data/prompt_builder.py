"""The user's prompt builder: for a release where nothing builds a training sample, the one function a user adds.

Some releases ship no processor class, no ``chat()``, no method that writes samples and no model card whose
quick-start the recipe convention can run (``hooks.data.model_recipe``): a copy of the code alone. What is
missing is the inference recipe itself, so that is what a user supplies, as a function with the contract
``PROMPT_CONTRACT``: ``build_prompt(model, tokenizer, text, images)`` returns what the model's ``generate``
takes for that prompt (usually the base model's model card, written as a function). Everything else is the
recipe convention's: the function runs on the model built without weights, the answer and its end of turn
are appended as the tokenizer's chat template writes them, parity compares the dataset plugin's prompt with
the function's, token for token, and the smoke trains through the model's own ``forward``.

``python -m hooks.data.builder MODEL_DIR --skeleton my_builder.py --contract prompt`` writes a skeleton
stating the contract with this model's figures (``skeleton``).
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

FUNCTION = "build_prompt"
PARAMETERS = ("model", "tokenizer", "text", "images")
PROMPT_CONTRACT = ("takes the model (built without weights: its tokenizers and image processors are real), the "
                   "tokenizer, the user turn's text (with <image> where the image goes) and the images (PIL RGB), "
                   "and returns a dict of what the model's generate takes for that prompt: input_ids (1, length), "
                   "with the model's own image placeholder, an attention_mask if it takes one, and the media "
                   "tensors under the names its forward takes them by (images=, pixel_values=)")
_SENTINEL = re.compile(r"^\s*(IMAGE_TOKEN_INDEX|IMAGE_TOKEN_ID|image_token_index)\s*=\s*(-?\d+)", re.MULTILINE)


def is_prompt_builder(function: Any) -> bool:
    """The function takes (model, tokenizer, text, images): the prompt contract, not the tile contract."""
    try:
        names = tuple(inspect.signature(function).parameters)[:len(PARAMETERS)]
    except (TypeError, ValueError):
        return False
    return names == PARAMETERS


def figures(model_dir: Path) -> list[str]:
    """What the skeleton states of this model: its class, a sentinel its code defines, its chat template, where
    its code builds an image processor."""
    folder = Path(model_dir)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    found = [f"architecture {', '.join(config.get('architectures') or ['?'])} (model_type "
             f"{config.get('model_type', '?')!r})"]
    code = {path.name: path.read_text(encoding="utf-8", errors="replace") for path in sorted(folder.glob("*.py"))}
    for name, text in code.items():
        if match := _SENTINEL.search(text):
            found.append(f"{name} defines {match.group(1)} = {match.group(2)}: the image placeholder its forward "
                         "replaces with image features (splice it into input_ids where <image> is)")
        if "self.image_processor =" in text:
            found.append(f"{name} builds an image processor inside the model (self.image_processor = ...): use it, "
                         "e.g. model.get_vision_tower().image_processor")
    for key in ("mm_vision_tower", "image_aspect_ratio", "image_token_index"):
        if key in config:
            found.append(f"config.json {key} = {json.dumps(config[key])}")
    tokenizer_config = folder / "tokenizer_config.json"
    template = tokenizer_config.is_file() and "chat_template" in json.loads(tokenizer_config.read_text("utf-8"))
    found.append("the tokenizer has a chat template (tokenizer.apply_chat_template)" if template else
                 "the tokenizer has no chat template: write the prompt as the release's card or base model does")
    return found


def prompt_skeleton(model_dir: Path, function: str = FUNCTION) -> str:
    """A prompt-builder file for ``model_dir`` whose docstring states the contract with the model's own figures."""
    import textwrap

    from hooks.data.skeleton import skeleton_file

    return skeleton_file(
        model_dir, function, kind="Prompt builder", contract=f"(model, tokenizer, text, images) {PROMPT_CONTRACT}",
        figures="\n".join(textwrap.fill(line, 96, initial_indent="    - ", subsequent_indent="      ")
                           for line in figures(model_dir)),
        advice="Write what the release's (or its base model's) model card does before it calls generate; return what\n"
               "it hands generate. The copy runs this on the model built without weights, appends each answer and its\n"
               "end of turn as the chat template writes them, compares the training prompt with this function's token\n"
               "for token and trains through the model's own forward.",
        imports="import torch", signature="(model, tokenizer, text: str, images: list) -> dict",
        doc="What the model's generate takes for one user turn ``text`` and its ``images``.",
        todo="write the model card's inference recipe here")

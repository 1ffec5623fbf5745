"""Inputs several tests share: the Qwen2.5-VL plan and a one-image chat batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The plan the probe derives for Qwen2.5-VL (MindSpeed-MM example order).
QWEN2_5_VL_PLAN = [
    "model.visual.blocks.{*}",
    "model.visual.merger",
    "model.visual",
    "model.language_model.embed_tokens",
    "model.language_model.layers.{*}",
    "model.language_model",
    "lm_head",
]


def one_image_batch(model_dir: Path) -> tuple[Any, dict[str, Any]]:
    """The model's processor and its output for one 64x64 image in a user turn plus an answer."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What color is this?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Mostly red."}]},
    ]
    text = processor.apply_chat_template(messages, tokenize=False)
    image = Image.new("RGB", (64, 64), (220, 30, 30))
    return processor, processor(text=[text], images=[image], return_tensors="pt")

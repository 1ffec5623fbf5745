"""Which medium a forward input carries and which medium a tower encodes, read off their names.

Every stage that proves media (the data path's parity samples, the smoke's "each medium reached forward
and its tower got a gradient", the report) asks the same two questions; they are answered here once.
Names are what the releases themselves use: ``pixel_values``/``image_*`` for images, ``*video*`` for
videos, ``input_features``/``*audio*``/``*speech*`` for sound (Qwen2-Audio and the Qwen-Omni thinkers
take ``input_features`` + ``feature_attention_mask``, Phi-4-multimodal ``audio_input_features``, Gemma 3n
``input_features`` + ``input_features_mask``); towers are ``visual``/``vision_tower``/``vision_model`` and
``audio_tower``/``audio_encoder``/``audio_embed``. A stage that is neither (a talker, a vocoder) has no medium.
"""

from __future__ import annotations

import re

MEDIA = ("image", "video", "audio")

_AUDIO_INPUT = re.compile(r"audio|speech|input_features|feature_attention_mask|input_features_mask")
_VIDEO_INPUT = re.compile(r"video")
_IMAGE_INPUT = re.compile(r"^pixel|^image|_pixel|image_(sizes|grid|flags|attention)")
_AUDIO_TOWER = re.compile(r"(^|[._])(audio|speech|whisper|sound)")
_VISION_TOWER = re.compile(r"(^|[._])(vision|visual|vit|image|siglip|clip|perceiver|vq|img)")


def input_medium(name: str) -> str | None:
    """The medium a ``forward`` input carries (``image``, ``video``, ``audio``), None for text and positions."""
    if _AUDIO_INPUT.search(name):
        return "audio"
    if _VIDEO_INPUT.search(name):
        return "video"
    if _IMAGE_INPUT.search(name):
        return "image"
    return None


def tower_medium(module: str) -> str | None:
    """``audio`` or ``vision`` (images and videos) for an encoder tower's module name, None for anything else
    (the language model, a talker, a vocoder)."""
    if _AUDIO_TOWER.search(module):
        return "audio"
    if _VISION_TOWER.search(module):
        return "vision"
    return None


def tower_for(medium: str) -> str:
    """The tower kind that encodes ``medium``: videos go through the vision tower."""
    return "audio" if medium == "audio" else "vision"


# A connector (projector) carries a tower's features into the language model: ``multi_modal_projector`` (LLaVA,
# Gemma 3, Qwen2-Audio), ``mm_projector``, Idefics' ``connector``, InternVL's ``mlp1``, aligners and resamplers. One
# inside a tower (Qwen2.5-VL's ``visual.merger``) is the tower's own; only those beside the towers are connectors.
_CONNECTOR = re.compile(r"^(\w*projector|connector|mm_proj\w*|aligner|\w*resampler|mlp1|merger|adapter)$")


def connector_module(name: str) -> str | None:
    """The outermost module of parameter ``name`` that is a connector beside the towers (None: in none, or in a
    tower, whose own projection the tower's gradient covers)."""
    parts = name.split(".")[:-1]
    for end in range(1, len(parts) + 1):
        if tower_medium(".".join(parts[:end])):
            return None
        if _CONNECTOR.match(parts[end - 1]):
            return ".".join(parts[:end])
    return None


def connector_kind(module: str, kinds: set[str]) -> set[str]:
    """The tower kinds (``vision``/``audio``) whose features ``module`` carries: the one its name says, else every kind
    the model has a tower of (LLaVA's ``multi_modal_projector`` is the vision tower's, Qwen2-Audio's the audio's)."""
    named = tower_medium(module)
    return {named} if named else set(kinds)

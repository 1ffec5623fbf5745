"""The data path's facts as the model facts freeze them (``ModelFacts.processor``), typed.

The data stage (``hooks.data.facts``) fills them while the probe has the model built: the processor's class and
what it makes of one image and a text, or, for a release without a processor class, what its own data code does
(a ``chat()``, a sample method, ``make_context()``, the model card's quick-start). Every later stage reads them
here, by field, never through the answers file's keys. The type lives with the model facts that carry it, so the
model stage does not import the data stage that fills it.

In the answers file they are a mapping whose keys are the field names (``class`` for ``class_name``); a field that is
``None`` is absent there, so that an answers file written before a field existed reads back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

_RENAMED = {"class_name": "class"}  # field -> key in the answers file
# Fields recorded, None included, whenever another is: the image token with the class, the chat and media format
# (None: the processor has no chat template) with the outputs of one sample.
_RECORDED_WITH = {"image_token": "class_name", "data_format": "output_keys"}


@dataclass
class ProcessorFacts:
    """What the model's processor (or its own data code) does, as the data stage found it. ``None``: not found."""

    # --- the processor, as AutoProcessor loads it
    class_name: str | None = None  # its class; None when none loaded
    image_token: str | None = None  # its image placeholder token (recorded as found, None included, with the class)
    has_chat_template: bool | None = None  # the processor carries a chat template
    media: list[str] | None = None  # the media it takes ("image", "video", "audio"); None: images only
    output_keys: list[str] | None = None  # the keys it emits for one image (or clip) and a text, sorted
    one_image_tokens: int | None = None  # the length of that sample's input_ids (sizes the YAML's cutoff_len)
    # --- how samples are made: branch c's convention (hooks.data.records), branch b's chat and media format
    # (hooks.data.media), the audio it takes (hooks.data.audio.AudioFacts); the generated dataset code reads these
    sample_format: dict[str, Any] | None = None
    data_format: dict[str, Any] | None = None
    audio: dict[str, Any] | None = None
    # --- a release without a processor class: its own data code (hooks.data.model_code/_method/_context/_recipe)
    missing: bool | None = None  # no processor class: AutoProcessor failed, guessed a built-in, or gave a tokenizer
    unevaluated: bool | None = None  # its one-sample call raised: how it makes a sample is unknown
    unloadable: bool | None = None  # the release names a processor that does not load (the copy stops)
    error: str | None = None  # why the processor is missing or failed on one sample
    problems: list[str] | None = None  # why the model's own data code could not make a sample ([] when it did)
    traceback: str | None = None  # the tail of the traceback where evaluating that code raised
    needs_builder: bool | None = None  # nothing builds a sample: the user writes a builder (hooks.data.builder)
    builder_contract: str | None = None  # which builder the stop message asks for ("prompt")
    builder: str | None = None  # the user's sample builder the facts were evaluated with (path.py:function)
    model_card: bool | None = None  # the folder has a README.md (the model card) the code convention looked in
    model_attributes: dict[str, Any] | None = None  # attributes chat() sets on the model (InternVL's context id)
    model_attribute_tokens: dict[str, Any] | None = None  # those attributes' token ids, as tokens
    inside_model: str | None = None  # preprocessing built inside the model (``vision_tower.image_processor (..)``)
    entry_method: str | None = None  # the processor's entry is this named method, not __call__ (Molmo's ``process``)

    @property
    def loaded(self) -> bool:
        """A processor class loaded (its class, image token and chat template are recorded)."""
        return self.class_name is not None

    @property
    def chat_format(self) -> dict[str, Any]:
        """The chat format read off the processor's template (``hooks.data.chat_format``), {} without one."""
        return _part(self.data_format, "chat")

    @property
    def media_format(self) -> dict[str, Any]:
        """How branch b's plugin hands the media to the processor (``hooks.data.media``), {} when it cannot."""
        return _part(self.data_format, "media")

    @property
    def form(self) -> dict[str, Any]:
        """Branch c's sample format (``hooks.data.records.sample_format``), {} when none was found."""
        return dict(self.sample_format or {})

    @property
    def audio_facts(self) -> dict[str, Any]:
        """How the processor takes audio (``hooks.data.audio.AudioFacts.to_dict``), {} for a model without audio."""
        return dict(self.audio or {})

    def taken_media(self) -> list[str]:
        """The media the processor takes (images where it does not say)."""
        return list(self.media or ["image"])

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ProcessorFacts:
        """The facts of an answers file (keys as ``to_dict`` writes them; unknown keys of other versions dropped)."""
        data = data or {}
        return cls(**{f.name: data[_RENAMED.get(f.name, f.name)] for f in fields(cls)
                      if _RENAMED.get(f.name, f.name) in data})

    def to_dict(self) -> dict[str, Any]:
        """The answers file's mapping: the fields found, under their keys (``_RECORDED_WITH``: None included)."""
        return {_RENAMED.get(f.name, f.name): getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None
                or (f.name in _RECORDED_WITH and getattr(self, _RECORDED_WITH[f.name]) is not None)}


def _part(mapping: dict[str, Any] | None, key: str) -> dict[str, Any]:
    """A nested format's part (``data_format["chat"]``), {} where the format or the part is absent."""
    return dict(mapping.get(key) or {}) if mapping else {}

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

from dataclasses import asdict, dataclass, field, fields
from typing import Any

_RENAMED = {"class_name": "class"}  # field -> key in the answers file
# Fields recorded, None included, whenever another is: the image token with the class, the chat and media format
# (None: the processor has no chat template) with the outputs of one sample.
_RECORDED_WITH = {"image_token": "class_name", "data_format": "output_keys"}


@dataclass
class ChatSlots:
    """The model's chat format as MindSpeed-MM template slots, or the reasons it is not expressible: what the data
    stage read off the model's chat template (``hooks.data.chat_format.ChatFormat`` adds the rendering), frozen as
    ``data_format["chat"]``."""

    prefix: str = ""
    bos_from_tokenizer: bool = False
    system_pre: str = ""
    system_post: str = ""
    system_in_first_user: str | None = None  # separator after the system prompt inside the first user turn
    default_system: str = ""
    user_pre: str = ""
    user_post: str = ""
    assistant_pre: str = ""  # whitespace before an answer that the model itself generates (llava's " ")
    assistant_post: str = ""
    end_of_turn: str = ""  # the special tokens that close an answer
    stop_word: str = ""  # the first of them: where generation stops
    text_lead: str = ""
    no_lead_after: list[str] = field(default_factory=list)  # media kinds a user turn may start with, lead-free
    image_item: str | None = None
    video_item: str | None = None
    audio_item: str | None = None
    history_lead: str = ""  # fixed text before past answers only (kept in the prompt side)
    whole_text: bool = False  # the tokenizer merges text across slot boundaries: tokenize a conversation at once
    string_roles: list[str] = field(default_factory=list)  # roles whose content the template wants as a string
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def expressible(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["audio_item"] is None:  # image models' frozen facts stay as they were before audio
            del data["audio_item"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChatSlots:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class MediaFacts:
    """How branch b's plugin hands the media to the processor (``hooks.data.media.media_facts``, frozen as
    ``data_format["media"]``; the generated plugin's ``MediaFormat`` is built from it)."""

    item_prefix: str = ""  # text the processor puts before an image item (a BOS it expands with)
    token_types: dict[str, int] = field(default_factory=dict)  # token id -> token_type_ids value (Gemma 3's images)
    video_item: str | None = None  # the template's video item, kept only when the processor has a video processor
    batch_keys: list[str] = field(default_factory=list)  # the media inputs forward takes, as the processor returns
    audio_item: str | None = None  # the template's audio item (an omni model's)
    audio_kwarg: str | None = None  # the keyword the processor takes clips by
    sampling_rate: int | None = None  # the rate its feature extractor expects

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MediaFacts:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass
class AudioFacts:
    """How the model's processor takes audio (``hooks.data.audio.audio_facts``, frozen as ``processor["audio"]``)."""

    extractor: str  # the feature extractor's class (WhisperFeatureExtractor, Gemma3nAudioFeatureExtractor, ...)
    attribute: str  # the processor attribute that holds it: feature_extractor or audio_processor
    sampling_rate: int  # what the extractor expects: the YAML's audio_sampling_rate, the loader's target rate
    kwarg: str  # the keyword the processor's __call__ takes clips by
    token: str | None  # the processor's audio token (what it expands per clip), None when it has none
    output_keys: list[str] = field(default_factory=list)  # what the processor returns for one clip and a text
    batch_keys: list[str] = field(default_factory=list)  # of those, the audio inputs forward takes
    one_audio_tokens: int = 0  # tokens of one demo clip (1.5 s) and a short turn: sizes cutoff_len with images
    problems: list[str] = field(default_factory=list)  # why the data path cannot hand this model audio

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AudioFacts:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class SampleForm:
    """Branch c's sample convention (``hooks.data.records.sample_format`` and the model-code conventions), as the
    stages after the data stage read it. The whole mapping (``ProcessorFacts.sample_format``) is what the generated
    dataset code embeds; these are the fields the hooks themselves read."""

    kind: str = ""  # the convention: chat, template, code, context, method, recipe, ... ('' when none was found)
    media: list[str] | None = None  # the media the convention hands the processor (None: the processor's own)
    builder: str | None = None  # the user's sample builder (path.py:function), copied beside the plugin
    image_function: str = ""  # the code convention's image preprocessing (``module.function``)
    template_on: str | None = None  # whose chat template the convention calls ("tokenizer": Phi-3-vision)
    image_mark: str | None = None  # images written into string content as this mark (``<|image_{n}|>``)
    end_of_turn: str = ""  # what closes an answer where the chat format does not say
    tile_flags: list[str] = field(default_factory=list)  # the code convention's per-tile inputs (image_flags)
    per_sample: list[str] = field(default_factory=list)  # media inputs handed per sample (method, recipe)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SampleForm:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in (data or {})})


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
    def chat_format(self) -> ChatSlots | None:
        """The chat format read off the processor's template (``hooks.data.chat_format``), None without one."""
        chat = self.data_format.get("chat") if self.data_format else None
        return ChatSlots.from_dict(chat) if chat else None

    @property
    def media_format(self) -> MediaFacts | None:
        """How branch b's plugin hands the media to the processor (``hooks.data.media``), None when it cannot."""
        media = self.data_format.get("media") if self.data_format else None
        return MediaFacts.from_dict(media) if media else None

    @property
    def form(self) -> SampleForm:
        """Branch c's sample convention (``hooks.data.records.sample_format``); ``kind`` '' when none was found."""
        return SampleForm.from_dict(self.sample_format)

    @property
    def audio_facts(self) -> AudioFacts | None:
        """How the processor takes audio (``hooks.data.audio``), None for a model without audio."""
        return AudioFacts.from_dict(self.audio) if self.audio else None

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


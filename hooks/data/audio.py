"""Audio facts, read off the model's own processor: what the data path needs to hand a clip to the model.

MindSpeed-MM's records carry audio as ``audios`` (file paths) and ``<audio>`` in the text; its mm_plugin
loads each file with librosa at ``audio_sampling_rate`` and hands the arrays to the processor's feature
extractor. Everything model-specific is the processor's: which attribute holds the extractor
(``feature_extractor``; Phi-4-multimodal and Granite Speech call it ``audio_processor``), the rate it
expects, the keyword its ``__call__`` takes clips by (``audio``), the token it expands per clip and the
inputs it returns (``input_features`` + ``feature_attention_mask`` for Qwen2-Audio and the Qwen-Omni
thinkers, ``audio_input_features`` for Phi-4-multimodal, ``input_features_mask`` for Gemma 3n). They are
read here once, on a real clip, and frozen with the processor facts (``AudioFacts``), so that the
templates and the checks never guess them.
"""

from __future__ import annotations

import inspect
from typing import Any

from hooks.model.facts import ModelFacts
from hooks.model.modality import input_medium
from hooks.model.processor_facts import AudioFacts

EXTRACTOR_ATTRIBUTES = ("feature_extractor", "audio_processor")
AUDIO_KWARGS = ("audio", "audios")


def extractor_of(processor: Any) -> tuple[str, Any] | tuple[None, None]:
    """(attribute, feature extractor) of ``processor``, or (None, None) when it takes no audio."""
    from transformers.feature_extraction_utils import FeatureExtractionMixin

    for name in EXTRACTOR_ATTRIBUTES:
        value = getattr(processor, name, None)
        if isinstance(value, FeatureExtractionMixin):
            return name, value
    return None, None


def takes_images(processor: Any) -> bool:
    """Whether the processor has an image processor (an audio-only chat model has none)."""
    return getattr(processor, "image_processor", None) is not None


def processor_media(processor: Any) -> list[str]:
    """What the processor takes: ``["image"]`` without a feature extractor, else ``["audio"]`` (an audio-only chat
    model) or ``["image", "audio"]``: which samples, stand-ins and chat-template items apply to it."""
    if extractor_of(processor)[1] is None:
        return ["image"]
    return ["image", "audio"] if takes_images(processor) else ["audio"]


def sampling_rate(processor: Any) -> int:
    """The rate the processor's feature extractor expects (16 kHz, MindSpeed-MM's default, where it names none)."""
    return int(getattr(extractor_of(processor)[1], "sampling_rate", 0) or 16000)


def audio_kwarg(processor: Any) -> str:
    """The keyword of the processor's ``__call__`` for clips (``audio``), "" when it names none."""
    try:
        params = inspect.signature(type(processor).__call__).parameters
    except (TypeError, ValueError):
        return ""
    return next((name for name in AUDIO_KWARGS if name in params), "")


def sample_clip() -> Any:
    """The demo data's first clip (1.5 s at 16 kHz): what the facts are measured on."""
    from hooks.data.sample import demo_audio

    return demo_audio(0)[0]


def audio_facts(processor: Any, forward_params: list[str]) -> AudioFacts | None:
    """The processor's audio facts, or None when it has no feature extractor (the model takes no audio)."""
    attribute, extractor = extractor_of(processor)
    if extractor is None:
        return None
    facts = AudioFacts(extractor=type(extractor).__name__, attribute=attribute,
                       sampling_rate=sampling_rate(processor),
                       kwarg=audio_kwarg(processor), token=getattr(processor, "audio_token", None))
    if not any(input_medium(p) == "audio" for p in forward_params):
        facts.problems.append("forward takes no audio input: the processor's audio would not reach the model")
    return facts


def with_audio(form: dict[str, Any], processor: Any, audio: AudioFacts | None) -> dict[str, Any]:
    """Branch c's sample format (``hooks.data.records.sample_format``) with the processor's media, and the rate
    and keyword its clips go by: the chat convention hands clips to the processor's ``__call__`` (which must name
    a keyword for them), the template convention to its own chat-template call (``sample_format`` set it up)."""
    if audio is not None and form["kind"] == "chat":
        form.update(media=processor_media(processor), sampling_rate=audio.sampling_rate, audio_kwarg=audio.kwarg)
        if not audio.kwarg:
            audio.problems.append(f"{type(processor).__name__}.__call__ takes no audio keyword "
                                  f"({', '.join(AUDIO_KWARGS)}) and its chat template reads no clip from a file: "
                                  "branch c cannot hand it clips")
    return form


def measure(facts: AudioFacts, out: Any, forward_params: list[str]) -> None:
    """Record what one clip's processor call returned (``out``) into ``facts``."""
    facts.output_keys = sorted(out.keys())
    facts.batch_keys = sorted(k for k in out.keys() if k in forward_params and input_medium(k) == "audio")
    facts.one_audio_tokens = int(out["input_ids"].shape[-1])
    if not facts.batch_keys:
        facts.problems.append(f"the processor returns no audio input that forward takes for a clip (it returns "
                              f"{facts.output_keys}; forward takes {[p for p in forward_params if input_medium(p)]})")


def media_taken(facts: ModelFacts, branch: str = "") -> list[str]:
    """The media the model's processor takes, from the frozen facts (absent: images, as before audio); on branch c,
    those its dataset plugin's convention hands the processor (only the chat and template conventions take clips:
    an omni model whose processor writes its own prompt trains on images there, and its data must say so)."""
    taken = facts.processor.taken_media()
    if branch != "c":
        return taken
    return list(facts.processor.form.media or [m for m in taken if m != "audio"] or ["image"])


def untaken_media_error(records: list[dict[str, Any]], facts: ModelFacts, field: str = "data_json",
                        audios_of: Any = None, images_of: Any = None, texts_of: Any = None, branch: str = "") -> str:
    """Why the records hold a medium the data path takes none of ("" when they don't): a clip (or ``<audio>``) for an
    image-only model would be trained as the placeholder's text, an image for an audio-only model would fail the
    processor. ``*_of``: how a record names its clips, images and texts (default: the huggingface shape)."""
    taken = media_taken(facts, branch)
    audios_of = audios_of or (lambda r: _listed(r.get("audios")))
    images_of = images_of or (lambda r: _listed(r.get("images")))
    texts_of = texts_of or (lambda r: [str(m.get("content", "")) for m in r.get("messages") or []
                                       if isinstance(m, dict)])
    for index, record in enumerate(records, 1):
        try:
            texts = texts_of(record)
            found = {"audio": len(audios_of(record)) + sum(t.count("<audio>") for t in texts),
                     "image": len(images_of(record)) + sum(t.count("<image>") for t in texts)}
        except (KeyError, TypeError, AttributeError):
            return ""  # a mapping problem: data_fields' own check says why
        for medium, count in found.items():
            if count and medium not in taken:
                what, part = (("audio clips or <audio>", "feature extractor") if medium == "audio" else
                              ("images or <image>", "image processor"))
                if medium in media_taken(facts):  # the processor takes it, branch c's convention does not
                    why = (f"branch c's {facts.processor.form.kind!r} convention hands the processor no "
                           f"{medium}")
                else:
                    why = f"{facts.architecture or 'the model'} takes no {medium} (its processor has no {part})"
                return (f"{field}: record {index} has {what}, but {why}: it would train on the placeholder's text; "
                        f"drop the {medium} from the data or migrate a model that takes it")
    return ""


def _listed(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value or [])

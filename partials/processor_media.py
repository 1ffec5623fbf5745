"""Media for MindSpeed-MM's data path through the model's own processor (copied in by msmm-migrate).

The model's chat template writes one fixed item per image, video or audio clip (``MediaFormat.image_item``,
read off the template by msmm-migrate); the processor decides what that item becomes for a given
medium: the number of patch tokens, tiles, row/column markers, begin/end tokens, a clip's frames. Both
steps of the data path ask the processor instead of repeating its arithmetic:

- ``expand_messages``: each ``<image>``/``<video>``/``<audio>`` placeholder becomes the text the processor
  makes of the template's item for that media, in place (the template then tokenizes it with its turn);
- ``batch_inputs``: the processor's own non-text outputs for a batch (pixel values, image sizes,
  attention masks, grids, ...) that the model's ``forward`` takes; ``token_type_ids``
  are rebuilt over the batch's real token ids from the token types the processor assigns.

This file imports neither MindSpeed-MM nor msmm-migrate: the data plugin next to it does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

IMAGE_PLACEHOLDER = "<image>"
VIDEO_PLACEHOLDER = "<video>"
AUDIO_PLACEHOLDER = "<audio>"
_ANY = "|".join(re.escape(p) for p in (IMAGE_PLACEHOLDER, VIDEO_PLACEHOLDER, AUDIO_PLACEHOLDER))
_RUN = re.compile(f"((?:{_ANY})+)")  # adjacent placeholders
TEXT_KEYS = ("input_ids", "attention_mask")  # the processor's text side: the template builds our own
# Outputs laid over the token positions that are not a token-type lookup (Mllama's cross-attention mask):
# recomputed by the processor over the batch's own text, which it leaves unexpanded.
POSITIONAL_KEYS = ("cross_attention_mask",)


@dataclass(frozen=True)
class MediaFormat:
    """What the model's chat template writes for media, and what its forward takes."""

    image_item: str | None
    video_item: str | None = None
    item_prefix: str = ""  # text the processor needs before an item to expand it as mid-conversation (a BOS)
    text_lead: str = ""  # written before a user turn that starts with text
    no_lead_after: tuple[str, ...] = ()  # placeholders a user turn may start with, lead-free
    batch_keys: frozenset[str] = frozenset()  # processor outputs the model's forward takes
    token_types: dict[int, int] = field(default_factory=dict)  # token id -> type, as the processor marks them
    audio_item: str | None = None  # what the template writes for one clip (None: the model takes no audio)
    audio_kwarg: str = "audio"  # the keyword the processor takes clips by
    sampling_rate: int = 0  # the rate the clips are at, passed with them (the feature extractor's)


@dataclass(frozen=True)
class Clip:
    """A decoded video: the frames the data path sampled and the rate it sampled them at.

    The rate goes to the processor as the video's metadata: processors that write timestamps
    (Qwen3-VL's ``<0.2 seconds>``) or resample frames read it, and without it they assume 24 fps.
    """

    frames: list[Any]
    fps: float

    def metadata(self) -> dict[str, Any]:
        count = len(self.frames)
        return {"total_num_frames": count, "fps": self.fps, "duration": count / self.fps,
                "frames_indices": list(range(count))}


def clip(path: Any, frames: list[Any], fps: float) -> Clip:
    """``frames`` sampled from the video file at ``path``: their rate over its duration, else ``fps``
    (the rate asked for) when the file does not say how long it is."""
    import av

    with av.open(path, "r") as container:
        stream = next(s for s in container.streams if s.type == "video")
        seconds = float(stream.duration * stream.time_base) if stream.duration else 0.0
    return Clip(list(frames), len(frames) / seconds if seconds else fps)


def _call(processor: Any, texts: list[str], images: Sequence[Sequence[Any]] | None,
          videos: Sequence[Sequence[Clip]] | None, audios: Sequence[Sequence[Any]] | None = None,
          fmt: MediaFormat | None = None) -> Any:
    """The processor on ``texts`` with images and videos nested per text (the form every processor accepts) and
    clips as one flat list in order (as audio processors take them), by the processor's keyword, at their rate."""
    kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "add_special_tokens": False}
    if images and any(images):
        kwargs["images"] = [list(group) for group in images]
    if videos and any(videos):
        kwargs["videos"] = [[c.frames for c in group] for group in videos]
        kwargs["video_metadata"] = [[c.metadata() for c in group] for group in videos]
    if audios and any(audios):
        kwargs[fmt.audio_kwarg if fmt else "audio"] = [clip for group in audios for clip in group]
        if fmt and fmt.sampling_rate:
            kwargs["sampling_rate"] = fmt.sampling_rate
    if len(texts) > 1:
        kwargs["padding"] = True
    return processor(**kwargs)


def expand(processor: Any, item: str, *, image: Any = None, video: Clip | None = None, audio: Any = None,
           prefix: str = "", fmt: MediaFormat | None = None) -> str:
    """The text the processor makes of one media ``item`` for ``image`` (or ``video``, or an ``audio`` clip)."""
    out = _call(processor, [prefix + item], [[image]] if image is not None else None,
                [[video]] if video is not None else None, [[audio]] if audio is not None else None, fmt)
    text = processor.tokenizer.decode(out["input_ids"][0])
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def expand_messages(messages: list[dict[str, str]], processor: Any, images: Sequence[Any], videos: Sequence[Clip],
                    fmt: MediaFormat, audios: Sequence[Any] = ()) -> list[dict[str, str]]:
    """Each run of placeholders replaced by its expansion; the text lead added to text-first user turns."""
    contents = []
    for message in messages:
        content = message["content"]
        if message["role"] == "user" and fmt.text_lead and not content.startswith(fmt.no_lead_after):
            content = fmt.text_lead + content
        contents.append(content)
    runs = [run for content in contents for run in _RUN.findall(content)]
    expansions = iter(expand_runs(processor, fmt, runs, images, videos, audios))
    out = []
    for message, content in zip(messages, contents, strict=True):
        pieces = _RUN.split(content)  # text, run, text, run, ..., text
        out.append({**message, "content": "".join(next(expansions) if i % 2 else p for i, p in enumerate(pieces))})
    return out


def expand_runs(processor: Any, fmt: MediaFormat, runs: Sequence[str], images: Sequence[Any],
                videos: Sequence[Clip], audios: Sequence[Any] = ()) -> list[str]:
    """The processor's text for each run of adjacent placeholders, with all of a sample's media in one call.

    One call, because what a processor makes of an image may depend on the sample's other media
    (LLaVA-OneVision gives a multi-image sample fewer tokens per image) and adjacent images may share
    their markers (Idefics2). Runs are joined by a special token the processor leaves alone, which
    then splits its output.
    """
    if not runs:
        return []
    tokenizer = processor.tokenizer
    items = [run.replace(IMAGE_PLACEHOLDER, fmt.image_item or "").replace(VIDEO_PLACEHOLDER, fmt.video_item or "")
             .replace(AUDIO_PLACEHOLDER, fmt.audio_item or "") for run in runs]
    mark = next(t for t in (tokenizer.eos_token, tokenizer.pad_token, tokenizer.unk_token)
                if t and not any(t in item for item in items))
    out = _call(processor, [fmt.item_prefix + mark.join(items)], [list(images)], [list(videos)], [list(audios)], fmt)
    text = tokenizer.decode(out["input_ids"][0])
    pieces = text[len(fmt.item_prefix):].split(mark) if text.startswith(fmt.item_prefix) else text.split(mark)
    if len(pieces) != len(runs):
        raise ValueError(f"the processor's output does not split into {len(runs)} media runs at {mark!r}")
    return pieces


def batch_inputs(processor: Any, fmt: MediaFormat, images: Sequence[Sequence[Any]], videos: Sequence[Sequence[Clip]],
                 batch_ids: Sequence[Sequence[int]], audios: Sequence[Sequence[Any]] | None = None) -> dict[str, Any]:
    """The processor's outputs for the batch's media (one list per sample) that ``forward`` takes."""
    audios = audios or [[] for _ in images]
    texts = [(fmt.audio_item or "") * len(audio_group) + (fmt.image_item or "") * len(image_group)
             + (fmt.video_item or "") * len(video_group)
             for image_group, video_group, audio_group in zip(images, videos, audios, strict=True)]
    if not any(texts):
        return {}
    out = _call(processor, texts, images, videos, audios, fmt)
    inputs = {key: value for key, value in out.items() if key in fmt.batch_keys}
    if "token_type_ids" in inputs:
        inputs["token_type_ids"] = [[fmt.token_types.get(t, 0) for t in ids] for ids in batch_ids]
    positional = [key for key in POSITIONAL_KEYS if key in inputs]
    if positional:
        again = _call(processor, [processor.tokenizer.decode(ids) for ids in batch_ids], images, videos, audios, fmt)
        for row, ids in zip(again["input_ids"].tolist(), batch_ids, strict=True):
            if row[:len(ids)] != list(ids):
                raise ValueError("the processor tokenizes the batch's text differently: cannot lay "
                                 f"{positional} over it")
        inputs.update({key: again[key] for key in positional})
    return inputs


def per_sample(items: Sequence[Any], counts: Sequence[int]) -> list[list[Any]]:
    """A flat media list split into one list per sample."""
    out, start = [], 0
    for count in counts:
        out.append(list(items[start:start + count]))
        start += count
    return out

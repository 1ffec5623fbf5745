"""Training samples as the model's processor encodes them, labels on the final assistant turn only.

The contract smoke (``hooks.smoke.contract``) trains on these, and the memory check and the tests
encode the same samples, so the encoding lives in the data stage rather than in the smoke: records
in MindSpeed-MM's ``huggingface`` format (or a built-in set of solid-colour images) become chat
messages, and the messages become a batch through the processor's chat template, a family's own
prompt format (``PROMPT_FORMAT_ENCODERS``: models without a chat template that build the training
text themselves), or the convention branch c's dataset plugin reads off the processor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hooks.data import IGNORE_INDEX

# A built-in sample: distinct colours so that answers differ between ranks and steps.
_BUILTIN_COLOURS = [
    ("red", (220, 30, 30)),
    ("green", (30, 200, 60)),
    ("blue", (30, 60, 220)),
    ("yellow", (230, 220, 40)),
    ("purple", (140, 40, 180)),
    ("orange", (240, 140, 20)),
    ("black", (10, 10, 10)),
    ("white", (245, 245, 245)),
]


class SampleError(RuntimeError):
    """A data set or sample that cannot be encoded, reported verbatim as the smoke's error."""


def _fall_back_to_tokenizer_template(processor: Any) -> None:
    """Use the tokenizer's chat template when the processor has none.

    Some processors cannot hold one: ``ChameleonProcessor.__init__`` takes no ``chat_template``,
    so transformers 4.57 drops ``chat_template.jinja`` on load and only the tokenizer keeps it.
    """
    tokenizer = getattr(processor, "tokenizer", None)
    if getattr(processor, "chat_template", None) is None and getattr(tokenizer, "chat_template", None):
        processor.chat_template = tokenizer.chat_template


def media_of(processor: Any) -> tuple[str, ...]:
    """What the processor takes, images and/or audio (``hooks.data.audio``): which built-in samples fit it."""
    from hooks.data.audio import processor_media

    return tuple(processor_media(processor))


def load_samples(data_json: str | None, media_root: str | None, processor: Any = None) -> list[list[dict[str, Any]]]:
    """Conversations in the processor's chat format, from the JSON file or the built-in sample (clips for a model
    that takes audio, at its feature extractor's rate)."""
    from hooks.data.audio import sampling_rate

    media = media_of(processor) if processor is not None else ("image",)
    if data_json is None:
        return builtin_samples(media)
    records = json.loads(Path(data_json).read_text())
    if not isinstance(records, list):
        raise SampleError(f"{data_json} must hold a JSON list of samples")
    root = Path(media_root or Path(data_json).parent)
    rate = sampling_rate(processor) if processor is not None else 16000
    return [to_chat(rec, root, rate) for rec in records]


def builtin_samples(media: tuple[str, ...] = ("image",)) -> list[list[dict[str, Any]]]:
    """Small solid-colour images with one question and a colour-specific answer each; for a model that takes
    audio, tones of four pitches (``hooks.data.sample.demo_audio``) with an answer naming the pitch, and for one
    that takes both, each image paired with a tone."""
    from PIL import Image

    if "audio" in media:
        return _audio_samples("image" in media)
    samples = []
    for colour, rgb in _BUILTIN_COLOURS:
        image = Image.new("RGB", (64, 64), rgb)
        samples.append(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "image": image},
                        {"type": "text", "text": "What colour is this image?"},
                    ],
                },
                {"role": "assistant", "content": [{"type": "text", "text": f"It is {colour}."}]},
            ]
        )
    return samples


def _audio_samples(with_images: bool) -> list[list[dict[str, Any]]]:
    from PIL import Image

    from hooks.data.sample import demo_audio

    samples = []
    for index, (colour, rgb) in enumerate(_BUILTIN_COLOURS):
        wave, heard = demo_audio(index)
        items = [{"type": "audio", "audio": wave}]
        if with_images:
            items.append({"type": "image", "image": Image.new("RGB", (64, 64), rgb)})
            heard += f" The image is {colour}."
        samples.append([{"role": "user", "content": [*items, {"type": "text", "text": "What is this?"}]},
                        {"role": "assistant", "content": [{"type": "text", "text": heard}]}])
    return samples


def to_chat(record: dict[str, Any], media_root: Path, rate: int = 16000) -> list[dict[str, Any]]:
    """MindSpeed-MM ``huggingface`` format -> chat messages, each ``<image>``/``<audio>`` becoming an image item or a
    clip (read with librosa at ``rate``, as the framework reads ``audios``)."""
    import re

    from PIL import Image

    pending = {"<image>": iter([Image.open(media_root / rel).convert("RGB") for rel in record.get("images") or []])}
    if record.get("audios"):
        import librosa

        pending["<audio>"] = iter([librosa.load(str(media_root / rel), sr=rate)[0] for rel in record["audios"]])
    messages = []
    for message in record["messages"]:
        content: list[dict[str, Any]] = []
        for piece in re.split("(<image>|<audio>)", str(message["content"])):
            if piece in ("<image>", "<audio>"):
                item = next(pending.get(piece, iter(())), None)
                if item is None:
                    raise SampleError(f"more {piece} placeholders than {piece[1:-1]}s in sample {record}")
                kind = piece[1:-1]
                content.append({"type": kind, kind: item})
            elif piece:
                content.append({"type": "text", "text": piece})
        messages.append({"role": message["role"], "content": content})
    return messages


def encode(processor: Any, messages: list[dict[str, Any]], folder: Path | None = None) -> dict[str, Any]:
    """Tokenize the conversation; labels supervise only the final assistant turn, pads masked. ``folder``: where
    the processor was loaded from (a processor built by its own template call is loaded again in its training
    mode)."""
    if messages[-1]["role"] != "assistant":
        raise SampleError("each sample must end with an assistant message")
    prompt_format = PROMPT_FORMAT_ENCODERS.get(type(processor).__name__)
    if prompt_format is not None:
        return prompt_format(processor, messages)
    _fall_back_to_tokenizer_template(processor)
    if not getattr(processor, "chat_template", None):
        return _encode_own_convention(processor, messages, folder)
    kwargs = {"tokenize": True, "return_dict": True, "return_tensors": "pt"}
    full = dict(processor.apply_chat_template(messages, **kwargs))
    prompt = processor.apply_chat_template(messages[:-1], add_generation_prompt=True, **kwargs)
    labels = full["input_ids"].clone()
    labels[:, : prompt["input_ids"].shape[1]] = IGNORE_INDEX
    if "attention_mask" in full:
        labels[full["attention_mask"] == 0] = IGNORE_INDEX
    full["labels"] = labels
    return full


def _images_prompt_answer(messages: list[dict[str, Any]]) -> tuple[list[Any], str, str]:
    """Flatten a conversation for prompt-format models: all images, the earlier turns' text, the answer."""
    images = [item["image"] for m in messages for item in m["content"] if item.get("type") == "image"]
    prompt = " ".join(item["text"] for m in messages[:-1] for item in m["content"] if item.get("type") == "text")
    answer = "".join(item["text"] for item in messages[-1]["content"] if item.get("type") == "text")
    return images, prompt.strip(), answer


def _encode_paligemma(processor: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """PaliGemma has no chat template: the text is the prefix, the answer the ``suffix=``.

    The processor then returns the labels (prefix masked) and the ``token_type_ids`` that the
    model needs in training for its bidirectional prefix mask.
    """
    images, prompt, answer = _images_prompt_answer(messages)
    text = processor.image_token * len(images) + prompt
    return dict(processor(text=[text], images=images, suffix=[answer], return_tensors="pt"))


def _encode_got_ocr2(processor: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """GOT-OCR2 has no chat template: it writes its OCR prompt (and image pads) itself; the answer follows."""
    import torch

    images, _, answer = _images_prompt_answer(messages)
    prompt = processor(images=images, multi_page=len(images) > 1, return_tensors="pt")
    tail = processor.tokenizer(answer + processor.message_end_token, add_special_tokens=False, return_tensors="pt")
    input_ids = torch.cat([prompt["input_ids"], tail["input_ids"]], dim=1)
    labels = torch.cat([torch.full_like(prompt["input_ids"], IGNORE_INDEX), tail["input_ids"]], dim=1)
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "pixel_values": prompt["pixel_values"],
        "labels": labels,
    }


def _encode_own_convention(processor: Any, messages: list[dict[str, Any]], folder: Path | None = None
                           ) -> dict[str, Any]:
    """No chat template: the sample as branch c's dataset plugin builds it, in the convention read off the
    processor (``hooks.data.records.sample_format``: its ``suffix=``, or its prompt followed by the answer; its
    own chat-template call on the clips, loaded again from ``folder`` in its training mode: ``template``)."""
    import tempfile

    from hooks.data.records import dataset_runtime, sample_format, template_call

    data = dataset_runtime()
    images, prompt, answer = _images_prompt_answer(messages)
    form = sample_format(processor, folder)
    if form["kind"] != "template":
        return data.build_sample(processor, data.SampleFormat(**form), [("user", prompt), ("assistant", answer)],
                                 images, 1 << 30)
    clips = [item["audio"] for m in messages for item in m["content"] if item.get("type") == "audio"]
    with tempfile.TemporaryDirectory(prefix="msmm-clips-") as tmp:  # the clips go in as files, first in the turn
        return data.build_sample(template_call(processor, form, folder, Path(tmp)), data.SampleFormat(**form),
                                 [("user", prompt), ("assistant", answer)], images, 1 << 30, clips)


# Processors of models without a chat template, by class name: they build the training text themselves.
PROMPT_FORMAT_ENCODERS = {
    "PaliGemmaProcessor": _encode_paligemma,
    "GotOcr2Processor": _encode_got_ocr2,
}

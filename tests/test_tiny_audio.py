"""Tiny audio-capable chat models are sound in plain transformers (tier 1).

Each build is reloaded the way a user loads a release (``AutoProcessor`` + the model class's
``from_pretrained``), one sample is written by the processor's own chat template with one audio item
(one image item for the image-capable ones), and a forward with ``labels=input_ids`` and a backward
must give a finite loss and a finite, non-zero gradient over the tower that encodes the medium (the
towers found by ``hooks.model.modality.tower_medium``). Voxtral's processor takes audio only through
its chat template (the clip as a file), so it has its own test.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

# arch -> (model class, the processor's audio outputs besides the text's: what the forward reads the clip from)
AUDIO = {
    "qwen2_audio": ("Qwen2AudioForConditionalGeneration", {"input_features", "feature_attention_mask"}),
    "phi4_multimodal": ("Phi4MultimodalForCausalLM", {"audio_input_features", "audio_embed_sizes"}),
    "gemma3n": ("Gemma3nForConditionalGeneration", {"input_features", "input_features_mask"}),
}
IMAGE = {
    "phi4_multimodal": {"image_pixel_values", "image_sizes", "image_attention_mask"},
    "gemma3n": {"pixel_values"},
}
TEXT_KEYS = {"input_ids", "attention_mask", "token_type_ids"}


def _load(folder: Path, model_class: str, **processor_kwargs: Any) -> tuple[Any, Any]:
    import torch
    import transformers

    processor = transformers.AutoProcessor.from_pretrained(folder, **processor_kwargs)
    # transformers 4.57 drops a processor's chat template on load when its __init__ does not name the argument
    # (Phi4MultimodalProcessor); the tokenizer keeps it, and the data path falls back to it the same way
    if getattr(processor, "chat_template", None) is None:
        processor.chat_template = getattr(processor.tokenizer, "chat_template", None)
    model = getattr(transformers, model_class).from_pretrained(folder, dtype=torch.float32)
    return processor, model


def _conversation(item: dict[str, Any], answer: str = "A short answer.") -> list[dict[str, Any]]:
    return [{"role": "user", "content": [item, {"type": "text", "text": "What is this?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": answer}]}]


def _train_step(model: Any, batch: Any, tower: str) -> tuple[float, float, list[str]]:
    """Loss, the gradient norm over ``tower``'s parameters, and the tower parameters that got a gradient."""
    from hooks.model.modality import tower_medium

    model.train()
    out = model(**batch, labels=batch["input_ids"])
    out.loss.backward()
    params = [(name, p) for name, p in model.named_parameters() if tower_medium(name) == tower]
    assert params, f"no {tower} tower parameters"
    reached = [name for name, p in params if p.grad is not None and bool(p.grad.abs().sum() > 0)]
    norm = math.sqrt(sum(float(p.grad.float().pow(2).sum()) for _, p in params if p.grad is not None))
    return float(out.loss.detach()), norm, reached


@pytest.mark.parametrize("arch", sorted(AUDIO))
def test_audio_sample_trains_the_audio_tower(tiny_models, arch: str) -> None:
    from hooks.data.sample import SAMPLING_RATE, demo_audio
    from hooks.model.modality import input_medium, tower_medium

    model_class, audio_keys = AUDIO[arch]
    processor, model = _load(tiny_models(arch), model_class)
    text = processor.apply_chat_template(_conversation({"type": "audio"}), tokenize=False)
    batch = processor(text=text, audio=[demo_audio(0)[0]], sampling_rate=SAMPLING_RATE, return_tensors="pt")
    assert set(batch) - TEXT_KEYS == audio_keys
    assert {input_medium(key) for key in audio_keys} == {"audio"}  # what the smoke counts as the clip reaching forward
    loss, norm, reached = _train_step(model, batch, "audio")
    assert math.isfinite(loss) and math.isfinite(norm) and norm > 0, (loss, norm)
    first = next(name for name, _ in model.named_parameters() if tower_medium(name) == "audio")
    assert first in reached, f"the gradient stops before {first}, where the features enter"


@pytest.mark.parametrize("arch", sorted(IMAGE))
def test_image_sample_trains_the_vision_tower(tiny_models, arch: str) -> None:
    from PIL import Image

    processor, model = _load(tiny_models(arch), AUDIO[arch][0])
    text = processor.apply_chat_template(_conversation({"type": "image"}), tokenize=False)
    batch = processor(text=text, images=[Image.new("RGB", (64, 64), (220, 30, 30))], return_tensors="pt")
    assert set(batch) - TEXT_KEYS == IMAGE[arch]
    loss, norm, _ = _train_step(model, batch, "vision")
    assert math.isfinite(loss) and math.isfinite(norm) and norm > 0, (loss, norm)


def test_gemma3n_padded_batch_has_finite_gradients(tiny_models) -> None:
    """Two clips with answers of different lengths: the shorter sample is padded. Random init used to leave the pad
    token's embedding at zero, and AltUp's ``mean(h ** 2) ** 0.5`` has no epsilon: NaN gradients everywhere
    behind a finite loss (hooks.tiny.idefics._gemma3n_pad_row)."""
    import torch

    from hooks.data.sample import SAMPLING_RATE, demo_audio

    processor, model = _load(tiny_models("gemma3n"), AUDIO["gemma3n"][0])
    texts = [processor.apply_chat_template(_conversation({"type": "audio"}, answer), tokenize=False)
             for answer in ("A tone.", "A longer answer, about a tone of one pitch.")]
    batch = processor(text=texts, audio=[demo_audio(0)[0], demo_audio(1)[0]], sampling_rate=SAMPLING_RATE,
                      padding=True, return_tensors="pt")
    assert int((batch["input_ids"] == processor.tokenizer.pad_token_id).sum()) > 0
    out = model(**batch, labels=batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100))
    out.loss.backward()
    assert math.isfinite(float(out.loss.detach()))
    bad = [name for name, p in model.named_parameters()
           if p.grad is not None and not bool(torch.isfinite(p.grad).all())]
    assert not bad, bad[:5]


def test_voxtral_audio_through_its_chat_template(tiny_models, tmp_path: Path) -> None:
    """VoxtralProcessor.__call__ refuses audio: the clip goes in as a file named by a content item and comes out as
    30 s chunks of 3000 mel frames with 375 ``[AUDIO]`` per chunk; mistral_common's default validation refuses a
    conversation ending in an assistant turn, its finetuning mode (chosen at load) writes the answer and ``</s>``."""
    from mistral_common.protocol.instruct.validator import ValidationMode

    from hooks.data.sample import demo_audio, write_wav

    wav = tmp_path / "tone.wav"
    write_wav(wav, demo_audio(0)[0])
    processor, model = _load(tiny_models("voxtral"), "VoxtralForConditionalGeneration", mode=ValidationMode.finetuning)
    batch = processor.apply_chat_template(_conversation({"type": "audio", "path": str(wav)}))
    assert set(batch) - TEXT_KEYS == {"input_features"} and tuple(batch["input_features"].shape) == (1, 128, 3000)
    assert int((batch["input_ids"] == model.config.audio_token_id).sum()) == 375
    assert processor.tokenizer.decode(batch["input_ids"][0, -5:]).endswith("answer.</s>")
    loss, norm, reached = _train_step(model, batch, "audio")
    assert math.isfinite(loss) and math.isfinite(norm) and norm > 0, (loss, norm)
    assert "audio_tower.conv1.weight" in reached

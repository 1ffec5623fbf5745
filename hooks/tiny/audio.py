"""Tiny audio-capable chat models: real transformers classes, real feature extractors, published templates.

Audio towers are Whisper-style encoders over log-mel features; the feature extractor's window is shrunk
(``AUDIO_SECONDS`` instead of 30 s) so that a tiny encoder's fixed input length (``max_source_positions``
times its two convolutions' stride) stays a few hundred frames, and the processor's audio token count
(read off the feature attention mask) still follows the clip's length.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hooks.tiny.common import (
    QWEN2_ADDED_TOKENS,
    TEXT_HIDDEN,
    VISION_DEPTH,
    VISION_FFN,
    VISION_HEADS,
    VISION_HIDDEN,
    TinyParts,
    _qwen_tokenizer,
    text_dims,
)

AUDIO_SECONDS = 4  # the feature extractor's window (30 s in the releases): 400 mel frames, 100 audio positions
SAMPLING_RATE = 16000

# Qwen2-Audio-7B-Instruct's chat template, as transformers' Qwen2AudioProcessor.default_chat_template holds it
# (the processor's own default; read from the installed class, never retyped).


def _whisper_features(mel_bins: int) -> Any:
    """Whisper's log-mel extractor with a short window: ``AUDIO_SECONDS * 100`` frames."""
    import transformers as tf

    return tf.WhisperFeatureExtractor(feature_size=mel_bins, sampling_rate=SAMPLING_RATE, chunk_length=AUDIO_SECONDS,
                                      hop_length=160, n_fft=400, padding_value=0.0, return_attention_mask=True)


def _whisper_encoder(mel_bins: int) -> dict[str, Any]:
    """A two-layer Whisper-style encoder over ``AUDIO_SECONDS`` of features (positions = frames / 2)."""
    return {"num_mel_bins": mel_bins, "encoder_layers": VISION_DEPTH, "encoder_attention_heads": VISION_HEADS,
            "encoder_ffn_dim": VISION_FFN, "d_model": VISION_HIDDEN, "max_source_positions": AUDIO_SECONDS * 50}


def _build_qwen2_audio() -> TinyParts:
    """Qwen2-Audio-Instruct: Whisper encoder (128 mel bins), a linear projector, Qwen2 text; ``<|AUDIO|>`` between
    ``<|audio_bos|>``/``<|audio_eos|>`` is expanded by the processor to the clip's length."""
    import transformers as tf

    template = tf.Qwen2AudioProcessor.default_chat_template.fget(None)
    tokenizer = _qwen_tokenizer(QWEN2_ADDED_TOKENS, template, extra=("<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>"))
    text = {**text_dims(tokenizer), "max_position_embeddings": 4096, "tie_word_embeddings": False,
            "bos_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>"),
            "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
            "pad_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>")}
    config = tf.Qwen2AudioConfig(
        audio_config=_whisper_encoder(128), text_config={"model_type": "qwen2", **text},
        audio_token_index=tokenizer.convert_tokens_to_ids("<|AUDIO|>"), architectures=[
            "Qwen2AudioForConditionalGeneration"])
    config.text_config.hidden_size = TEXT_HIDDEN
    processor = tf.Qwen2AudioProcessor(feature_extractor=_whisper_features(128), tokenizer=tokenizer,
                                       chat_template=template)
    return TinyParts(config, processor, tf.Qwen2AudioForConditionalGeneration)


BUILDERS: dict[str, Callable[[], TinyParts]] = {
    "qwen2_audio": _build_qwen2_audio,
}

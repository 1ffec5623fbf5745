"""Tiny audio-capable chat models: real transformers classes, real feature extractors, published templates.

Qwen2-Audio's tower is a Whisper-style encoder over log-mel features; its feature extractor's window is
shrunk (``AUDIO_SECONDS`` instead of 30 s) so that a tiny encoder's fixed input length
(``max_source_positions`` times its two convolutions' stride) stays a few hundred frames, and the
processor's audio token count (read off the feature attention mask) still follows the clip's length.
Phi-4-multimodal's extractor has no window (its features follow the clip). Voxtral's 30 s chunks are the
processor's own call defaults, not a saved setting, so its tiny encoder keeps the published 1500 positions
(Gemma 3n, in ``hooks.tiny.idefics``, keeps its published 188 soft tokens per clip for the same reason).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hooks.tiny.common import (
    QWEN2_ADDED_TOKENS,
    TEXT_HEADS,
    TEXT_HIDDEN,
    VISION_DEPTH,
    VISION_FFN,
    VISION_HEADS,
    VISION_HIDDEN,
    TinyParts,
    _bpe_tokenizer,
    _qwen_tokenizer,
    _train_bpe,
    joint_preprocessor_config,
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


# Phi-4-multimodal-instruct in transformers' own format, as huggingface/transformers documents it: its converter
# (models/phi4_multimodal/convert_phi4_multimodal_weights_to_hf.py) registers the tokenizer's ``image_token`` and
# ``audio_token`` (200010/200011, the config's defaults), makes <|end|> (200020) the config's second EOS and ties
# the LM head; the integration tests (tests/models/phi4_multimodal/test_modeling_phi4_multimodal.py, on the
# checkpoint's refs/pr/70 revision) write those placeholders as ``<|image|>``/``<|audio|>`` between Phi-4-mini's
# ``<|user|>``/``<|end|>``/``<|assistant|>``. The main branch's remote-code tokenizer_config template reads string
# content only (placeholders typed as ``<|audio_1|>``); the template for content items is the one transformers'
# processor test carries for this checkpoint (tests/models/phi4_multimodal/test_processor_phi4_multimodal.py,
# ``prepare_processor_dict``), used verbatim.
PHI4MM_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>' }}{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' %}"
    "{{ '<|image|>' }}{% elif content['type'] == 'audio' %}{{ '<|audio|>' }}{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}{% endif %}{% endfor %}{% endif %}{% if message['role'] == 'system' and 'tools' in message "
    "and message['tools'] is not none %}{{ '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% endif %}"
    "{{ '<|end|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"
)
# The placeholders first (the release's 200010/200011 follow <|endoftext|> 199999), then the chat tokens.
PHI4MM_SPECIAL_TOKENS = ("<|endoftext|>", "<|image|>", "<|audio|>", "<|assistant|>", "<|end|>", "<|user|>",
                         "<|system|>", "<|tool|>", "<|/tool|>")
# The image processor's token count hard-codes a 16 x 16 grid per crop (``256 + 1 + ... + 16``), i.e. 32 x 32
# patches pooled 2 x 2, as the release's 448 px / 14 px: the tiny tower keeps the grid on 64 px crops of 2 px.
PHI4MM_CROP = 64
PHI4MM_PATCH = 2


def _build_phi4_multimodal() -> TinyParts:
    """Phi-4-multimodal: SigLIP-like vision (HD crops + a global view, 2 x 2 pooled), a conformer audio encoder
    over 80 log-mel bins (8x time reduction: one ``<|audio|>`` per 80 ms), Phi-3-style text with tied embeddings;
    the other settings are ``Phi4MultimodalConfig``'s defaults, which transformers documents as the release's.

    The processor expands one ``<|image|>`` / ``<|audio|>`` per item to the item's token count and hands the model
    ``image_pixel_values``/``image_sizes``/``image_attention_mask`` and ``audio_input_features``/
    ``audio_embed_sizes`` (+ ``audio_attention_mask`` for a batch of several clips). The feature extractor has no
    fixed window (features follow the clip), so nothing is shrunk there. Both towers are reached through
    ``model.embed_tokens_extend`` (``image_embed``, ``audio_embed``); the audio projection for speech next to an
    image (``*_for_vision_speech``) gets no gradient from an audio-only sample, as in the release.
    """
    import transformers as tf

    tokenizer = _bpe_tokenizer(
        tf.GPT2TokenizerFast, PHI4MM_SPECIAL_TOKENS, (), bos_token="<|endoftext|>", eos_token="<|endoftext|>",
        pad_token="<|endoftext|>", unk_token="<|endoftext|>", chat_template=PHI4MM_CHAT_TEMPLATE,
        extra_special_tokens={"image_token": "<|image|>", "audio_token": "<|audio|>"})
    endoftext = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    vision = {"hidden_size": VISION_HIDDEN, "intermediate_size": VISION_FFN, "num_hidden_layers": VISION_DEPTH,
              "num_attention_heads": VISION_HEADS, "image_size": PHI4MM_CROP, "patch_size": PHI4MM_PATCH,
              "crop_size": PHI4MM_CROP, "image_token_id": tokenizer.image_token_id}
    audio = {"hidden_size": VISION_HIDDEN, "intermediate_size": VISION_FFN, "num_blocks": VISION_DEPTH,
             "num_attention_heads": VISION_HEADS, "ext_pw_out_channel": VISION_HIDDEN,
             "depthwise_separable_out_channel": VISION_HIDDEN, "nemo_conv_channels": VISION_HIDDEN,
             "audio_token_id": tokenizer.audio_token_id}
    config = tf.Phi4MultimodalConfig(
        **text_dims(tokenizer), max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=endoftext,
        eos_token_id=[endoftext, tokenizer.convert_tokens_to_ids("<|end|>")], pad_token_id=endoftext,
        vision_config=vision, audio_config=audio, architectures=["Phi4MultimodalForCausalLM"])
    image_processor = tf.Phi4MultimodalImageProcessorFast(
        size={"height": PHI4MM_CROP, "width": PHI4MM_CROP}, patch_size=PHI4MM_PATCH, dynamic_hd=4)
    audio_processor = tf.Phi4MultimodalFeatureExtractor()
    processor = tf.Phi4MultimodalProcessor(image_processor=image_processor, audio_processor=audio_processor,
                                           tokenizer=tokenizer, chat_template=PHI4MM_CHAT_TEMPLATE)
    return TinyParts(config, processor, tf.Phi4MultimodalForCausalLM,
                     finish=joint_preprocessor_config(audio_processor, image_processor))


# Mistral's Tekken split pattern, as its published tekken files carry it (``config.pattern`` of
# mistral_common/data/tekken_240911.json, shipped with the mistral_common package).
TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
    r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
TEKKEN_SPECIAL_SLOTS = 1000  # ids below this are control tokens (``default_num_special_tokens`` there too)
VOXTRAL_AUDIO_RANK = 24  # transformers' VoxtralProcessor hard-codes ``audio_token_id = 24``


def _tekken_special_tokens() -> list[dict[str, Any]]:
    """Control tokens by rank: 0-19 mistral_common's standard table (``Tekkenizer.DEPRECATED_SPECIAL_TOKENS``, what
    a pre-v8 Tekken file without its own list gets), ``[AUDIO]`` at 24 where transformers puts it, and the two more
    that mistral_common's v7 audio encoder requires by name, ``[BEGIN_AUDIO]`` and ``[TRANSCRIBE]``, at 25 and 26.
    The release's list is not readable here; 20-23 and 25-26 are this fixture's choice (20-23 named as
    mistral_common names its filler slots). mistral_common finds every control token by name, so only
    ``[AUDIO]`` has to sit where the release puts it."""
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    table = [{"rank": t["rank"], "token_str": str(t["token_str"]), "is_control": True}
             for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS]
    table += [{"rank": rank, "token_str": Tekkenizer.SPECIAL_TOKEN_TEMPLATE.format(id=rank), "is_control": True}
              for rank in range(len(table), VOXTRAL_AUDIO_RANK)]
    for name in ("[AUDIO]", "[BEGIN_AUDIO]", "[TRANSCRIBE]"):
        table.append({"rank": len(table), "token_str": name, "is_control": True})
    return table


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte-level alphabet (byte -> the printable character a byte-level BPE writes for it), as the
    ``tokenizers`` pre-tokenizer builds it; written out here because transformers 5 dropped its private copy."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return {byte: chr(byte if byte in printable else next(extra)) for byte in range(256)}


def _tekken_file(path: Path) -> None:
    """Write a Tekken tokenizer file (mistral_common's format): the locally trained byte-level BPE as ranked byte
    strings (ranks 0-255 the single bytes, then the merges in training order), the control tokens, a v7 config
    (the version whose instruct tokenizer takes audio and refuses a system prompt next to it, as Voxtral does),
    and the audio section: 16 kHz, 12.5 tokens a second (Whisper's 100 frames, its stride 2, the projector's 4) in
    30 s chunks (the processor pads clips to multiples of 480 000 samples) of 128-bin mel frames, 160/400 hop/window
    (``WhisperFeatureExtractor``'s)."""
    import base64
    import json

    bpe = _train_bpe(TEKKEN_PATTERN)
    to_byte = {char: byte for byte, char in _byte_chars().items()}
    merges = sorted((index, token) for token, index in bpe.get_vocab().items() if len(token) > 1)
    pieces = [bytes([b]) for b in range(256)] + [bytes(to_byte[c] for c in token) for _, token in merges]

    def entry(rank: int, piece: bytes) -> dict[str, Any]:
        try:
            text: str | None = piece.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        return {"rank": rank, "token_bytes": base64.b64encode(piece).decode("ascii"), "token_str": text}

    data = {
        "config": {"pattern": TEKKEN_PATTERN, "num_vocab_tokens": len(pieces),
                   "default_vocab_size": TEKKEN_SPECIAL_SLOTS + len(pieces),
                   "default_num_special_tokens": TEKKEN_SPECIAL_SLOTS, "version": "v7"},
        "vocab": [entry(rank, piece) for rank, piece in enumerate(pieces)],
        "special_tokens": _tekken_special_tokens(),
        "audio": {"sampling_rate": SAMPLING_RATE, "frame_rate": 12.5, "chunk_length_s": 30.0,
                  "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}},
    }
    path.write_text(json.dumps(data, ensure_ascii=False) + "\n", encoding="utf-8")


def _build_voxtral() -> TinyParts:
    """Voxtral (Mini 3B shape): a Whisper encoder over 128 mel bins whose outputs are grouped by 4 into the projector
    (so its ``intermediate_size`` is 4 x hidden), a Llama text model, a MistralCommonTokenizer over ``tekken.json``.

    No window is shrunk: ``VoxtralProcessor`` pads every clip to 30 s and cuts 3000-frame chunks by its own call
    defaults, so the encoder keeps ``max_source_positions`` 1500 (375 ``[AUDIO]`` per chunk). The processor takes
    audio only through ``apply_chat_template`` (content items ``{"type": "audio", "path"|"url"|"base64": ...}``;
    ``__call__`` refuses audio) and returns ``input_ids``, ``attention_mask`` and ``input_features``
    (chunks x 128 x 3000); a conversation ending in an assistant turn needs the tokenizer's finetuning mode
    (``AutoProcessor.from_pretrained(folder, mode=ValidationMode.finetuning)``), mistral_common's default refuses it.
    """
    import tempfile

    import transformers as tf

    work = tempfile.TemporaryDirectory(prefix="tekken-")
    _tekken_file(Path(work.name) / "tekken.json")
    tokenizer = tf.MistralCommonTokenizer(tokenizer_path=Path(work.name) / "tekken.json")
    audio = {"hidden_size": VISION_HIDDEN, "intermediate_size": 4 * VISION_HIDDEN, "num_hidden_layers": VISION_DEPTH,
             "num_attention_heads": VISION_HEADS, "num_mel_bins": 128, "max_source_positions": 1500}
    text = {**text_dims(tokenizer), "head_dim": TEXT_HIDDEN // TEXT_HEADS, "max_position_embeddings": 4096,
            "rope_theta": 100000000.0, "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id}
    config = tf.VoxtralConfig(audio_config=audio, text_config=text, audio_token_id=VOXTRAL_AUDIO_RANK,
                              architectures=["VoxtralForConditionalGeneration"])
    processor = tf.VoxtralProcessor(feature_extractor=tf.WhisperFeatureExtractor(feature_size=128), tokenizer=tokenizer)
    if processor.audio_token != "[AUDIO]":
        raise RuntimeError(f"VoxtralProcessor's audio id now names {processor.audio_token!r}, not [AUDIO]")

    def finish(_folder: Path) -> None:
        work.cleanup()  # the saved folder holds its own copy of tekken.json

    return TinyParts(config, processor, tf.VoxtralForConditionalGeneration, finish=finish)


BUILDERS: dict[str, Callable[[], TinyParts]] = {
    "qwen2_audio": _build_qwen2_audio,
    "phi4_multimodal": _build_phi4_multimodal,
    "voxtral": _build_voxtral,
}

# Voxtral's tokenizer class is MistralCommonTokenizer in transformers 4.57 (MistralCommonBackend, with another
# processor around it, from 5.0 on): built here on 4.57 only; the transformers-5 leg leaves it out.
UNAVAILABLE: frozenset[str] = frozenset(
    () if hasattr(importlib.import_module("transformers"), "MistralCommonTokenizer") else ("voxtral",))

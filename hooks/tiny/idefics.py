"""Tiny builders for the Idefics-like, Mllama and VQ / image-generation VLM families.

Registered in ``hooks.tiny.FAMILY_MODULES``: ``BUILDERS`` maps the architecture key to a
builder that returns ``TinyParts`` (config, processor, model class). The sizes, the BPE
tokenizer and the save/seed logic are shared with ``hooks.tiny``; what lives here is each
family's token layout, processor geometry and the config fields that must agree with it:

* idefics2 / idefics3 / smolvlm: SigLIP-like tower + perceiver resampler (idefics2) or
  pixel-shuffle connector (idefics3, smolvlm) with image splitting into tiles;
* mllama: tiled vision encoder (local + global layers) and a language model whose layer list
  mixes self-attention and cross-attention decoder layers;
* gemma3n: MobileNetV5 (timm) vision tower, conformer audio tower, AltUp / LAuReL text model
  with per-layer embeddings, and a vocabulary partitioned into text / vision / audio ranges;
* chameleon / emu3: the image becomes discrete VQ codes mapped onto BPE tokens (the VQ model
  gets no gradient);
* janus: SigLIP understanding path plus a VQ generation path (no gradient in understanding).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hooks.model.shrink_families import MOBILENETV5_TINY_ARGS, MOBILENETV5_WIDTH, VQ_CHANNELS
from hooks.tiny.common import (
    PATCH,
    TEXT_HEADS,
    TEXT_HIDDEN,
    TEXT_KV_HEADS,
    TEXT_LAYERS,
    TILE,
    VISION_DEPTH,
    VISION_FFN,
    VISION_HEADS,
    VISION_HIDDEN,
    TinyParts,
    _bpe_tokenizer,
    draw_zero_weights,
    joint_preprocessor_config,
    text_dims,
)
from hooks.tiny.core import (
    GEMMA3_CHAT_TEMPLATE,
    GEMMA3_TURN_TOKENS,
)

MEAN_STD = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}


def _text_dims(tokenizer: Any) -> dict[str, Any]:
    """The language-model sizes every family here shares (vocab padded past the tokenizer)."""
    return {
        **text_dims(tokenizer),
        "max_position_embeddings": 4096,
    }


def _special_ids(tokenizer: Any) -> dict[str, int]:
    """bos/eos/pad ids as the tokenizer defines them (config and tokenizer must agree)."""
    return {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }


def _siglip_like_vision() -> dict[str, Any]:
    """Idefics2/3 and SmolVLM towers: SigLIP-shaped, 8 px patches on 32 px tiles."""
    return {
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": TILE,
        "patch_size": PATCH,
    }


# Idefics2 / Idefics3 / SmolVLM --------------------------------------------------------------

# The "User:<image>text<end_of_utterance>\nAssistant: ..." format of the HuggingFaceM4 releases;
# Idefics3 prefixes the Llama 3 BOS, SmolVLM the <|im_start|> BOS (and also renders videos).
_IDEFICS_TURNS = (
    "{% for message in messages %}{{message['role'].capitalize()}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
IDEFICS2_CHAT_TEMPLATE = _IDEFICS_TURNS
IDEFICS3_CHAT_TEMPLATE = "<|begin_of_text|>" + _IDEFICS_TURNS
SMOLVLM_CHAT_TEMPLATE = "<|im_start|>" + _IDEFICS_TURNS.replace(
    "{{ '<image>' }}{% endif %}", "{{ '<image>' }}{% elif line['type'] == 'video' %}{{ '<video>' }}{% endif %}"
).replace("message['role'].capitalize()", "message['role'] | capitalize")
IDEFICS_IMAGE_TOKENS = ("<fake_token_around_image>", "<image>", "<end_of_utterance>")
# Idefics3/SmolVLM name the tiles of a split image: <global-img> and <row_i_col_j> (6 x 6 at most).
IDEFICS3_TILE_TOKENS = ("<global-img>", *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)))
# Tokens per 32 px tile after the pixel shuffle (scale factor 2): (32 / 8)^2 / 2^2.
IDEFICS3_SCALE = 2
IDEFICS3_TILE_TOKENS_N = (TILE // PATCH) ** 2 // IDEFICS3_SCALE**2


def _build_idefics2() -> TinyParts:
    """Idefics2: SigLIP-like tower, perceiver resampler to a fixed latent count, Mistral text."""
    import transformers as tf

    tokenizer = _bpe_tokenizer(
        tf.LlamaTokenizerFast,
        ("<unk>", "<s>", "</s>", *IDEFICS_IMAGE_TOKENS),
        (),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<unk>",
        add_bos_token=True,
        add_eos_token=False,
        legacy=False,
        additional_special_tokens=list(IDEFICS_IMAGE_TOKENS),
        chat_template=IDEFICS2_CHAT_TEMPLATE,
    )
    latents = 4  # the perceiver's output length is the number of <image> tokens per image
    text = {"model_type": "mistral", **_text_dims(tokenizer), **_special_ids(tokenizer), "sliding_window": 4096,
            "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    perceiver = {
        "hidden_size": TEXT_HIDDEN,
        "rms_norm_eps": 1e-5,
        "resampler_n_latents": latents,
        "resampler_depth": 2,
        "resampler_n_heads": TEXT_HEADS,
        "resampler_head_dim": TEXT_HIDDEN // TEXT_HEADS,
        "num_key_value_heads": TEXT_KV_HEADS,
    }
    config = tf.Idefics2Config(
        text_config=text,
        vision_config=_siglip_like_vision(),
        perceiver_config=perceiver,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=False,
        architectures=["Idefics2ForConditionalGeneration"],
    )
    image_processor = tf.Idefics2ImageProcessor(
        size={"shortest_edge": TILE, "longest_edge": TILE}, do_image_splitting=False, **MEAN_STD
    )
    processor = tf.Idefics2Processor(
        image_processor=image_processor, tokenizer=tokenizer, image_seq_len=latents,
        chat_template=IDEFICS2_CHAT_TEMPLATE,
    )
    return TinyParts(config, processor, tf.Idefics2ForConditionalGeneration)


def _idefics3_sizes() -> dict[str, Any]:
    """A 64 px image is split into 2 x 2 tiles of 32 px plus one global tile."""
    return {"size": {"longest_edge": 2 * TILE}, "max_image_size": {"longest_edge": TILE}, "do_image_splitting": True}


def _idefics3_like_config(config_cls: type, architecture: str, tokenizer: Any, rope_theta: float) -> Any:
    """Idefics3 and SmolVLM share the design: SigLIP-like tower, pixel-shuffle connector, Llama text."""
    ids = _special_ids(tokenizer)
    text = {"model_type": "llama", **_text_dims(tokenizer), **ids, "rope_theta": rope_theta,
            "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    return config_cls(
        text_config=text,
        vision_config=_siglip_like_vision(),
        scale_factor=IDEFICS3_SCALE,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        pad_token_id=ids["pad_token_id"],
        tie_word_embeddings=False,
        architectures=[architecture],
    )


def _build_idefics3() -> TinyParts:
    """Idefics3: SigLIP-like tower, pixel-shuffle connector, Llama 3 text, tiles with row/col tags."""
    import transformers as tf

    special = ("<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", *IDEFICS_IMAGE_TOKENS)
    tokenizer = _bpe_tokenizer(
        tf.PreTrainedTokenizerFast,
        special,
        IDEFICS3_TILE_TOKENS,
        bos_token="<|begin_of_text|>",
        eos_token="<end_of_utterance>",
        pad_token="<|reserved_special_token_0|>",
        additional_special_tokens=list(IDEFICS_IMAGE_TOKENS),
        model_input_names=["input_ids", "attention_mask"],
        chat_template=IDEFICS3_CHAT_TEMPLATE,
    )
    config = _idefics3_like_config(tf.Idefics3Config, "Idefics3ForConditionalGeneration", tokenizer, 500000.0)
    processor = tf.Idefics3Processor(
        image_processor=tf.Idefics3ImageProcessor(**_idefics3_sizes(), **MEAN_STD),
        tokenizer=tokenizer,
        image_seq_len=IDEFICS3_TILE_TOKENS_N,
        chat_template=IDEFICS3_CHAT_TEMPLATE,
    )
    return TinyParts(config, processor, tf.Idefics3ForConditionalGeneration)


def _build_smolvlm() -> TinyParts:
    """SmolVLM(2): the Idefics3 design with a SmolLM2 (Llama) text model and video input."""
    import transformers as tf

    special = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", *IDEFICS_IMAGE_TOKENS, "<video>")
    tokenizer = _bpe_tokenizer(
        tf.GPT2TokenizerFast,
        special,
        IDEFICS3_TILE_TOKENS,
        unk_token="<|endoftext|>",
        bos_token="<|im_start|>",
        eos_token="<end_of_utterance>",
        pad_token="<|im_end|>",
        additional_special_tokens=[*IDEFICS_IMAGE_TOKENS, "<video>"],
        chat_template=SMOLVLM_CHAT_TEMPLATE,
    )
    config = _idefics3_like_config(tf.SmolVLMConfig, "SmolVLMForConditionalGeneration", tokenizer, 100000.0)
    sizes = _idefics3_sizes()
    video_processor = tf.SmolVLMVideoProcessor(
        size=dict(sizes["max_image_size"]),
        max_image_size=dict(sizes["max_image_size"]),
        video_sampling={"fps": 1, "max_frames": 4, "video_size": dict(sizes["max_image_size"])},
        **MEAN_STD,
    )
    processor = tf.SmolVLMProcessor(
        image_processor=tf.SmolVLMImageProcessor(**sizes, **MEAN_STD),
        tokenizer=tokenizer,
        video_processor=video_processor,
        image_seq_len=IDEFICS3_TILE_TOKENS_N,
        chat_template=SMOLVLM_CHAT_TEMPLATE,
    )
    return TinyParts(config, processor, tf.SmolVLMForConditionalGeneration)


# Mllama (Llama 3.2 Vision) ------------------------------------------------------------------

# Llama 3.2 Vision Instruct's format, without the tool-calling and date preamble branches.
MLLAMA_CHAT_TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] | trim }}{%- else %}"
    "{%- for content in message['content'] %}{%- if content['type'] == 'image' %}{{- '<|image|>' }}"
    "{%- elif content['type'] == 'text' %}{{- content['text'] | trim }}{%- endif %}{%- endfor %}{%- endif %}"
    "{{- '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
MLLAMA_SPECIAL_TOKENS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
    "<|finetune_right_pad_id|>",
    "<|image|>",
)
# The released rotary scaling of Llama 3.1/3.2; Mllama's rotary embedding reads rope_scaling["rope_type"]
# unconditionally, so a config without rope_scaling does not even build.
LLAMA3_ROPE_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def _build_mllama() -> TinyParts:
    """Mllama: tiled vision encoder (local + gated global layers), self- and cross-attention text layers.

    The image reaches the text model only through the cross-attention layers (one ``<|image|>``
    token per image plus a cross-attention mask), so the two layer kinds live in one ``layers`` list.
    Unlike the release (image token id == vocab_size, an extra embedding row), the tiny keeps
    ``<|image|>`` inside the LM head's vocabulary so ``labels=input_ids`` stays valid.
    """
    import transformers as tf

    tokenizer = _bpe_tokenizer(
        tf.PreTrainedTokenizerFast,
        MLLAMA_SPECIAL_TOKENS,
        (),
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|finetune_right_pad_id|>",
        model_input_names=["input_ids", "attention_mask"],
        chat_template=MLLAMA_CHAT_TEMPLATE,
    )
    text = {
        **_text_dims(tokenizer),
        **_special_ids(tokenizer),
        "cross_attention_layers": [TEXT_LAYERS - 1],
        "max_position_embeddings": 131072,  # llama3 rope scaling needs more than its original 8192
        "rope_theta": 500000.0,
        "rope_scaling": dict(LLAMA3_ROPE_SCALING),
        "tie_word_embeddings": False,
    }
    taps = list(range(VISION_DEPTH))
    vision = {
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_global_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": TILE,
        "patch_size": PATCH,
        "max_num_tiles": 4,
        "intermediate_layers_indices": taps,
        # the projector reads the last hidden state concatenated with every tapped one
        "vision_output_dim": VISION_HIDDEN * (len(taps) + 1),
    }
    config = tf.MllamaConfig(
        text_config=text,
        vision_config=vision,
        image_token_index=tokenizer.convert_tokens_to_ids("<|image|>"),
        architectures=["MllamaForConditionalGeneration"],
    )
    image_processor = tf.MllamaImageProcessor(size={"height": TILE, "width": TILE}, max_image_tiles=4, **MEAN_STD)
    processor = tf.MllamaProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                   chat_template=MLLAMA_CHAT_TEMPLATE)
    # The cross-attention layers' tanh gates start at 0 (the image reaches the text through them only)
    return TinyParts(config, processor, tf.MllamaForConditionalGeneration,
                     finish=draw_zero_weights(("cross_attn_attn_gate", "cross_attn_mlp_gate"), 0.02))


# Gemma 3n ------------------------------------------------------------------------------------

# Character for character the template transformers' Gemma 3n converter writes into the instruction-tuned
# releases (``_CHAT_TEMPLATE`` in models/gemma3n/convert_gemma3n_weights.py, huggingface/transformers):
# Gemma 3's, with ``{"type": "audio"}`` and ``{"type": "image"}`` items as their soft tokens.
GEMMA3N_CHAT_TEMPLATE = GEMMA3_CHAT_TEMPLATE.replace(
    "{%- if item['type'] == 'image' -%}\n                {{ '<start_of_image>' }}",
    "{%- if item['type'] == 'audio' -%}\n                {{ '<audio_soft_token>' }}\n"
    "            {%- elif item['type'] == 'image' -%}\n                {{ '<image_soft_token>' }}",
)
GEMMA3N_MM_TOKENS = {
    "boi_token": "<start_of_image>",
    "eoi_token": "<end_of_image>",
    "image_token": "<image_soft_token>",
    "boa_token": "<start_of_audio>",
    "eoa_token": "<end_of_audio>",
    "audio_token": "<audio_soft_token>",
}
# Gemma 3n's vocabulary: text ids, then 128 vision ids starting at <end_of_image> (the image soft token
# is the second), then 128 audio ids starting at <end_of_audio>; the embedders look ids up by range.
GEMMA3N_MM_VOCAB = 128
GEMMA3N_IMAGE = 64  # stride 32 -> 2 x 2 grid; the fusion adapter pools its 4 x 4 input to 2 x 2 = 4 tokens


def _gemma3n_tokenizer() -> Any:
    """GemmaTokenizerFast whose special-token ids follow the text / vision / audio id ranges."""
    import transformers as tf

    mm = GEMMA3N_MM_TOKENS
    gap = tuple(f"<unused{i}>" for i in range(GEMMA3N_MM_VOCAB - 2))
    special = (*GEMMA3_TURN_TOKENS, mm["boi_token"], mm["boa_token"], mm["eoi_token"], mm["image_token"], *gap,
               mm["eoa_token"], mm["audio_token"])
    return _bpe_tokenizer(
        tf.GemmaTokenizerFast,
        special,
        (),
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        add_bos_token=True,
        add_eos_token=False,
        extra_special_tokens=dict(mm),
        chat_template=GEMMA3N_CHAT_TEMPLATE,
    )


def _gemma3n_pad_row(pad_id: int, std: float) -> Callable[[Path], None]:
    """A ``finish`` that gives the pad token's text embedding random values like every other row.

    Random init zeroes the ``padding_idx`` row of ``embed_tokens`` (``nn.Embedding`` and
    ``_init_weights`` both do), and Gemma 3n's AltUp rescales each position by
    ``mean(h ** 2) ** 0.5`` with no epsilon (``Gemma3nTextModel.forward``, at the first and the last
    layer): at a pad position that is ``sqrt(0)``, whose derivative is infinite, so any padded batch
    (two samples of different lengths) gave NaN gradients everywhere while its loss stayed finite.
    A release's pad row holds trained values; here it holds a draw from the init distribution
    (fixed seed). The row still gets no gradient (``padding_idx``), as in the release.
    """

    def finish(folder: Path) -> None:
        import torch
        from safetensors.torch import load_file, save_file

        path = folder / "model.safetensors"
        weights = load_file(path)
        table = weights["model.language_model.embed_tokens.weight"]
        draw = torch.randn(table.shape[1], generator=torch.Generator().manual_seed(pad_id)) * std
        table[pad_id] = draw.to(table.dtype)
        save_file(weights, path, metadata={"format": "pt"})

    return finish


def _build_gemma3n() -> TinyParts:
    """Gemma 3n: MobileNetV5 (timm) vision, conformer audio, AltUp/LAuReL text with per-layer inputs.

    The audio tower and the vision/audio hard-token embedders get no gradient from image+text
    batches. KV sharing is off: with two layers no earlier layer of the same attention type exists.
    The chat template, the tokenizer's named tokens and the joint preprocessor config follow
    transformers' ``convert_gemma3n_weights.py`` (the release's converter). The audio window is a call
    default of ``Gemma3nAudioFeatureExtractor`` (30 s, ``max_length=480_000``) that no saved setting
    changes, so the processor keeps the published 188 audio soft tokens per clip; the encoder's own
    output (1/16 of the mel frames: 10 for a 1.5 s clip) is padded up to them by the model.
    """
    import transformers as tf

    tokenizer = _gemma3n_tokenizer()
    ids = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in GEMMA3N_MM_TOKENS.items()}
    text_vocab = ids["eoi_token"]  # first id of the vision range
    text = {
        **_text_dims(tokenizer),
        **_special_ids(tokenizer),
        "vocab_size": text_vocab + 2 * GEMMA3N_MM_VOCAB,
        "vocab_size_per_layer_input": text_vocab,
        "hidden_size_per_layer_input": 16,
        "head_dim": TEXT_HIDDEN // TEXT_HEADS,
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 512,
        "num_kv_shared_layers": 0,
        "laurel_rank": 8,
        "altup_num_inputs": 4,
        "activation_sparsity_pattern": [0.95, 0.0],
        "max_position_embeddings": 4096,
    }
    vision = {
        "architecture": "mobilenetv5_300m_enc",
        "hidden_size": MOBILENETV5_WIDTH,  # fixed by timm; the config must agree
        "vocab_size": GEMMA3N_MM_VOCAB,
        "vocab_offset": text_vocab,
        # released blocks at 1/16 width (hooks.model.shrink_families); the fusion adapter's 2 x 2 grid = 4 tokens
        "model_args": {**MOBILENETV5_TINY_ARGS, "msfa_output_resolution": 2},
    }
    audio = {
        "hidden_size": VISION_HIDDEN,
        "vocab_size": GEMMA3N_MM_VOCAB,
        "vocab_offset": text_vocab + GEMMA3N_MM_VOCAB,
        "conf_num_attention_heads": VISION_HEADS,
        "conf_num_hidden_layers": VISION_DEPTH,
        "sscp_conv_channel_size": [16, 8],
    }
    image_tokens = 4
    config = tf.Gemma3nConfig(
        text_config=text,
        vision_config=vision,
        audio_config=audio,
        vision_soft_tokens_per_image=image_tokens,
        audio_soft_tokens_per_image=188,
        **{f"{name.removesuffix('_token')}_token_id": value for name, value in ids.items()},
        architectures=["Gemma3nForConditionalGeneration"],
    )
    image_processor = tf.SiglipImageProcessorFast(
        size={"height": GEMMA3N_IMAGE, "width": GEMMA3N_IMAGE}, image_mean=[0.0] * 3, image_std=[1.0] * 3
    )
    feature_extractor = tf.Gemma3nAudioFeatureExtractor()
    processor = tf.Gemma3nProcessor(
        feature_extractor=feature_extractor,
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_length=image_tokens,
        audio_seq_length=188,
        chat_template=GEMMA3N_CHAT_TEMPLATE,
    )
    joint = joint_preprocessor_config(feature_extractor, image_processor)
    pad_row = _gemma3n_pad_row(tokenizer.pad_token_id, config.text_config.initializer_range)

    def finish(folder: Path) -> None:
        joint(folder)
        pad_row(folder)

    return TinyParts(config, processor, tf.Gemma3nForConditionalGeneration, finish=finish)


# Chameleon / Emu3: images become discrete VQ codes, looked up as ordinary BPE tokens -----------

def _user_assistant_template(image: str) -> str:
    """The llava-1.5-like "USER: <image>question ASSISTANT: answer" template of the chameleon-7b and
    Emu3-Chat-hf releases, with the family's image placeholder."""
    return (
        "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': ' }}"
        "{% endif %}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
        "{{ '" + image + "' }}{% endfor %}"
        "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
        "{{ content['text'] + ' ' }}{% endfor %}{% endfor %}"
        "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
    )


CHAMELEON_CHAT_TEMPLATE = _user_assistant_template("<image>\\n")
EMU3_CHAT_TEMPLATE = _user_assistant_template("<image>")
# VQ codebook entries (BPE tokens the LM reads and predicts) and VQ downsampling: 32 px -> 4 x 4 codes.
VQ_CODES = 64
VQ_IMAGE = TILE


def _chameleon_code_token(code: int) -> str:
    """Chameleon names code ``c`` "IMGIMG" + its decimal digits spelled A..J + "Z"."""
    return "IMGIMG" + "".join(chr(ord("A") + int(d)) for d in str(code)) + "Z"


def _build_chameleon() -> TinyParts:
    """Chameleon: early-fusion LM; a VQGAN turns the image into codes mapped onto BPE tokens."""
    import transformers as tf

    special = ("<unk>", "<s>", "</s>", "<pad>", "<reserved08706>", "<image>", "<racm3:break>", "<eoss>")
    tokenizer = _bpe_tokenizer(
        tf.LlamaTokenizerFast,
        special,
        tuple(_chameleon_code_token(c) for c in range(VQ_CODES)),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        sep_token="<reserved08706>",
        add_bos_token=True,
        add_eos_token=False,
        legacy=False,
        chat_template=CHAMELEON_CHAT_TEMPLATE,
    )
    vq = {
        "embed_dim": 8,
        "num_embeddings": VQ_CODES,
        "latent_channels": VQ_CHANNELS,
        "resolution": VQ_IMAGE,
        "base_channels": VQ_CHANNELS,
        "channel_multiplier": [1, 1, 1, 2],  # 3 downsamplings: 32 px -> 4 x 4 codes
        "num_res_blocks": 2,
    }
    config = tf.ChameleonConfig(
        **_text_dims(tokenizer),
        **_special_ids(tokenizer),
        vq_config=vq,
        vocabulary_map=tokenizer.get_vocab(),
        tie_word_embeddings=False,
        architectures=["ChameleonForConditionalGeneration"],
    )
    image_processor = tf.ChameleonImageProcessor(
        size={"shortest_edge": VQ_IMAGE}, crop_size={"height": VQ_IMAGE, "width": VQ_IMAGE}
    )
    codes = (VQ_IMAGE // 8) ** 2
    processor = tf.ChameleonProcessor(image_processor=image_processor, tokenizer=tokenizer, image_seq_length=codes)
    processor.chat_template = CHAMELEON_CHAT_TEMPLATE  # its __init__ takes no chat_template
    return TinyParts(config, processor, tf.ChameleonForConditionalGeneration)


EMU3_MM_TOKENS = {
    "image_token": "<image>",
    "boi_token": "<|image start|>",
    "eoi_token": "<|image end|>",
    "image_wrapper_token": "<|image token|>",
    "eof_token": "<|extra_201|>",
}


def _build_emu3() -> TinyParts:
    """Emu3: Llama-like LM over text + visual-token BPE; a 3-D (temporal) VQ-VAE tokenizes the image.

    transformers 4.57.1's ``Emu3ForConditionalGeneration.forward`` does not pass ``pixel_values`` /
    ``image_sizes`` on to ``Emu3Model`` (fixed upstream in huggingface/transformers#47948): the
    model trains, but the image never reaches it.
    """
    import transformers as tf

    special = ("<|endoftext|>", "<|extra_203|>", "<|extra_204|>", "<|extra_200|>", *EMU3_MM_TOKENS.values())
    tokenizer = _bpe_tokenizer(
        tf.GPT2TokenizerFast,
        special,
        tuple(f"<|visual token {c:06d}|>" for c in range(VQ_CODES)),
        unk_token="<|endoftext|>",
        bos_token="<|extra_203|>",
        eos_token="<|extra_204|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=dict(EMU3_MM_TOKENS),
        chat_template=EMU3_CHAT_TEMPLATE,
    )
    text = {**_text_dims(tokenizer), **_special_ids(tokenizer), "rope_theta": 1000000.0, "attention_dropout": 0.0}
    vq = {
        "codebook_size": VQ_CODES,
        "embed_dim": 4,
        "latent_channels": 4,
        "base_channels": VQ_CHANNELS,
        "channel_multiplier": [1, 1, 1, 1],  # 3 downsamplings = the processor's fixed factor 8
        "num_res_blocks": 2,
        "attn_resolutions": [],
        "temporal_downsample_factor": 4,
        "hidden_size": VQ_CHANNELS,
        "num_attention_heads": 1,
    }
    config = tf.Emu3Config(
        text_config=text,
        vq_config=vq,
        vocabulary_map=tokenizer.get_vocab(),
        architectures=["Emu3ForConditionalGeneration"],
    )
    pixels = VQ_IMAGE * VQ_IMAGE
    image_processor = tf.Emu3ImageProcessor(min_pixels=pixels, max_pixels=pixels, spatial_factor=8)
    processor = tf.Emu3Processor(image_processor=image_processor, tokenizer=tokenizer,
                                 chat_template=EMU3_CHAT_TEMPLATE)
    return TinyParts(config, processor, tf.Emu3ForConditionalGeneration)


# Janus: SigLIP understanding path + VQ generation path --------------------------------------

# Janus-Pro's "<|User|>: ...\n\n<|Assistant|>: ...<｜end▁of▁sentence｜>" format (simplified).
JANUS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
JANUS_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|User|>: ' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|Assistant|>: ' }}"
    "{% else %}{{ message['role'].capitalize() + ': ' }}{% endif %}"
    "{% for content in message['content'] %}{% if content['type'] == 'image' %}{{ '<image_placeholder>\\n' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}"
    "{% if message['role'] == 'assistant' %}{{ '" + JANUS_EOS + "' }}{% else %}{{ '\\n\\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|Assistant|>:' }}{% endif %}"
)
JANUS_MM_TOKENS = {"image_token": "<image_placeholder>", "boi_token": "<begin_of_image>", "eoi_token": "<end_of_image>"}
# JanusProcessor hard-codes 576 image tokens (24 x 24 patches); a 96 px image in 4 px patches gives that.
JANUS_IMAGE = 96
JANUS_PATCH = 4


def _build_janus() -> TinyParts:
    """Janus(-Pro): SigLIP + aligner for understanding; VQ-VAE, generation embeddings and head for images."""
    import transformers as tf

    bos, pad = "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5c\u2581pad\u2581\uff5c>"
    special = (bos, JANUS_EOS, pad, *JANUS_MM_TOKENS.values(), "<|User|>", "<|Assistant|>")
    tokenizer = _bpe_tokenizer(
        tf.LlamaTokenizerFast,
        special,
        (),
        bos_token=bos,
        eos_token=JANUS_EOS,
        pad_token=pad,
        unk_token=None,
        add_bos_token=True,
        add_eos_token=False,
        legacy=False,
        extra_special_tokens=dict(JANUS_MM_TOKENS),
        chat_template=JANUS_CHAT_TEMPLATE,
    )
    text = {"model_type": "llama", **_text_dims(tokenizer), **_special_ids(tokenizer), "tie_word_embeddings": False}
    vision = {
        "hidden_size": VISION_HIDDEN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "mlp_ratio": VISION_FFN / VISION_HIDDEN,
        "image_size": JANUS_IMAGE,
        "patch_size": JANUS_PATCH,
        "projection_dim": TEXT_HIDDEN,
        "depth": 2,
        "num_image_tokens": (JANUS_IMAGE // JANUS_PATCH) ** 2,
    }
    vq = {
        "embed_dim": 8,
        "num_embeddings": VQ_CODES,
        "latent_channels": VQ_CHANNELS,
        "base_channels": VQ_CHANNELS,
        "channel_multiplier": [1, 1, 2],
        "num_res_blocks": 2,
        "projection_dim": TEXT_HIDDEN,
        "image_token_embed_dim": TEXT_HIDDEN,
        "num_hidden_layers": 2,
    }
    config = tf.JanusConfig(
        text_config=text,
        vision_config=vision,
        vq_config=vq,
        image_token_id=tokenizer.convert_tokens_to_ids(JANUS_MM_TOKENS["image_token"]),
        architectures=["JanusForConditionalGeneration"],
    )
    image_processor = tf.JanusImageProcessor(size={"height": JANUS_IMAGE, "width": JANUS_IMAGE}, **MEAN_STD)
    processor = tf.JanusProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                  chat_template=JANUS_CHAT_TEMPLATE)
    return TinyParts(config, processor, tf.JanusForConditionalGeneration)


BUILDERS: dict[str, Callable[[], TinyParts]] = {
    "idefics2": _build_idefics2,
    "idefics3": _build_idefics3,
    "smolvlm": _build_smolvlm,
    "mllama": _build_mllama,
    "gemma3n": _build_gemma3n,
    "chameleon": _build_chameleon,
    "emu3": _build_emu3,
    "janus": _build_janus,
}

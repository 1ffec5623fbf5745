"""Tiny builders for the LLaVA-like families: a vision tower, a projector and a decoder LM.

Registered through ``hooks.tiny.FAMILY_MODULES``; each builder returns ``TinyParts`` built
from the real transformers classes with the shared tiny sizes of ``hooks.tiny``. What
differs per family is how an image becomes tokens, and the builders keep the
processor and the model in agreement on that count:

* CLIP towers (llava, llava_next, llava_next_video) add a CLS token that the "default"
  feature strategy drops: the processor gets ``num_additional_image_tokens=1``. As released,
  they read the second-to-last layer, so the last CLIP layer never gets a gradient.
* Pixtral towers (pixtral, mistral3) emit ``[IMG]`` rows closed by ``[IMG_BREAK]`` /
  ``[IMG_END]``; mistral3 merges 2x2 patches.
* Pixel-shuffle projectors (aya_vision, cohere2_vision, lfm2_vl) divide the patch grid by
  the downsample factor; their processors count tokens per tile from the same numbers.
* paligemma prepends a fixed number of image tokens (``image_seq_length``) and has no
  chat template: training text comes as ``prefix`` + ``suffix=`` (the labels).
* got_ocr2 writes its own OCR prompt with 256 pads per page; its SAM tower therefore keeps
  the released 1024 px / 16 px geometry (a tiny width keeps it cheap).
* perception_lm's tower is a timm model (``timm`` must be installed).
* lfm2_vl's config is saved with model_type ``lfm2_vl`` (the Auto key), not the ``lfm2-vl``
  that transformers 4.57.1's config class would write and could not reload.

Chat templates follow the released checkpoints' turn markup and media placeholders
(simplified where the release carries tool-use or system-prompt boilerplate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hooks.tiny.common import (
    CLIP_MEAN_STD,
    HALF,
    PATCH,
    QWEN2_ADDED_TOKENS,
    QWEN_SPECIAL_TOKENS,
    TEXT_FFN,
    TEXT_HEADS,
    TEXT_HIDDEN,
    TILE,
    VISION_DEPTH,
    VISION_FFN,
    VISION_HEADS,
    VISION_HIDDEN,
    TinyParts,
    _bpe_tokenizer,
    _padded_vocab,
    _qwen2_text,
    _siglip_vision,
    text_dims,
)

LLAMA_SPECIAL = ("<unk>", "<s>", "</s>")


def _decoder_text(tokenizer: Any, model_type: str, **extra: Any) -> dict[str, Any]:
    """A plain decoder sub-config (llama / mistral / qwen2 / cohere2 / gemma ...) at the tiny sizes."""
    text = {
        "model_type": model_type,
        **text_dims(tokenizer),
        "head_dim": TEXT_HIDDEN // TEXT_HEADS,
        "max_position_embeddings": 4096,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "tie_word_embeddings": False,
    }
    text.update(extra)
    return text


def _clip_vision() -> dict[str, Any]:
    """A CLIP tower on 32 px tiles of 8 px patches: 16 patch tokens plus CLS."""
    return {
        "model_type": "clip_vision_model",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": TILE,
        "patch_size": PATCH,
        "projection_dim": VISION_HIDDEN,
    }


def _llama_tokenizer(extra: tuple[str, ...], chat_template: str, **kwargs: Any) -> Any:
    """A LlamaTokenizerFast with <unk>/<s>/</s> (BOS added by the tokenizer) plus ``extra`` specials."""
    import transformers as tf

    kwargs.setdefault("pad_token", "<unk>")
    return _bpe_tokenizer(
        tf.LlamaTokenizerFast,
        (*LLAMA_SPECIAL, *extra),
        (),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        add_bos_token=True,
        add_eos_token=False,
        legacy=False,
        chat_template=chat_template,
        **kwargs,
    )


# LLaVA 1.5 / LLaVA-NeXT / LLaVA-NeXT-Video (CLIP + Llama/Mistral) ---------------------------

# Chat template of llava-hf/llava-1.5-*-hf (Vicuna turns, images before the text).
LLAVA_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}"
    "{% endif %}{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\n' }}"
    "{% endfor %}{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] + ' '}}"
    "{% endfor %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)
# Chat template of llava-hf/llava-v1.6-mistral-7b-hf, including its literal "<\\s>" turn end.
LLAVA_NEXT_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<<SYS>>\n' + message['content'][0]['text'] + '\n<</SYS>>\n\n' }}"
    "{% elif message['role'] == 'user' %}{{ '[INST] ' }}{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\n' }}"
    "{% endfor %}{# Render all text next #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] }}"
    "{% endfor %}{{' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + message['content'][0]['text'] + '<\\\\s> '}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)
# Chat template of llava-hf/LLaVA-NeXT-Video-7B-hf (Vicuna turns, images then videos then text).
LLAVA_NEXT_VIDEO_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}"
    "{% endif %}{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\n' }}"
    "{% endfor %}{# Render all video then #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}{{ '<video>\n' }}"
    "{% endfor %}{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] + ' '}}"
    "{% endfor %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)
# AnyRes grid: a 64x64 picture becomes one base tile plus a 2x2 grid of 32 px tiles.
LLAVA_PINPOINTS = [[TILE, 2 * TILE], [2 * TILE, TILE], [2 * TILE, 2 * TILE]]


def _clip_image_kwargs() -> dict[str, Any]:
    """CLIP preprocessing at the tiny tile size (resize shortest edge, centre crop)."""
    return {"size": {"shortest_edge": TILE}, "crop_size": {"height": TILE, "width": TILE}, **CLIP_MEAN_STD}


def _llava_processor_kwargs() -> dict[str, Any]:
    """Token-count arguments shared by the CLIP-based LLaVA processors (CLS dropped by "default")."""
    return {"patch_size": PATCH, "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1}


def _build_llava() -> TinyParts:
    """LLaVA 1.5: CLIP (features of the second-to-last layer, CLS dropped) + MLP projector + Llama."""
    import transformers as tf

    tokenizer = _llama_tokenizer(("<image>", "<pad>"), LLAVA_CHAT_TEMPLATE, pad_token="<pad>")
    config = tf.LlavaConfig(
        vision_config=_clip_vision(),
        text_config=_decoder_text(tokenizer, "llama"),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        image_seq_length=(TILE // PATCH) ** 2,
        tie_word_embeddings=False,
        architectures=["LlavaForConditionalGeneration"],
    )
    processor = tf.LlavaProcessor(
        image_processor=tf.CLIPImageProcessor(**_clip_image_kwargs()),
        tokenizer=tokenizer,
        chat_template=LLAVA_CHAT_TEMPLATE,
        **_llava_processor_kwargs(),
    )
    return TinyParts(config, processor, tf.LlavaForConditionalGeneration)


def _build_llava_next() -> TinyParts:
    """LLaVA-NeXT (v1.6 Mistral): CLIP + AnyRes tiles with a learned row-end ``image_newline``."""
    import transformers as tf

    tokenizer = _llama_tokenizer(("<image>",), LLAVA_NEXT_CHAT_TEMPLATE)
    config = tf.LlavaNextConfig(
        vision_config=_clip_vision(),
        text_config=_decoder_text(tokenizer, "mistral", sliding_window=None, rope_theta=1000000.0),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        image_grid_pinpoints=LLAVA_PINPOINTS,
        image_seq_length=(TILE // PATCH) ** 2,
        tie_word_embeddings=False,
        architectures=["LlavaNextForConditionalGeneration"],
    )
    image_processor = tf.LlavaNextImageProcessor(image_grid_pinpoints=LLAVA_PINPOINTS, **_clip_image_kwargs())
    processor = tf.LlavaNextProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=LLAVA_NEXT_CHAT_TEMPLATE,
        **_llava_processor_kwargs(),
    )
    return TinyParts(config, processor, tf.LlavaNextForConditionalGeneration)


def _build_llava_next_video() -> TinyParts:
    """LLaVA-NeXT-Video: LLaVA-NeXT images plus videos pooled 2x2 per frame (Vicuna/Llama text)."""
    import transformers as tf

    tokenizer = _llama_tokenizer(("<video>", "<image>"), LLAVA_NEXT_VIDEO_CHAT_TEMPLATE)
    tokens_per_tile = (TILE // PATCH) ** 2
    config = tf.LlavaNextVideoConfig(
        vision_config=_clip_vision(),
        text_config=_decoder_text(tokenizer, "llama"),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        image_grid_pinpoints=LLAVA_PINPOINTS,
        spatial_pool_mode="average",
        spatial_pool_stride=2,
        image_seq_length=tokens_per_tile,
        video_seq_length=tokens_per_tile // 4,
        tie_word_embeddings=False,
        architectures=["LlavaNextVideoForConditionalGeneration"],
    )
    clip = _clip_image_kwargs()
    processor = tf.LlavaNextVideoProcessor(
        video_processor=tf.LlavaNextVideoVideoProcessor(**clip),
        image_processor=tf.LlavaNextImageProcessor(image_grid_pinpoints=LLAVA_PINPOINTS, **clip),
        tokenizer=tokenizer,
        chat_template=LLAVA_NEXT_VIDEO_CHAT_TEMPLATE,
        **_llava_processor_kwargs(),
    )
    return TinyParts(config, processor, tf.LlavaNextVideoForConditionalGeneration)


# Pixtral and Mistral 3 (Pixtral tower + Mistral) ---------------------------------------------

MISTRAL_SPECIAL = (
    *LLAMA_SPECIAL,
    "[INST]",
    "[/INST]",
    "[IMG]",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
)
# Mistral chat template (Pixtral-12B / Mistral-Small-3.1 turn markup, list or string contents).
MISTRAL_CHAT_TEMPLATE = """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] if messages[0]['content'] is string \
else messages[0]['content'][0]['text'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- if system_message is defined %}{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{%- endif %}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {{- '[INST]' }}
        {%- if message['content'] is string %}{{- message['content'] }}{%- else %}
            {%- for chunk in message['content'] %}
                {%- if chunk['type'] == 'text' %}{{- chunk['text'] }}
                {%- elif chunk['type'] == 'image' %}{{- '[IMG]' }}
                {%- else %}{{- raise_exception('Unrecognized content type!') }}{%- endif %}
            {%- endfor %}
        {%- endif %}
        {{- '[/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {%- if message['content'] is string %}{{- message['content'] }}{%- else %}
            {%- for chunk in message['content'] %}{{- chunk['text'] }}{%- endfor %}
        {%- endif %}
        {{- eos_token }}
    {%- else %}
        {{- raise_exception('Only user, assistant and an initial system message are supported!') }}
    {%- endif %}
{%- endfor %}"""


def _mistral_tokenizer() -> Any:
    """Mistral's control tokens and image atoms; the chat template writes the BOS itself."""
    return _llama_tokenizer(MISTRAL_SPECIAL[3:], MISTRAL_CHAT_TEMPLATE)


def _pixtral_vision() -> dict[str, Any]:
    """A Pixtral tower (2-D RoPE, no CLS) on 8 px patches."""
    return {
        "model_type": "pixtral",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "head_dim": VISION_HIDDEN // VISION_HEADS,
        "image_size": 8 * TILE,
        "patch_size": PATCH,
        "rope_theta": 10000.0,
    }


def _pixtral_processor(tokenizer: Any, merge: int) -> Any:
    """PixtralProcessor: 64x64 pictures resized to 32 px, rows of [IMG] closed by [IMG_BREAK]/[IMG_END]."""
    import transformers as tf

    image_processor = tf.PixtralImageProcessor(
        size={"longest_edge": TILE}, patch_size={"height": PATCH, "width": PATCH}, **CLIP_MEAN_STD
    )
    return tf.PixtralProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH,
        spatial_merge_size=merge,
        chat_template=MISTRAL_CHAT_TEMPLATE,
    )


def _build_pixtral() -> TinyParts:
    """Pixtral-12B layout: ``LlavaForConditionalGeneration`` with a Pixtral tower and a Mistral LM."""
    import transformers as tf

    tokenizer = _mistral_tokenizer()
    config = tf.LlavaConfig(
        vision_config=_pixtral_vision(),
        text_config=_decoder_text(tokenizer, "mistral", sliding_window=None, rope_theta=1000000000.0),
        image_token_index=tokenizer.convert_tokens_to_ids("[IMG]"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        projector_hidden_act="gelu",
        tie_word_embeddings=False,
        architectures=["LlavaForConditionalGeneration"],
    )
    return TinyParts(config, _pixtral_processor(tokenizer, 1), tf.LlavaForConditionalGeneration)


def _build_mistral3() -> TinyParts:
    """Mistral 3 (Small 3.1): Pixtral tower + 2x2 patch merger + RMS-normed projector + Mistral LM."""
    import transformers as tf

    tokenizer = _mistral_tokenizer()
    config = tf.Mistral3Config(
        vision_config=_pixtral_vision(),
        text_config=_decoder_text(tokenizer, "mistral", sliding_window=None, rope_theta=1000000000.0),
        image_token_index=tokenizer.convert_tokens_to_ids("[IMG]"),
        vision_feature_layer=-1,
        spatial_merge_size=2,
        multimodal_projector_bias=False,
        tie_word_embeddings=False,
        architectures=["Mistral3ForConditionalGeneration"],
    )
    return TinyParts(config, _pixtral_processor(tokenizer, 2), tf.Mistral3ForConditionalGeneration)


# Aya Vision and Command A Vision (SigLIP + pixel shuffle + Cohere2) ---------------------------

COHERE_SPECIAL = (
    "<PAD>",
    "<UNK>",
    "<CLS>",
    "<SEP>",
    "<MASK_TOKEN>",
    "<BOS_TOKEN>",
    "<EOS_TOKEN>",
    "<EOP_TOKEN>",
    "<|START_OF_TURN_TOKEN|>",
    "<|END_OF_TURN_TOKEN|>",
    "<|USER_TOKEN|>",
    "<|CHATBOT_TOKEN|>",
    "<|SYSTEM_TOKEN|>",
    "<|START_RESPONSE|>",
    "<|END_RESPONSE|>",
    "<|START_OF_IMG|>",
    "<|END_OF_IMG|>",
    "<|IMG_PATCH|>",
    "<|IMG_LINE_BREAK|>",
    "<image>",
)
# Cohere turn markup as in CohereLabs/aya-vision-8b (system preamble and tool blocks left out).
AYA_VISION_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|START_OF_TURN_TOKEN|>"
    "{% if message['role'] == 'user' %}<|USER_TOKEN|>{% elif message['role'] == 'assistant' %}<|CHATBOT_TOKEN|>"
    "{% else %}<|SYSTEM_TOKEN|>{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<image>{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|END_OF_TURN_TOKEN|>{% endfor %}"
    "{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}"
)
# Command A Vision markup: the answer sits between START/END_RESPONSE; images are one <|IMG_PATCH|>.
COHERE2_VISION_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|START_OF_TURN_TOKEN|>"
    "{% if message['role'] == 'user' %}<|USER_TOKEN|>{% elif message['role'] == 'assistant' %}"
    "<|CHATBOT_TOKEN|><|START_RESPONSE|>{% else %}<|SYSTEM_TOKEN|>{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<|IMG_PATCH|>{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{% if message['role'] == 'assistant' %}<|END_RESPONSE|>{% endif %}"
    "<|END_OF_TURN_TOKEN|>{% endfor %}"
    "{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>{% endif %}"
)
DOWNSAMPLE = 2


def _cohere_tokenizer(chat_template: str, **kwargs: Any) -> Any:
    """CohereTokenizerFast with the Cohere control tokens and the image atoms."""
    import transformers as tf

    return _bpe_tokenizer(
        tf.CohereTokenizerFast,
        COHERE_SPECIAL,
        (),
        pad_token="<PAD>",
        unk_token="<UNK>",
        bos_token="<BOS_TOKEN>",
        eos_token="<|END_OF_TURN_TOKEN|>",
        add_bos_token=True,
        add_eos_token=False,
        chat_template=chat_template,
        **kwargs,
    )


def _cohere2_text(tokenizer: Any) -> dict[str, Any]:
    """Command R7B-style text model: sliding/full layers, logit scale, tied embeddings."""
    return _decoder_text(
        tokenizer,
        "cohere2",
        sliding_window=512,
        layer_types=["sliding_attention", "full_attention"],
        logit_scale=0.25,
        rope_theta=50000.0,
        tie_word_embeddings=True,
    )


def _build_aya_vision() -> TinyParts:
    """Aya Vision: SigLIP tiles, 2x2 pixel shuffle + SwiGLU projector, Cohere2 LM with tied embeddings."""
    import transformers as tf

    tokenizer = _cohere_tokenizer(AYA_VISION_CHAT_TEMPLATE)
    config = tf.AyaVisionConfig(
        vision_config=_siglip_vision(),
        text_config=_cohere2_text(tokenizer),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        downsample_factor=DOWNSAMPLE,
        alignment_intermediate_size=2 * TEXT_HIDDEN,
        image_token_index=tokenizer.convert_tokens_to_ids("<|IMG_PATCH|>"),
        tie_word_embeddings=True,
        architectures=["AyaVisionForConditionalGeneration"],
    )
    image_processor = tf.GotOcr2ImageProcessor(
        size={"height": TILE, "width": TILE}, crop_to_patches=True, min_patches=1, max_patches=12, **HALF
    )
    processor = tf.AyaVisionProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH,
        img_size=TILE,
        downsample_factor=DOWNSAMPLE,
        chat_template=AYA_VISION_CHAT_TEMPLATE,
    )
    return TinyParts(config, processor, tf.AyaVisionForConditionalGeneration)


COHERE2_VISION_TOKENS = {
    "boi_token": "<|START_OF_IMG|>",
    "eoi_token": "<|END_OF_IMG|>",
    "image_token": "<|IMG_PATCH|>",
    "img_line_break_token": "<|IMG_LINE_BREAK|>",
}


def _build_cohere2_vision() -> TinyParts:
    """Command A Vision: SigLIP tiles + thumbnail, pixel shuffle + SwiGLU projector, Cohere2 LM."""
    import transformers as tf

    tokenizer = _cohere_tokenizer(COHERE2_VISION_CHAT_TEMPLATE, extra_special_tokens=dict(COHERE2_VISION_TOKENS))
    config = tf.Cohere2VisionConfig(
        vision_config=_siglip_vision(),
        text_config=_cohere2_text(tokenizer),
        downsample_factor=DOWNSAMPLE,
        alignment_intermediate_size=2 * TEXT_HIDDEN,
        image_token_id=tokenizer.convert_tokens_to_ids("<|IMG_PATCH|>"),
        tie_word_embeddings=True,
        architectures=["Cohere2VisionForConditionalGeneration"],
    )
    image_processor = tf.Cohere2VisionImageProcessorFast(
        size={"height": TILE, "width": TILE},
        patch_size=TILE // PATCH // DOWNSAMPLE,
        crop_to_patches=True,
        min_patches=1,
        max_patches=12,
        **HALF,
    )
    processor = tf.Cohere2VisionProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=COHERE2_VISION_CHAT_TEMPLATE
    )
    return TinyParts(config, processor, tf.Cohere2VisionForConditionalGeneration)


# PaliGemma (SigLIP + Gemma 2, prefix-LM) --------------------------------------------------------

PALIGEMMA_SPECIAL = ("<pad>", "<eos>", "<bos>", "<unk>")


def _build_paligemma() -> TinyParts:
    """PaliGemma 2: SigLIP + linear projector + Gemma 2; image tokens prefix a bidirectional prompt.

    No chat template, as released: the processor writes ``<image>*N <bos> prefix \\n`` and
    ``suffix=`` supplies the answer and the labels. The processor adds ``<image>`` (and
    the location/segmentation tokens) to the tokenizer, so the vocabulary is sized after it.
    """
    import transformers as tf

    tokenizer = _bpe_tokenizer(
        tf.GemmaTokenizerFast,
        PALIGEMMA_SPECIAL,
        (),
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        add_bos_token=True,
        add_eos_token=False,
    )
    tokens_per_image = (TILE // PATCH) ** 2
    image_processor = tf.SiglipImageProcessor(size={"height": TILE, "width": TILE}, **HALF)
    image_processor.image_seq_length = tokens_per_image
    processor = tf.PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer)
    vocab = _padded_vocab(tokenizer)
    text = _decoder_text(
        tokenizer,
        "gemma2",
        query_pre_attn_scalar=TEXT_HIDDEN // TEXT_HEADS,
        sliding_window=512,
        hidden_activation="gelu_pytorch_tanh",
        tie_word_embeddings=True,
    )
    config = tf.PaliGemmaConfig(
        vision_config={**_siglip_vision(), "projection_dim": TEXT_HIDDEN},
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vocab_size=vocab,
        projection_dim=TEXT_HIDDEN,
        hidden_size=TEXT_HIDDEN,
        tie_word_embeddings=True,
        architectures=["PaliGemmaForConditionalGeneration"],
    )
    return TinyParts(config, processor, tf.PaliGemmaForConditionalGeneration)


# LFM2-VL (SigLIP2 NaFlex + pixel unshuffle + LFM2 hybrid conv/attention LM) --------------------

LFM2_VL_SPECIAL = (
    "<|pad|>",
    "<|startoftext|>",
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<image>",
    "<|image_start|>",
    "<|image_end|>",
    "<|img_thumbnail|>",
    *(f"<|img_row_{r}_col_{c}|>" for r in range(1, 4) for c in range(1, 4)),
)
LFM2_VL_TOKENS = {
    "image_token": "<image>",
    "image_start_token": "<|image_start|>",
    "image_end_token": "<|image_end|>",
    "image_thumbnail": "<|img_thumbnail|>",
}
# ChatML as in LiquidAI/LFM2-VL-450M (BOS <|startoftext|>, <image> placeholders).
LFM2_VL_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}{{ '<image>' }}{% elif item['type'] == 'text' %}{{ item['text'] }}"
    "{% endif %}{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _lfm2_vl_config_class() -> type:
    """``Lfm2VlConfig`` saving its registered Auto key ``lfm2_vl`` as model_type.

    transformers 4.57.1's class attribute says ``lfm2-vl``, which ``AutoConfig`` does not
    know, so a config saved by the stock class cannot be reloaded through the Auto classes.
    """
    import transformers as tf

    return type("Lfm2VlConfig", (tf.Lfm2VlConfig,), {"model_type": "lfm2_vl", "__module__": __name__})


def _build_lfm2_vl() -> TinyParts:
    """LFM2-VL: SigLIP2 NaFlex tower, 2x2 pixel unshuffle + MLP, LFM2 (short convs + attention)."""
    import transformers as tf

    tokenizer = _bpe_tokenizer(
        tf.PreTrainedTokenizerFast,
        LFM2_VL_SPECIAL,
        (),
        pad_token="<|pad|>",
        bos_token="<|startoftext|>",
        eos_token="<|im_end|>",
        extra_special_tokens=dict(LFM2_VL_TOKENS),
        chat_template=LFM2_VL_CHAT_TEMPLATE,
    )
    text = _decoder_text(
        tokenizer,
        "lfm2",
        layer_types=["conv", "full_attention"],
        conv_L_cache=3,
        block_auto_adjust_ff_dim=False,
        tie_word_embeddings=True,
    )
    text.pop("head_dim")
    vision = {
        "model_type": "siglip2_vision_model",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "patch_size": PATCH,
        "num_patches": 64,
        "vision_use_head": False,
    }
    config = _lfm2_vl_config_class()(
        vision_config=vision,
        text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        projector_hidden_size=TEXT_FFN,
        downsample_factor=DOWNSAMPLE,
        tie_word_embeddings=True,
        architectures=["Lfm2VlForConditionalGeneration"],
    )
    image_processor = tf.Lfm2VlImageProcessorFast(
        downsample_factor=DOWNSAMPLE,
        encoder_patch_size=PATCH,
        tile_size=TILE,
        size={"height": TILE, "width": TILE},
        min_image_tokens=4,
        max_image_tokens=16,
        min_tiles=2,
        max_tiles=4,
        **HALF,
    )
    processor = tf.Lfm2VlProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=LFM2_VL_CHAT_TEMPLATE
    )
    return TinyParts(config, processor, tf.Lfm2VlForConditionalGeneration)


# Perception LM (timm PE tower + Llama 3) ---------------------------------------------------------

PLM_SPECIAL = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|image|>",
    "<|video|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|finetune_right_pad_id|>",
)
PLM_TOKENS = {"image_token": "<|image|>", "video_token": "<|video|>"}
# Llama 3 turn markup as in facebook/Perception-LM-1B (media placeholders before the text).
PLM_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<|image|>' }}{% endfor %}"
    "{% for item in message['content'] | selectattr('type', 'equalto', 'video') %}{{ '<|video|>' }}{% endfor %}"
    "{% for item in message['content'] | selectattr('type', 'equalto', 'text') %}{{ item['text'] }}{% endfor %}"
    "{% endif %}{{ '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
PLM_PATCH = 14  # fixed by the timm architecture name
PLM_TILE = 4 * PLM_PATCH


def _build_perception_lm() -> TinyParts:
    """Perception LM: timm PE-core ViT (CLS dropped), MLP + 2x2 average pooling, Llama 3 (needs timm)."""
    import transformers as tf

    tokenizer = _bpe_tokenizer(
        tf.PreTrainedTokenizerFast,
        PLM_SPECIAL,
        (),
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|finetune_right_pad_id|>",
        extra_special_tokens=dict(PLM_TOKENS),
        chat_template=PLM_CHAT_TEMPLATE,
    )
    grid = PLM_TILE // PLM_PATCH
    vision = {
        "architecture": "vit_pe_core_large_patch14_336",
        "model_args": {
            "embed_dim": VISION_HIDDEN,
            "depth": VISION_DEPTH,
            "num_heads": VISION_HEADS,
            "img_size": [PLM_TILE, PLM_TILE],
            "ref_feat_shape": [grid, grid],
            "global_pool": "",  # no attention-pooling head: its weights would never get a gradient
            "use_post_transformer_norm": False,
        },
        "num_classes": 0,
        "do_pooling": False,
    }
    config = tf.PerceptionLMConfig(
        vision_config=vision,
        text_config=_decoder_text(tokenizer, "llama", rope_theta=500000.0),
        vision_use_cls_token=True,
        projector_pooling_ratio=2,
        image_token_id=tokenizer.convert_tokens_to_ids("<|image|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video|>"),
        tie_word_embeddings=False,
        architectures=["PerceptionLMForConditionalGeneration"],
    )
    size = {"height": PLM_TILE, "width": PLM_TILE}
    processor = tf.PerceptionLMProcessor(
        video_processor=tf.PerceptionLMVideoProcessor(size=dict(size), **HALF),
        image_processor=tf.PerceptionLMImageProcessorFast(
            size=size, tile_size=PLM_TILE, max_num_tiles=4, vision_input_type="thumb+tile", **HALF
        ),
        tokenizer=tokenizer,
        patch_size=PLM_PATCH,
        pooling_ratio=2,
        chat_template=PLM_CHAT_TEMPLATE,
    )
    return TinyParts(config, processor, tf.PerceptionLMForConditionalGeneration)


# GOT-OCR 2.0 (SAM ViT-B-like tower + conv downsampler + Qwen2) -----------------------------------

GOT_OCR2_TOKENS = ("<img>", "</img>", "<imgpad>", "<ref>", "</ref>", "<box>", "</box>", "<quad>", "</quad>")
GOT_OCR2_IMAGE = 1024  # released page size; the processor's default 256 pads per page assume it


def _build_got_ocr2() -> TinyParts:
    """GOT-OCR 2.0: windowed SAM tower (16 px patches), two stride-2 convs to 16x16 tokens, Qwen2.

    No chat template, as released: the processor writes the OCR prompt (with the image pads)
    when called without text.
    """
    import transformers as tf

    tokenizer = _bpe_tokenizer(
        tf.PreTrainedTokenizerFast,
        QWEN_SPECIAL_TOKENS + GOT_OCR2_TOKENS,
        QWEN2_ADDED_TOKENS,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(QWEN_SPECIAL_TOKENS[1:] + GOT_OCR2_TOKENS),
    )
    vision = {
        "hidden_size": VISION_HIDDEN,
        "mlp_dim": VISION_FFN,
        "output_channels": VISION_HIDDEN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": GOT_OCR2_IMAGE,
        "patch_size": 16,
        "window_size": 14,
        "global_attn_indexes": [VISION_DEPTH - 1],
    }
    config = tf.GotOcr2Config(
        vision_config=vision,
        text_config=_qwen2_text(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<imgpad>"),
        image_seq_length=(GOT_OCR2_IMAGE // 16 // 4) ** 2,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        architectures=["GotOcr2ForConditionalGeneration"],
    )
    image_processor = tf.GotOcr2ImageProcessor(
        size={"height": GOT_OCR2_IMAGE, "width": GOT_OCR2_IMAGE}, crop_to_patches=False, **CLIP_MEAN_STD
    )
    processor = tf.GotOcr2Processor(image_processor=image_processor, tokenizer=tokenizer)
    return TinyParts(config, processor, tf.GotOcr2ForConditionalGeneration)


BUILDERS: dict[str, Callable[[], TinyParts]] = {
    "llava": _build_llava,
    "llava_next": _build_llava_next,
    "llava_next_video": _build_llava_next_video,
    "pixtral": _build_pixtral,
    "mistral3": _build_mistral3,
    "aya_vision": _build_aya_vision,
    "cohere2_vision": _build_cohere2_vision,
    "paligemma": _build_paligemma,
    "lfm2_vl": _build_lfm2_vl,
    "perception_lm": _build_perception_lm,
    "got_ocr2": _build_got_ocr2,
}

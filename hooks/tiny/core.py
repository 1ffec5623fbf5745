"""The first families: Qwen2.5-VL, Qwen3-VL (dense, MoE), LLaVA-OneVision, InternVL, Gemma 3, GLM-4.1V."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from hooks.tiny.common import (
    MOE_EXPERTS,
    MOE_FFN,
    MOE_TOP_K,
    PATCH,
    QWEN2_ADDED_TOKENS,
    QWEN2_VL_CHAT_TEMPLATE,
    QWEN3_ADDED_TOKENS,
    QWEN3_VL_CHAT_TEMPLATE,
    TEXT_HEADS,
    TEXT_HIDDEN,
    TILE,
    VISION_DEPTH,
    VISION_FFN,
    VISION_HEADS,
    VISION_HIDDEN,
    TinyParts,
    _bpe_tokenizer,
    _qwen2_text,
    _qwen2_vl_text,
    _qwen_ids,
    _qwen_pixel_budget,
    _qwen_text_config,
    _qwen_tokenizer,
    _siglip_vision,
    _vision_token_ids,
    text_dims,
)


def _build_qwen2_5_vl() -> TinyParts:
    """Qwen2.5-VL: window attention vision tower with one full-attention block."""
    import transformers as tf

    tokenizer, ids, text = _qwen2_vl_text()
    vision = {
        "depth": VISION_DEPTH,
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_heads": VISION_HEADS,
        "out_hidden_size": TEXT_HIDDEN,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
        "fullatt_block_indexes": [VISION_DEPTH - 1],
        "tokens_per_second": 2,
        "hidden_act": "silu",
    }
    config = tf.Qwen2_5_VLConfig(
        text_config=text,
        vision_config=vision,
        tie_word_embeddings=False,
        architectures=["Qwen2_5_VLForConditionalGeneration"],
        **_vision_token_ids(ids),
    )
    size = _qwen_pixel_budget(14, 2)
    image_processor = tf.Qwen2VLImageProcessor(
        size=size, min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"], patch_size=14
    )
    video_processor = tf.Qwen2VLVideoProcessor(size=dict(size), patch_size=14)
    processor = tf.Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=QWEN2_VL_CHAT_TEMPLATE,
    )
    return TinyParts(config, processor, tf.Qwen2_5_VLForConditionalGeneration)


def _qwen3_vl_processor(tokenizer: Any) -> Any:
    """Qwen3-VL processor: fast image processor and Qwen3 video processor, patch 16."""
    import transformers as tf

    size = _qwen_pixel_budget(16, 2)
    mean_std = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    image_processor = tf.Qwen2VLImageProcessorFast(size=size, patch_size=16, merge_size=2, **mean_std)
    video_processor = tf.Qwen3VLVideoProcessor(size=dict(size), patch_size=16, merge_size=2, **mean_std)
    return tf.Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=QWEN3_VL_CHAT_TEMPLATE,
    )


def _qwen3_vl_configs(tokenizer: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
    """Text/vision sub-configs shared by dense and MoE Qwen3-VL (interleaved mRoPE, deepstack)."""
    ids = _qwen_ids(tokenizer)
    text = _qwen_text_config(tokenizer, ids, [3, 3, 2])
    text["rope_scaling"]["mrope_interleaved"] = True
    text.update(rope_theta=5000000.0, head_dim=TEXT_HIDDEN // TEXT_HEADS)
    vision = {
        "depth": VISION_DEPTH,
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_heads": VISION_HEADS,
        "out_hidden_size": TEXT_HIDDEN,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "num_position_embeddings": 2304,
        "deepstack_visual_indexes": list(range(VISION_DEPTH)),
        "hidden_act": "gelu_pytorch_tanh",
    }
    return text, vision, ids


def _qwen3_vl_parts(config_name: str, model_name: str, moe_text: dict[str, Any]) -> TinyParts:
    """Qwen3-VL dense or MoE: the same tokenizer, towers and processor; MoE only adds text fields."""
    import transformers as tf

    tokenizer = _qwen_tokenizer(QWEN3_ADDED_TOKENS, QWEN3_VL_CHAT_TEMPLATE)
    text, vision, ids = _qwen3_vl_configs(tokenizer)
    text.update(moe_text)
    config = getattr(tf, config_name)(
        text_config=text,
        vision_config=vision,
        tie_word_embeddings=False,
        architectures=[model_name],
        **_vision_token_ids(ids),
    )
    return TinyParts(config, _qwen3_vl_processor(tokenizer), getattr(tf, model_name))


def _build_qwen3_vl() -> TinyParts:
    """Dense Qwen3-VL."""
    return _qwen3_vl_parts("Qwen3VLConfig", "Qwen3VLForConditionalGeneration", {})


def _build_qwen3_vl_moe() -> TinyParts:
    """Qwen3-VL-MoE: every text layer sparse, 4 experts top-2 (fused 3-D expert weights)."""
    moe = {"num_experts": MOE_EXPERTS, "num_experts_per_tok": MOE_TOP_K, "moe_intermediate_size": MOE_FFN,
           "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True}
    return _qwen3_vl_parts("Qwen3VLMoeConfig", "Qwen3VLMoeForConditionalGeneration", moe)


def _qwen3_5_parts(moe: bool) -> TinyParts:
    """Qwen3.5 (transformers >= 5 only): a Qwen3-VL vision tower and processor before a hybrid text model.

    One Gated-DeltaNet (linear attention) layer and one full-attention layer, as the released
    ``layer_types`` interleave them (3:1); partial rotary (0.25 of head_dim 32: 8 dims, interleaved
    mRoPE sections summing to 4). The released processor class is Qwen3-VL's (transformers' auto map),
    and so is the chat template used here (Qwen3-VL's, without Qwen3.5's thinking switch).
    """
    import transformers as tf

    if not hasattr(tf, "Qwen3_5Config"):
        raise RuntimeError(f"qwen3_5 needs transformers >= 5 (this is {tf.__version__})")
    tokenizer = _qwen_tokenizer(QWEN3_ADDED_TOKENS, QWEN3_VL_CHAT_TEMPLATE)
    text, vision, ids = _qwen3_vl_configs(tokenizer)
    rope = {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
            "mrope_section": [2, 1, 1], "mrope_interleaved": True}
    text.pop("rope_scaling")
    text.update(head_dim=32, rope_parameters=rope, layer_types=["linear_attention", "full_attention"],
                linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                linear_num_value_heads=4)
    vision.update(deepstack_visual_indexes=[])
    if moe:
        text.update(num_experts=MOE_EXPERTS, num_experts_per_tok=MOE_TOP_K, moe_intermediate_size=MOE_FFN,
                    shared_expert_intermediate_size=MOE_FFN)
    name = "Qwen3_5Moe" if moe else "Qwen3_5"
    config = getattr(tf, f"{name}Config")(text_config=text, vision_config=vision, tie_word_embeddings=False,
                                          architectures=[f"{name}ForConditionalGeneration"], **_vision_token_ids(ids))
    return TinyParts(config, _qwen3_vl_processor(tokenizer), getattr(tf, f"{name}ForConditionalGeneration"))


def _build_qwen3_5() -> TinyParts:
    """Qwen3.5 dense (transformers >= 5)."""
    return _qwen3_5_parts(moe=False)


def _build_qwen3_5_moe() -> TinyParts:
    """Qwen3.5-MoE (transformers >= 5): 4 routed experts top-2 and a shared expert in every layer."""
    return _qwen3_5_parts(moe=True)


# Chat template of the llava-hf LLaVA-OneVision (Qwen2) checkpoints.
LLAVA_ONEVISION_CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{# Render all video then #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}"
    "{{ '<video>\n' }}{% endfor %}"
    "{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] }}"
    "{% endfor %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] }}{% endgeneration %}{% endfor %}{% endif %}"
    "{{'<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _build_llava_onevision() -> TinyParts:
    """LLaVA-OneVision: SigLIP + Qwen2 with AnyRes tiling (base tile + high-res tiles + newlines)."""
    import transformers as tf

    template = LLAVA_ONEVISION_CHAT_TEMPLATE
    tokenizer = _qwen_tokenizer(QWEN2_ADDED_TOKENS, template, extra=("<image>", "<video>"))
    pinpoints = [[TILE, TILE], [TILE, 2 * TILE], [2 * TILE, TILE], [2 * TILE, 2 * TILE]]
    config = tf.LlavaOnevisionConfig(
        vision_config=_siglip_vision(),
        text_config=_qwen2_text(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        vision_aspect_ratio="anyres_max_9",
        image_grid_pinpoints=pinpoints,
        tie_word_embeddings=False,
        architectures=["LlavaOnevisionForConditionalGeneration"],
    )
    size = {"height": TILE, "width": TILE}
    mean_std = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    processor = tf.LlavaOnevisionProcessor(
        image_processor=tf.LlavaOnevisionImageProcessor(
            size=size, image_grid_pinpoints=pinpoints, **mean_std
        ),
        tokenizer=tokenizer,
        video_processor=tf.LlavaOnevisionVideoProcessor(size=dict(size), **mean_std),
        num_image_tokens=(TILE // PATCH) ** 2,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
        chat_template=template,
    )
    return TinyParts(config, processor, tf.LlavaOnevisionForConditionalGeneration)


# Chat template of the HF-format InternVL3 checkpoints (OpenGVLab/InternVL3-*-hf).
INTERNVL_CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for content in message['content'] %}{% if content['type'] == 'image' %}{{ '<IMG_CONTEXT>\n' }}"
    "{% elif content['type'] == 'video' %}{{ '<video>\n' }}{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}{% endif %}{% endfor %}{% endif %}{{'<|im_end|>\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{'<|im_start|>assistant\n' }}{% endif %}"
)
INTERNVL_TOKENS = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
    "video_token": "<video>",
}


def _build_internvl() -> TinyParts:
    """InternVL3 (HF format): InternViT with CLS token + pixel-shuffle 0.5 projector + Qwen2."""
    import transformers as tf

    extra = (*INTERNVL_TOKENS.values(), "<quad>", "</quad>", "<ref>", "</ref>", "<box>", "</box>")
    tokenizer = _qwen_tokenizer(
        QWEN2_ADDED_TOKENS, INTERNVL_CHAT_TEMPLATE, extra=extra, extra_special_tokens=dict(INTERNVL_TOKENS)
    )
    vision = {
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": [TILE, TILE],
        "patch_size": [PATCH, PATCH],
        "use_qk_norm": False,
        "norm_type": "layer_norm",
    }
    downsample = 0.5
    config = tf.InternVLConfig(
        vision_config=vision,
        text_config=_qwen2_text(tokenizer),
        image_token_id=tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>"),
        downsample_ratio=downsample,
        projector_hidden_act="gelu",
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        tie_word_embeddings=False,
        architectures=["InternVLForConditionalGeneration"],
    )
    size = {"height": TILE, "width": TILE}
    mean_std = {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}
    image_processor = tf.GotOcr2ImageProcessorFast(
        size=size, crop_to_patches=True, min_patches=1, max_patches=12, **mean_std
    )
    processor = tf.InternVLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=tf.InternVLVideoProcessor(size=dict(size), **mean_std),
        image_seq_length=int((TILE // PATCH) ** 2 * downsample**2),
        chat_template=INTERNVL_CHAT_TEMPLATE,
    )
    return TinyParts(config, processor, tf.InternVLForConditionalGeneration)


# Chat template of the Gemma 3 instruction-tuned checkpoints.
GEMMA3_CHAT_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""
GEMMA3_MM_TOKENS = {
    "boi_token": "<start_of_image>",
    "eoi_token": "<end_of_image>",
    "image_token": "<image_soft_token>",
}
GEMMA3_TURN_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>")


def _build_gemma3() -> TinyParts:
    """Gemma 3: SigLIP + pooled projector (fixed tokens per image), sliding/full layers, tied head."""
    import transformers as tf

    special = (*GEMMA3_TURN_TOKENS, *GEMMA3_MM_TOKENS.values())
    tokenizer = _bpe_tokenizer(
        tf.GemmaTokenizerFast,
        special,
        (),
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        add_bos_token=True,
        add_eos_token=False,
        extra_special_tokens=dict(GEMMA3_MM_TOKENS),
        chat_template=GEMMA3_CHAT_TEMPLATE,
    )
    tokens_per_image = 4
    ids = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in GEMMA3_MM_TOKENS.items()}
    text = {
        **text_dims(tokenizer),
        "head_dim": TEXT_HIDDEN // TEXT_HEADS,
        "query_pre_attn_scalar": TEXT_HIDDEN // TEXT_HEADS,
        "sliding_window": 512,
        "layer_types": ["sliding_attention", "full_attention"],
        "max_position_embeddings": 4096,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": tokenizer.bos_token_id,
    }
    config = tf.Gemma3Config(
        text_config=text,
        vision_config=_siglip_vision(),
        mm_tokens_per_image=tokens_per_image,
        boi_token_index=ids["boi_token"],
        eoi_token_index=ids["eoi_token"],
        image_token_index=ids["image_token"],
        architectures=["Gemma3ForConditionalGeneration"],
    )
    image_processor = tf.Gemma3ImageProcessor(
        size={"height": TILE, "width": TILE}, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5]
    )
    processor = tf.Gemma3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_length=tokens_per_image,
        chat_template=GEMMA3_CHAT_TEMPLATE,
    )
    # Gemma3MultiModalProjector creates mm_input_projection_weight as zeros, and so it stays: a user's fresh model
    # is built so, and the smoke's media proof judges the image by the projection's own gradient (a note, no failure)
    return TinyParts(config, processor, tf.Gemma3ForConditionalGeneration)


# GLM-4.1V ------------------------------------------------------------------------------------

GLM4V_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|image|>",
    "<|video|>",
)
GLM4V_ADDED_TOKENS = ("<think>", "</think>", "<answer>", "</answer>", "<|begin_of_box|>", "<|end_of_box|>")
# Chat template of GLM-4.1V-9B-Thinking (user/assistant/system turns, image and video blocks).
GLM4V_CHAT_TEMPLATE = """[gMASK]<sop>
{%- for msg in messages %}
    {%- if msg.role == 'system' %}
<|system|>
{{ msg.content }}
    {%- elif msg.role == 'user' %}
<|user|>{{ '\n' }}
        {%- if msg.content is string %}
{{ msg.content }}
        {%- else %}
            {%- for item in msg.content %}
                {%- if item.type == 'video' or 'video' in item %}
<|begin_of_video|><|video|><|end_of_video|>
                {%- elif item.type == 'image' or 'image' in item %}
<|begin_of_image|><|image|><|end_of_image|>
                {%- elif item.type == 'text' %}
{{ item.text }}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
    {%- elif msg.role == 'assistant' %}
        {%- if msg.metadata %}
<|assistant|>{{ msg.metadata }}
{{ msg.content }}
        {%- else %}
<|assistant|>
{{ msg.content }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{% if add_generation_prompt %}<|assistant|>
{% endif %}"""


def _build_glm4v() -> TinyParts:
    """GLM-4.1V: Qwen2-VL-like patches and merge, partial-rotary mRoPE text model."""
    import transformers as tf

    tokenizer = _bpe_tokenizer(
        tf.PreTrainedTokenizerFast,
        GLM4V_SPECIAL_TOKENS,
        GLM4V_ADDED_TOKENS,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(GLM4V_SPECIAL_TOKENS[1:]),
        chat_template=GLM4V_CHAT_TEMPLATE,
    )
    ids = {tok: tokenizer.convert_tokens_to_ids(tok) for tok in GLM4V_SPECIAL_TOKENS}
    text = {
        **text_dims(tokenizer),
        "partial_rotary_factor": 0.5,
        # rotary dim = head_dim 16 x 0.5 = 8 -> 4 frequencies split over t/h/w
        "rope_scaling": {"rope_type": "default", "mrope_section": [2, 1, 1]},
        "rope_theta": 10000.0,
        "max_position_embeddings": 4096,
        "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "tie_word_embeddings": False,
    }
    vision = {
        "depth": VISION_DEPTH,
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_heads": VISION_HEADS,
        "out_hidden_size": TEXT_HIDDEN,
        "image_size": 336,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    }
    config = tf.Glm4vConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        image_start_token_id=ids["<|begin_of_image|>"],
        image_end_token_id=ids["<|end_of_image|>"],
        video_start_token_id=ids["<|begin_of_video|>"],
        video_end_token_id=ids["<|end_of_video|>"],
        tie_word_embeddings=False,
        architectures=["Glm4vForConditionalGeneration"],
    )
    # GLM's smart_resize counts the temporal patch (2 frames per image) in the pixel budget.
    size = {key: 2 * value for key, value in _qwen_pixel_budget(14, 2).items()}
    processor = tf.Glm4vProcessor(
        image_processor=tf.Glm4vImageProcessor(size=size, patch_size=14),
        tokenizer=tokenizer,
        video_processor=tf.Glm4vVideoProcessor(size=dict(size), patch_size=14),
        chat_template=GLM4V_CHAT_TEMPLATE,
    )
    return TinyParts(config, processor, tf.Glm4vForConditionalGeneration)


BUILDERS: dict[str, Callable[[], TinyParts]] = {
    "qwen2_5_vl": _build_qwen2_5_vl,
    "qwen3_vl": _build_qwen3_vl,
    "qwen3_vl_moe": _build_qwen3_vl_moe,
    "qwen3_5": _build_qwen3_5,
    "qwen3_5_moe": _build_qwen3_5_moe,
    "llava_onevision": _build_llava_onevision,
    "internvl": _build_internvl,
    "gemma3": _build_gemma3,
    "glm4v": _build_glm4v,
}

# Architectures whose classes the installed transformers lacks (Qwen3.5 exists from 5.0 on): listed
# by all_builders(every=True) for the README table, left out of the matrix a 4.57 interpreter builds.
UNAVAILABLE: frozenset[str] = frozenset(
    () if hasattr(importlib.import_module("transformers"), "Qwen3_5Config") else ("qwen3_5", "qwen3_5_moe"))


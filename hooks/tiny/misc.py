"""Tiny builders for the remaining VLM families (see ``hooks.tiny`` for the shared sizes and helpers).

Each builder returns a ``TinyParts`` made of the family's real config, processor and
model classes at tiny sizes, with a locally trained BPE wrapped in the family's
tokenizer class and a chat template in the family's format. The facts that broke a
first attempt are spelled out next to the code that handles them:

* ``qwen2_vl``: the vision ``embed_dim`` is the tower width, its ``hidden_size`` the output width.
* ``glm4v_moe``: GLM-4.1V's tokenizer/processor with a GLM-4.5V-style chat template; one dense layer
  (``first_k_dense_replace``) and one MoE layer whose experts are a ModuleList of per-expert MLPs plus
  ``shared_experts``.
* ``deepseek_vl`` / ``deepseek_vl_hybrid``: the processor repeats the image token a fixed number of
  times; it must equal the SigLIP patch count (and the SAM branch is resampled to the same grid).
* ``ovis2``: text ``<image>`` expands to ``<IMG_START>``, atoms and indicator tokens; the model fills
  only the atoms (``image_token_id``) and the five indicator ids; top-level ``hidden_size`` and
  ``vocab_size`` must equal the text model's.
* ``aria``: the image processor only accepts 490 or 980 px canvases, the processor maps the canvas
  size to a token count and the projector maps the patch count to a query count: all three agree.
* ``llama4``: layout ``language_model.model.layers`` / ``vision_model.model.layers``; the vision
  ``intermediate_size`` doubles as the pixel-shuffled width (hidden / ratio**2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hooks.tiny.common import (
    MOE_EXPERTS,
    MOE_FFN,
    MOE_TOP_K,
    PATCH,
    QWEN2_ADDED_TOKENS,
    QWEN2_VL_CHAT_TEMPLATE,
    TEXT_FFN,
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
    _padded_vocab,
    _qwen2_text,
    _qwen2_vl_text,
    _qwen_pixel_budget,
    _qwen_tokenizer,
    _siglip_vision,
    _vision_token_ids,
    text_dims,
)
from hooks.tiny.core import (
    _build_glm4v,
)

# Qwen2-VL -------------------------------------------------------------------------------------


def _build_qwen2_vl() -> TinyParts:
    """Qwen2-VL: full-attention vision tower (``embed_dim`` wide), patch merger, mRoPE Qwen2 text."""
    import transformers as tf

    tokenizer, ids, text = _qwen2_vl_text()
    vision = {
        "depth": VISION_DEPTH,
        "embed_dim": VISION_HIDDEN,
        "hidden_size": TEXT_HIDDEN,  # the merger's output width, i.e. the text hidden size
        "mlp_ratio": VISION_FFN // VISION_HIDDEN,
        "num_heads": VISION_HEADS,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    }
    config = tf.Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        tie_word_embeddings=False,
        architectures=["Qwen2VLForConditionalGeneration"],
        **_vision_token_ids(ids),
    )
    size = _qwen_pixel_budget(14, 2)
    image_processor = tf.Qwen2VLImageProcessor(
        size=size, min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"], patch_size=14
    )
    processor = tf.Qwen2VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=tf.Qwen2VLVideoProcessor(size=dict(size), patch_size=14),
        chat_template=QWEN2_VL_CHAT_TEMPLATE,
    )
    return TinyParts(config, processor, tf.Qwen2VLForConditionalGeneration)


# GLM-4.5V (glm4v_moe) -------------------------------------------------------------------------


def _sub_config_dict(sub: Any) -> dict[str, Any]:
    """A sub-config's non-default fields without its model_type (to rebuild it as a sibling family)."""
    data = sub.to_diff_dict()
    for key in ("model_type", "transformers_version", "architectures"):
        data.pop(key, None)
    return data


# GLM-4.5V chat format: like GLM-4.1V, but content lists render as text in every role (GLM-4.1V's template
# prints an assistant content list verbatim) and past answers carry an empty <think></think>.
GLM45V_CHAT_TEMPLATE = (
    "{%- macro visible_text(content) -%}{%- if content is string -%}{{- content }}{%- else -%}"
    "{%- for item in content -%}{%- if item.type == 'text' -%}{{- item.text }}"
    "{%- elif item.type == 'image' or 'image' in item -%}{{- '<|begin_of_image|><|image|><|end_of_image|>' }}"
    "{%- elif item.type == 'video' or 'video' in item -%}{{- '<|begin_of_video|><|video|><|end_of_video|>' }}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}{%- endmacro -%}"
    "[gMASK]<sop>"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}{{- '<|system|>\\n' + visible_text(m.content) }}"
    "{%- elif m.role == 'user' -%}{{- '<|user|>\\n' + visible_text(m.content) }}"
    "{%- elif m.role == 'assistant' -%}{{- '<|assistant|>\\n<think></think>\\n' + visible_text(m.content).strip() }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' }}{%- endif -%}"
)


def _build_glm4v_moe() -> TinyParts:
    """GLM-4.5V: GLM-4.1V's vision tower and processor, a text model with one dense and one MoE layer."""
    import transformers as tf

    dense = _build_glm4v()
    dense.processor.chat_template = GLM45V_CHAT_TEMPLATE
    dense.processor.tokenizer.chat_template = GLM45V_CHAT_TEMPLATE
    text = _sub_config_dict(dense.config.text_config)
    text.update(
        n_routed_experts=MOE_EXPERTS,
        num_experts_per_tok=MOE_TOP_K,
        moe_intermediate_size=MOE_FFN,
        n_shared_experts=1,
        first_k_dense_replace=1,  # layer 0 dense, layer 1 sparse, as GLM-4.5V (1 of 46 dense)
        n_group=1,
        topk_group=1,
        norm_topk_prob=True,
        routed_scaling_factor=1.0,
    )
    keys = ("image_token_id", "video_token_id", "image_start_token_id", "image_end_token_id",
            "video_start_token_id", "video_end_token_id")
    config = tf.Glm4vMoeConfig(
        text_config=text,
        vision_config=_sub_config_dict(dense.config.vision_config),
        tie_word_embeddings=False,
        architectures=["Glm4vMoeForConditionalGeneration"],
        **{key: getattr(dense.config, key) for key in keys},
    )
    return TinyParts(config, dense.processor, tf.Glm4vMoeForConditionalGeneration)


# DeepSeek-VL (SigLIP low-res, + SAM high-res for the hybrid) ----------------------------------

DEEPSEEK_SPECIAL_TOKENS = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<image_placeholder>")
DEEPSEEK_SYSTEM = (
    "You are a helpful language and vision assistant. You are able to understand the visual content that "
    "the user provides, and assist the user with a variety of tasks using natural language."
)
# DeepSeek-VL chat format: system prompt, "User: ..." / "Assistant: ..." turns separated by blank lines,
# the image placeholder written where the image is, EOS after each answer. Literal text sits in
# expressions: transformers renders templates with trim_blocks, which eats a newline after a tag.
DEEPSEEK_VL_CHAT_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] if messages[0]['content'] "
    "is string else messages[0]['content'][0]['text'] }}{% set loop_messages = messages[1:] %}"
    "{% else %}{{ '" + DEEPSEEK_SYSTEM + "' }}{% set loop_messages = messages %}{% endif %}{{ '\\n\\n' }}"
    "{% for message in loop_messages %}{% if message['role'] == 'user' %}{{ 'User: ' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' }}{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for content in message['content'] %}{% if content['type'] == 'image' %}{{ '<image_placeholder>' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)


def _deepseek_tokenizer() -> Any:
    """LLaMA-style fast tokenizer with DeepSeek's BOS/EOS and ``<image_placeholder>`` as image token."""
    import transformers as tf

    return _bpe_tokenizer(
        tf.LlamaTokenizerFast,
        DEEPSEEK_SPECIAL_TOKENS,
        (),
        bos_token=DEEPSEEK_SPECIAL_TOKENS[0],
        eos_token=DEEPSEEK_SPECIAL_TOKENS[1],
        pad_token=DEEPSEEK_SPECIAL_TOKENS[2],
        unk_token=None,
        add_bos_token=False,  # the chat template writes the BOS
        add_eos_token=False,
        extra_special_tokens={"image_token": "<image_placeholder>"},
        chat_template=DEEPSEEK_VL_CHAT_TEMPLATE,
    )


def _llama_text(tokenizer: Any) -> dict[str, Any]:
    """A plain LLaMA language model sub-config (DeepSeek-LLM is a LLaMA architecture)."""
    return {
        "model_type": "llama",
        **text_dims(tokenizer),
        "max_position_embeddings": 4096,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "tie_word_embeddings": False,
    }


DEEPSEEK_IMAGE_TOKENS = (TILE // PATCH) ** 2  # one token per SigLIP patch


def _build_deepseek_vl() -> TinyParts:
    """DeepSeek-VL 1.3B style: SigLIP tower, two-layer MLP aligner, LLaMA text; fixed tokens per image."""
    import transformers as tf

    tokenizer = _deepseek_tokenizer()
    config = tf.DeepseekVLConfig(
        text_config=_llama_text(tokenizer),
        vision_config=_siglip_vision(),
        image_token_id=tokenizer.image_token_id,
        tie_word_embeddings=False,
        architectures=["DeepseekVLForConditionalGeneration"],
    )
    mean_std = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    processor = tf.DeepseekVLProcessor(
        image_processor=tf.DeepseekVLImageProcessor(size={"height": TILE, "width": TILE}, **mean_std),
        tokenizer=tokenizer,
        chat_template=DEEPSEEK_VL_CHAT_TEMPLATE,
        num_image_tokens=DEEPSEEK_IMAGE_TOKENS,
    )
    return TinyParts(config, processor, tf.DeepseekVLForConditionalGeneration)


HIGH_RES = 64  # SAM input: 4x4 patches of 16 px


def _sam_vision() -> dict[str, Any]:
    """A SAM ViT with one global and one windowed block.

    The model taps ``hidden_states[global_attn_indexes[0] + 1]``, and SAM's recorded hidden
    states end with the (channels-first) neck output, so the first global block must not be
    the last block: index 0 of 2.
    """
    return {
        "model_type": "sam_vision_model",
        "hidden_size": VISION_HIDDEN,
        "output_channels": VISION_HIDDEN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "mlp_dim": VISION_FFN,
        "image_size": HIGH_RES,
        "patch_size": 16,
        "window_size": 2,
        "global_attn_indexes": [0],
        "num_pos_feats": VISION_HIDDEN // 2,
    }


def _build_deepseek_vl_hybrid() -> TinyParts:
    """DeepSeek-VL 7B style: SigLIP low-res + SAM high-res features, concatenated by the aligner."""
    import transformers as tf

    tokenizer = _deepseek_tokenizer()
    config = tf.DeepseekVLHybridConfig(
        text_config=_llama_text(tokenizer),
        vision_config=_siglip_vision(),
        high_res_vision_config=_sam_vision(),
        image_token_id=tokenizer.image_token_id,
        tie_word_embeddings=False,
        architectures=["DeepseekVLHybridForConditionalGeneration"],
    )
    mean_std = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    image_processor = tf.DeepseekVLHybridImageProcessor(
        size={"height": TILE, "width": TILE},
        high_res_size={"height": HIGH_RES, "width": HIGH_RES},
        high_res_image_mean=[0.48145466, 0.4578275, 0.40821073],
        high_res_image_std=[0.26862954, 0.26130258, 0.27577711],
        **mean_std,
    )
    processor = tf.DeepseekVLHybridProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=DEEPSEEK_VL_CHAT_TEMPLATE,
        num_image_tokens=DEEPSEEK_IMAGE_TOKENS,
    )
    return TinyParts(config, processor, tf.DeepseekVLHybridForConditionalGeneration)


# Ovis2 ----------------------------------------------------------------------------------------

OVIS2_ATOM = "<IMG_ATOM>"
# Indicator tokens in the order of config.visual_indicator_token_ids (ids follow the atom's).
OVIS2_INDICATORS = ("<IMG_START>", "<IMG_GRID>", "<IMG_COL>", "<IMG_ROW>", "<IMG_END>")
# Qwen2 chat format with "<image>\n" where an image goes (the processor expands it).
OVIS2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' %}<image>\n"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
OVIS2_HIDDEN_STRIDE = 2
OVIS2_VISUAL_VOCAB = 256


def _build_ovis2() -> TinyParts:
    """Ovis2: AIMv2-like tower -> probabilistic visual tokens -> visual embedding table, Qwen2 text."""
    import transformers as tf

    extra = (OVIS2_ATOM, *OVIS2_INDICATORS)
    # The tokenizer's image_token is the atom the model fills; the processor expands "<image>" text.
    tokenizer = _qwen_tokenizer(
        QWEN2_ADDED_TOKENS, OVIS2_CHAT_TEMPLATE, extra=extra, extra_special_tokens={"image_token": OVIS2_ATOM}
    )
    text = _qwen2_text(tokenizer)
    vision = {
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": TILE,
        "patch_size": PATCH,
        "hidden_stride": OVIS2_HIDDEN_STRIDE,
        "vocab_size": OVIS2_VISUAL_VOCAB,
        "num_visual_indicator_tokens": len(OVIS2_INDICATORS),
    }
    config = tf.Ovis2Config(
        vision_config=vision,
        text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids(OVIS2_ATOM),
        visual_indicator_token_ids=[tokenizer.convert_tokens_to_ids(t) for t in OVIS2_INDICATORS],
        vocab_size=text["vocab_size"],
        hidden_size=text["hidden_size"],
        tie_word_embeddings=False,
        architectures=["Ovis2ForConditionalGeneration"],
    )
    mean_std = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    processor = tf.Ovis2Processor(
        image_processor=tf.Ovis2ImageProcessor(size={"height": TILE, "width": TILE}, **mean_std),
        tokenizer=tokenizer,
        chat_template=OVIS2_CHAT_TEMPLATE,
        image_seq_length=(TILE // PATCH // OVIS2_HIDDEN_STRIDE) ** 2,
    )
    return TinyParts(config, processor, tf.Ovis2ForConditionalGeneration)


# Aria -----------------------------------------------------------------------------------------

ARIA_SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<fim_prefix>", "<fim_suffix>",
                       "<|img|>", "<pad>")
# Aria's chat format (ChatML turns, images as <fim_prefix><|img|><fim_suffix>).
ARIA_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'text' %}{{ item['text'] }}"
    "{% elif item['type'] == 'image' %}<fim_prefix><|img|><fim_suffix>{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# AriaImageProcessor accepts only 490 or 980 px canvases, and AriaProcessor passes max_image_size=980
# on every call unless the caller overrides it, so both sizes must map to token and query counts.
ARIA_PATCH = 35  # 14 x 14 / 28 x 28 patches (the releases use 14 px: 1225 / 4900 patches)
ARIA_TOKENS = {490: 4, 980: 8}  # image tokens (projector queries) per crop, by canvas size


def _build_aria() -> TinyParts:
    """Aria: Idefics3 vision tower, cross-attention projector with learned queries, MoE text model."""
    import transformers as tf

    tokenizer = _bpe_tokenizer(
        tf.LlamaTokenizerFast,
        ARIA_SPECIAL_TOKENS,
        (),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        add_bos_token=False,
        add_eos_token=False,
        extra_special_tokens={"image_token": "<|img|>"},
        chat_template=ARIA_CHAT_TEMPLATE,
    )
    text = {
        "model_type": "aria_text",
        "vocab_size": _padded_vocab(tokenizer),
        "hidden_size": TEXT_HIDDEN,
        "intermediate_size": MOE_FFN,  # per expert; shared experts are moe_num_shared_experts x wider
        "num_hidden_layers": TEXT_LAYERS,
        "num_attention_heads": TEXT_HEADS,
        "num_key_value_heads": TEXT_KV_HEADS,
        "max_position_embeddings": 4096,
        "moe_num_experts": MOE_EXPERTS,
        "moe_topk": MOE_TOP_K,
        "moe_num_shared_experts": 2,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "tie_word_embeddings": False,
    }
    vision = {
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": 490,
        "patch_size": ARIA_PATCH,
    }
    config = tf.AriaConfig(
        vision_config=vision,
        text_config=text,
        projector_patch_to_query_dict={(px // ARIA_PATCH) ** 2: n for px, n in ARIA_TOKENS.items()},
        image_token_index=tokenizer.image_token_id,
        tie_word_embeddings=False,
        architectures=["AriaForConditionalGeneration"],
    )
    image_processor = tf.AriaImageProcessor(max_image_size=980, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    processor = tf.AriaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=ARIA_CHAT_TEMPLATE,
        size_conversion=dict(ARIA_TOKENS),
    )
    return TinyParts(config, processor, tf.AriaForConditionalGeneration)


# Llama 4 --------------------------------------------------------------------------------------

LLAMA4_SPECIAL_TOKENS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|finetune_right_pad|>",
    "<|header_start|>",
    "<|header_end|>",
    "<|eom|>",
    "<|eot|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|image_start|>",
    "<|image_end|>",
    "<|image|>",
    "<|patch|>",
    "<|tile_x_separator|>",
    "<|tile_y_separator|>",
)
LLAMA4_TILE = 56  # 4 x 4 patches of 14 px per tile, pixel shuffle 0.5 -> 4 tokens per tile
LLAMA4_SHUFFLE = 0.5


def _build_llama4() -> TinyParts:
    """Llama 4: chunked vision tower + pixel shuffle, text with one dense and one MoE layer (Maverick-like)."""
    import transformers as tf
    from transformers.models.llama4.processing_llama4 import chat_template

    tokenizer = _bpe_tokenizer(
        tf.PreTrainedTokenizerFast,
        LLAMA4_SPECIAL_TOKENS,
        (),
        bos_token="<|begin_of_text|>",
        eos_token="<|eot|>",
        pad_token="<|finetune_right_pad|>",
        chat_template=chat_template,
    )
    ids = {tok: tokenizer.convert_tokens_to_ids(tok) for tok in LLAMA4_SPECIAL_TOKENS}
    text = {
        "vocab_size": _padded_vocab(tokenizer),
        "hidden_size": TEXT_HIDDEN,
        "intermediate_size": MOE_FFN,  # experts and the shared expert
        "intermediate_size_mlp": TEXT_FFN,  # dense layers
        "num_hidden_layers": TEXT_LAYERS,
        "num_attention_heads": TEXT_HEADS,
        "num_key_value_heads": TEXT_KV_HEADS,
        "head_dim": TEXT_HIDDEN // TEXT_HEADS,
        "num_local_experts": MOE_EXPERTS,
        "num_experts_per_tok": 1,  # Llama 4 routes each token to one expert (+ the shared one)
        "interleave_moe_layer_step": 2,  # layer 0 dense, layer 1 MoE
        "no_rope_layer_interval": 2,  # layer 1 without RoPE, as every 4th layer of the releases
        "max_position_embeddings": 4096,
        "bos_token_id": ids["<|begin_of_text|>"],
        "eos_token_id": ids["<|eot|>"],
        "pad_token_id": ids["<|finetune_right_pad|>"],
        "tie_word_embeddings": False,
    }
    vision = {
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": int(VISION_HIDDEN / LLAMA4_SHUFFLE**2),  # also the pixel-shuffled width
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": LLAMA4_TILE,
        "patch_size": 14,
        "pixel_shuffle_ratio": LLAMA4_SHUFFLE,
        "projector_input_dim": TEXT_HIDDEN,
        "projector_output_dim": TEXT_HIDDEN,
        "vision_output_dim": TEXT_HIDDEN,
    }
    config = tf.Llama4Config(
        vision_config=vision,
        text_config=text,
        boi_token_index=ids["<|image_start|>"],
        eoi_token_index=ids["<|image_end|>"],
        image_token_index=ids["<|patch|>"],  # the features replace the patch tokens
        tie_word_embeddings=False,
        architectures=["Llama4ForConditionalGeneration"],
    )
    image_processor = tf.Llama4ImageProcessorFast(
        size={"height": LLAMA4_TILE, "width": LLAMA4_TILE}, max_patches=4, image_mean=[0.5] * 3, image_std=[0.5] * 3
    )
    processor = tf.Llama4Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=14,
        pixel_shuffle_ratio=LLAMA4_SHUFFLE,
        chat_template=chat_template,
    )
    return TinyParts(config, processor, tf.Llama4ForConditionalGeneration)


BUILDERS: dict[str, Callable[[], TinyParts]] = {
    "qwen2_vl": _build_qwen2_vl,
    "glm4v_moe": _build_glm4v_moe,
    "deepseek_vl": _build_deepseek_vl,
    "deepseek_vl_hybrid": _build_deepseek_vl_hybrid,
    "ovis2": _build_ovis2,
    "aria": _build_aria,
    "llama4": _build_llama4,
}

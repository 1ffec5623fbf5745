"""Per-family fixes of ``hooks.model.shrink``: what one family's config needs beyond the generic rules
(``hooks.model.shrink_rules``), one small function each, looked up by ``model_type`` in ``FAMILY_FIXES``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hooks.model.shrink_rules import Dims, is_int, remap_taps

# Per-family fixes ------------------------------------------------------------------------


def _fix_qwen2_vl(data: dict[str, Any], dims: Dims) -> None:
    """Qwen2-VL's vision ``embed_dim`` is the tower width and ``hidden_size`` its output width."""
    vision = data.get("vision_config") or {}
    if "embed_dim" in vision:
        vision["embed_dim"] = dims.vision_hidden
        vision["hidden_size"] = dims.text_hidden


def _fix_gemma3(data: dict[str, Any], dims: Dims) -> None:
    """Gemma3 scales queries by ``query_pre_attn_scalar`` (= head_dim in the releases)."""
    text = data.get("text_config") or {}
    if text.get("query_pre_attn_scalar") is not None:
        text["query_pre_attn_scalar"] = text.get("head_dim") or dims.text_hidden // dims.text_heads


def _fix_swiglu_projector(data: dict[str, Any], dims: Dims) -> None:
    """Aya Vision / Command A Vision: the projector width is top-level (28672 / 36864 in the releases).

    It stays even because the SwiGLU projector splits it into value and gate halves.
    """
    if is_int(data.get("alignment_intermediate_size")):
        data["alignment_intermediate_size"] = 2 * dims.text_ffn


def _fix_paligemma(data: dict[str, Any], dims: Dims) -> None:
    """PaliGemma projects vision features to top-level ``projection_dim`` (copied into the vision
    config), which must equal the shrunk text width; Gemma 2 text also scales by query_pre_attn_scalar."""
    width = (data.get("text_config") or {}).get("hidden_size", dims.text_hidden)
    for key in ("projection_dim", "hidden_size"):
        if is_int(data.get(key)):
            data[key] = width
    vision = data.get("vision_config") or {}
    if is_int(vision.get("projection_dim")):
        vision["projection_dim"] = width
    _fix_gemma3(data, dims)


def _fix_lfm2_vl(data: dict[str, Any], dims: Dims) -> None:
    """LFM2-VL's projector width is top-level ``projector_hidden_size`` (2560 in the releases)."""
    if is_int(data.get("projector_hidden_size")):
        data["projector_hidden_size"] = dims.text_ffn


def _fix_got_ocr2(data: dict[str, Any], dims: Dims) -> None:
    """GOT-OCR2's SAM tower names its FFN ``mlp_dim`` and its conv-neck width ``output_channels``."""
    vision = data.get("vision_config") or {}
    if is_int(vision.get("mlp_dim")):
        vision["mlp_dim"] = dims.vision_ffn
    if is_int(vision.get("output_channels")):
        vision["output_channels"] = dims.vision_hidden


def _fix_perception_lm(data: dict[str, Any], dims: Dims) -> None:
    """Perception LM's timm tower keeps its sizes in ``vision_config.model_args``, not a sub-config.

    ``num_heads`` is set even when absent: the architecture's default (16) would leave a
    32-wide tower with 2-dim heads, too narrow for its 2-D rotary embedding.
    """
    args = (data.get("vision_config") or {}).get("model_args")
    if not isinstance(args, dict):
        return
    if is_int(args.get("embed_dim")):
        args["embed_dim"] = dims.vision_hidden
        args["num_heads"] = dims.vision_heads
    if is_int(args.get("depth")):
        args["depth"] = dims.layers


def _fix_deepseek_vl_hybrid(data: dict[str, Any], dims: Dims) -> None:
    """DeepSeek-VL hybrid's SAM tower (``high_res_vision_config``): SAM's ``mlp_dim`` / ``output_channels``,
    and the model reads ``hidden_states[global_attn_indexes[0] + 1]`` while SAM's last recorded state is the
    channels-first neck output, so the first global block must come before the last block."""
    sam = data.get("high_res_vision_config") or {}
    _fix_got_ocr2({"vision_config": sam}, dims)
    depth, indexes = sam.get("num_hidden_layers"), sam.get("global_attn_indexes")
    if is_int(depth) and depth >= 2 and isinstance(indexes, list) and indexes:
        sam["global_attn_indexes"] = sorted({min(max(int(i), 0), depth - 2) for i in indexes})


OVIS2_VISUAL_VOCAB = 512


def _fix_ovis2(data: dict[str, Any], dims: Dims) -> None:
    """Ovis2's LM head reads top-level ``hidden_size`` / ``vocab_size`` (1536 / 151643 by default, below the
    default text model's 4096 / 151936 and its image token ids): both follow the text config. The tower's
    visual vocabulary (16384 soft tokens) only sizes its head and the visual embedding table."""
    text = data.get("text_config") or {}
    for key in ("hidden_size", "vocab_size"):
        if is_int(text.get(key)):
            data[key] = text[key]
    vision = data.get("vision_config") or {}
    if is_int(vision.get("vocab_size")):
        vision["vocab_size"] = min(vision["vocab_size"], OVIS2_VISUAL_VOCAB)


def _fix_llama4(data: dict[str, Any], dims: Dims) -> None:
    """Llama 4: the vision ``intermediate_size`` is also the pixel-shuffled width (hidden / ratio**2), the
    projector widths (4096) meet the text width, dense layers use ``intermediate_size_mlp`` and experts
    ``intermediate_size``; ``moe_layers`` (layer indexes) is re-derived from ``interleave_moe_layer_step``."""
    vision, text = data.get("vision_config") or {}, data.get("text_config") or {}
    ratio = vision.get("pixel_shuffle_ratio")
    if is_int(vision.get("hidden_size")) and isinstance(ratio, (int, float)) and 0 < ratio <= 1:
        vision["intermediate_size"] = round(vision["hidden_size"] / ratio**2)
    for key in ("projector_input_dim", "projector_output_dim", "vision_output_dim"):
        if is_int(vision.get(key)):
            vision[key] = text.get("hidden_size", dims.text_hidden)
    if is_int(text.get("intermediate_size_mlp")):
        text["intermediate_size_mlp"] = dims.text_ffn
    if is_int(text.get("intermediate_size")):
        text["intermediate_size"] = dims.moe_ffn
    step, depth = text.get("interleave_moe_layer_step"), text.get("num_hidden_layers")
    if is_int(step) and step > 0 and is_int(depth):
        text["moe_layers"] = list(range(min(step, depth) - 1, depth, step))


def _fix_idefics2(data: dict[str, Any], dims: Dims) -> None:
    """Idefics2's perceiver works at the text width; its heads, depth and KV groups shrink like a text
    stack, while ``resampler_n_latents`` (= image tokens in the prompt) is kept."""
    perceiver = data.get("perceiver_config") or {}
    if not perceiver:
        return
    perceiver["hidden_size"] = (data.get("text_config") or {}).get("hidden_size", dims.text_hidden)
    perceiver.update(resampler_n_heads=dims.text_heads, resampler_head_dim=perceiver["hidden_size"] // dims.text_heads,
                     num_key_value_heads=dims.text_kv_heads, resampler_depth=dims.layers)


def _fix_mllama(data: dict[str, Any], dims: Dims) -> None:
    """Mllama's vision config spells heads ``attention_heads``, has a second (global) stack and taps
    hidden states whose concatenation sizes the projector; its text rotary needs a ``rope_type``."""
    vision = data.get("vision_config") or {}
    depth = vision.get("num_hidden_layers")
    if is_int(depth):
        vision["attention_heads"] = dims.vision_heads
        vision["num_global_layers"] = dims.layers
        taps = vision.get("intermediate_layers_indices") or [depth - 1]
        vision["intermediate_layers_indices"] = remap_taps(taps, min(len(taps), depth), depth)
        vision["vision_output_dim"] = vision["hidden_size"] * (len(vision["intermediate_layers_indices"]) + 1)
    text = data.get("text_config") or {}
    if text and text.get("rope_scaling") is None:  # MllamaTextConfig's default does not build
        text["rope_scaling"] = {"rope_type": "default"}


# MobileNetV5 (Gemma 3n) always outputs 2048 channels (timm's MobileNetV5Encoder.num_features).
MOBILENETV5_WIDTH = 2048
# Scalars only: timm mutates ``block_args`` dicts while building (pops ``block_type``), so a shallower
# block list in config.json would not survive one instantiation. 1/16 of the width leaves ~7M
# parameters, most in the attention blocks, whose heads x key_dim the multiplier does not scale.
MOBILENETV5_TINY_ARGS = {"channel_multiplier": 0.0625, "stem_size": 16}


def _fix_gemma3n(data: dict[str, Any], dims: Dims) -> None:
    """Gemma 3n: timm vision tower narrowed through ``model_args`` (its output width is fixed), conformer
    audio, and text fields outside the generic names: per-layer FFN widths, the per-layer input width
    (x vocab x layers: 8 gives 4M parameters for a 262k vocabulary and two layers), LAuReL rank; KV sharing off,
    since a shallow stack has no earlier layer of each attention type to share from."""
    vision = data.get("vision_config") or {}
    if vision:
        vision["hidden_size"] = MOBILENETV5_WIDTH
        vision["model_args"] = {**(vision.get("model_args") or {}), **MOBILENETV5_TINY_ARGS}
    audio = data.get("audio_config") or {}
    if audio:
        audio.update(conf_num_attention_heads=dims.vision_heads, conf_num_hidden_layers=dims.layers,
                     sscp_conv_channel_size=[16, 8])
    text = data.get("text_config") or {}
    depth = text.get("num_hidden_layers")
    if is_int(depth):
        text.update(intermediate_size=[dims.text_ffn] * depth, hidden_size_per_layer_input=8, laurel_rank=8,
                    num_kv_shared_layers=0)


# VQ image tokenizers normalise with GroupNorm(32): every channel count stays a multiple of 32.
VQ_CHANNELS = 32


def _shrink_vq(vq: dict[str, Any], dims: Dims) -> None:
    """Narrow a VQ-VAE (32 channels, ``layers`` res blocks per level) but keep its number of levels:
    the downsampling factor fixes the codes per image, and the codebook size the BPE mapping."""
    if is_int(vq.get("base_channels")):
        vq["base_channels"] = VQ_CHANNELS
    if isinstance(vq.get("channel_multiplier"), list):
        vq["channel_multiplier"] = [1] * len(vq["channel_multiplier"])
    if is_int(vq.get("num_res_blocks")):
        vq["num_res_blocks"] = min(vq["num_res_blocks"], dims.layers)
    if is_int(vq.get("latent_channels")):
        vq["latent_channels"] = min(vq["latent_channels"], VQ_CHANNELS)


def _fix_vq_family(data: dict[str, Any], dims: Dims) -> None:
    """Chameleon / Emu3 / Janus: shrink the VQ tokenizer; Janus's aligners and generation head
    project to the text width (``projection_dim`` / ``image_token_embed_dim``)."""
    _shrink_vq(data.get("vq_config") or {}, dims)
    width = (data.get("text_config") or data).get("hidden_size", dims.text_hidden)
    for sub in (data.get("vision_config") or {}, data.get("vq_config") or {}):
        for key in ("projection_dim", "image_token_embed_dim"):
            if is_int(sub.get(key)):
                sub[key] = width


QWEN_VL_RESAMPLER_HEAD = 128  # Qwen-VL's resampler has output_dim // 128 heads


def _fix_qwen_vl(data: dict[str, Any], dims: Dims) -> None:
    """Qwen-VL (remote code, ``model_type: qwen`` with a ``visual`` dict): the resampler's ``output_dim`` is the
    LM width (its features replace the image pads' embeddings) and it has ``output_dim // 128`` heads, so the LM
    keeps at least 128 (``kv_channels`` follows the heads)."""
    visual = data.get("visual")
    if not isinstance(visual, dict) or not is_int(data.get("hidden_size")):
        return
    hidden = max(int(data["hidden_size"]), QWEN_VL_RESAMPLER_HEAD)
    data["hidden_size"] = visual["output_dim"] = hidden
    if is_int(data.get("num_attention_heads")) and is_int(data.get("kv_channels")):
        data["kv_channels"] = hidden // int(data["num_attention_heads"])


FAMILY_FIXES: dict[str, Callable[[dict[str, Any], Dims], None]] = {
    "qwen": _fix_qwen_vl,
    "qwen2_vl": _fix_qwen2_vl,
    "gemma3": _fix_gemma3,
    "aya_vision": _fix_swiglu_projector,
    "cohere2_vision": _fix_swiglu_projector,
    "paligemma": _fix_paligemma,
    "lfm2-vl": _fix_lfm2_vl,  # transformers 4.57.1 spells Lfm2VlConfig.model_type with a dash
    "lfm2_vl": _fix_lfm2_vl,
    "got_ocr2": _fix_got_ocr2,
    "perception_lm": _fix_perception_lm,
    "deepseek_vl_hybrid": _fix_deepseek_vl_hybrid,
    "ovis2": _fix_ovis2,
    "llama4": _fix_llama4,
    "idefics2": _fix_idefics2,
    "mllama": _fix_mllama,
    "gemma3n": _fix_gemma3n,
    "chameleon": _fix_vq_family,
    "emu3": _fix_vq_family,
    "janus": _fix_vq_family,
}

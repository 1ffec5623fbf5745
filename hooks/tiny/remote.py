"""Tiny *remote-code* VLM (``remote_vlm``): the model folder ships its own Python code.

Many VLMs on the Hub (Kimi, InternVL-Chat, MiniCPM-V, Phi-3-Vision, ...) are not
transformers classes: ``config.json`` has an ``auto_map`` and the folder holds
``configuration_*.py`` / ``modeling_*.py`` / ``processing_*.py`` that transformers
imports only with ``trust_remote_code=True``. This builder produces such a folder
so the probe, the plan, the shrinker, the contract smoke and the generated plugin
are tested on that path too.

The code lives as ordinary, readable modules in ``hooks/tiny/remote_vlm/``. The builder
marks the classes with ``register_for_auto_class`` (transformers' documented way
to share custom code), so ``save_pretrained`` copies those files verbatim into the
model folder and writes the ``auto_map`` entries of ``config.json`` and
``processor_config.json``. The tokenizer (a locally trained byte-level BPE with
the model's own media tokens) and the image processor (``SiglipImageProcessor``)
are standard transformers classes, as in most remote-code releases.

``python -m hooks.tiny remote_vlm DEST``
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hooks.tiny.common import (
    TEXT_FFN,
    TEXT_HEADS,
    TEXT_HIDDEN,
    TEXT_KV_HEADS,
    TEXT_LAYERS,
    VISION_DEPTH,
    VISION_FFN,
    VISION_HEADS,
    VISION_HIDDEN,
    TinyParts,
    _bpe_tokenizer,
    _padded_vocab,
)

ARCH = "remote_vlm"
CODE_DIR = Path(__file__).resolve().parent / "remote_vlm"
CHAT_TEMPLATE_FILE = CODE_DIR / "chat_template.jinja"

# Own special tokens, Kimi-style media markers: one <|media_pad|> per image in the chat text.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|media_start|>", "<|media_pad|>", "<|media_end|>")
IMAGE_TOKEN = "<|media_pad|>"
# 64x64 images in 16x16 patches: a 4x4 grid, merged 2x2 by the projector into 4 tokens.
IMAGE_SIZE = 64
PATCH_SIZE = 16
MERGE_SIZE = 2


def _tokenizer(chat_template: str):
    """Byte-level BPE in a Qwen2 fast tokenizer class, with the model's own special tokens."""
    import transformers as tf

    return _bpe_tokenizer(
        tf.Qwen2TokenizerFast,
        SPECIAL_TOKENS,
        (),
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(SPECIAL_TOKENS[1:]),
        errors="replace",
        split_special_tokens=False,
        chat_template=chat_template,
    )


def _config(tokenizer, config_cls: type):
    """The composite config at the project's tiny sizes; token ids read from the tokenizer."""
    text = {
        "vocab_size": _padded_vocab(tokenizer),
        "hidden_size": TEXT_HIDDEN,
        "intermediate_size": TEXT_FFN,
        "num_hidden_layers": TEXT_LAYERS,
        "num_attention_heads": TEXT_HEADS,
        "num_key_value_heads": TEXT_KV_HEADS,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    vision = {
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": IMAGE_SIZE,
        "patch_size": PATCH_SIZE,
    }
    return config_cls(
        vision_config=vision,
        text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        merge_size=MERGE_SIZE,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def _build_remote_vlm() -> TinyParts:
    """Config, processor and model class of ``remote_vlm``, all marked for ``auto_map`` saving."""
    import transformers as tf

    from hooks.tiny.remote_vlm.configuration_remote_vlm import RemoteVlmConfig
    from hooks.tiny.remote_vlm.modeling_remote_vlm import RemoteVlmForConditionalGeneration
    from hooks.tiny.remote_vlm.processing_remote_vlm import RemoteVlmProcessor

    RemoteVlmConfig.register_for_auto_class("AutoConfig")
    RemoteVlmForConditionalGeneration.register_for_auto_class("AutoModelForImageTextToText")
    RemoteVlmProcessor.register_for_auto_class("AutoProcessor")
    chat_template = CHAT_TEMPLATE_FILE.read_text()
    tokenizer = _tokenizer(chat_template)
    config = _config(tokenizer, RemoteVlmConfig)
    image_processor = tf.SiglipImageProcessor(
        size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5]
    )
    processor = RemoteVlmProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=chat_template,
        image_token=IMAGE_TOKEN,
        tokens_per_image=config.tokens_per_image,
    )
    return TinyParts(config, processor, RemoteVlmForConditionalGeneration)


BUILDERS: dict[str, Callable[[], TinyParts]] = {ARCH: _build_remote_vlm}


# ---------------------------------------------------------------------------- remote_tiles

TILES_ARCH = "remote_tiles"
TILES_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>")


def _build_remote_tiles() -> TinyParts:
    """InternVL-Chat-style remote code (see ``hooks/tiny/remote_vlm/__init__.py``): no processor class,
    so the tokenizer is what is saved beside the model; the conversation and tiling live in Python."""
    import transformers as tf

    from hooks.tiny.remote_vlm.configuration_remote_tiles import RemoteTilesConfig
    from hooks.tiny.remote_vlm.modeling_remote_tiles import RemoteTilesForCausalLM

    RemoteTilesConfig.register_for_auto_class("AutoConfig")
    RemoteTilesForCausalLM.register_for_auto_class("AutoModelForCausalLM")
    tokenizer = _bpe_tokenizer(tf.Qwen2TokenizerFast, TILES_TOKENS, (), unk_token=None, bos_token=None,
                               eos_token="<|im_end|>", pad_token="<|endoftext|>",
                               additional_special_tokens=list(TILES_TOKENS[1:]), errors="replace",
                               split_special_tokens=False)
    config = _config(tokenizer, RemoteTilesConfig)
    del config.image_token_id  # the context token's id is a model attribute here, set by chat()
    return TinyParts(config, tokenizer, RemoteTilesForCausalLM)


BUILDERS[TILES_ARCH] = _build_remote_tiles


# ---------------------------------------------------------------------------- custom_tiles

CUSTOM_ARCH = "custom_tiles"


def _without_model_type(folder: Path) -> None:
    """config.json as some releases ship it: no ``model_type``, no ``auto_map``, only ``architectures``."""
    import json

    path = folder / "config.json"
    data = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("model_type", "auto_map")}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _build_custom_tiles() -> TinyParts:
    """``remote_tiles`` whose config.json AutoConfig cannot load at all: MindSpeed-MM's custom-model path
    (``BaseModel``: ``_from_config``/``from_pretrained`` on the folder's code, "Building custom model")."""
    parts = _build_remote_tiles()
    return TinyParts(parts.config, parts.processor, parts.model_class, finish=_without_model_type)


BUILDERS[CUSTOM_ARCH] = _build_custom_tiles

"""Tiny builders for VLMs whose processor writes the prompt itself and that have no chat template.

Registered through ``hooks.tiny.FAMILY_MODULES``; both train through branch c's ``prompt``
convention (the processor places the image and the record's prompt, the answer and the end of
turn follow it), so the tiny shapes keep the processor's own prompt layout intact:

* ``fuyu``: no vision tower. The processor cuts the image into 8 px patches (released: 30 px)
  inside a 32 px canvas and writes ``|SPEAKER|`` per patch and ``|NEWLINE|`` per patch row, then
  ``<s>``, the prompt and ``<0x04>`` (beginning of answer); one linear layer embeds each flattened
  patch into the Persimmon decoder. The processor finds the two image ids as the *second* token of
  ``tokenizer.encode("|SPEAKER|")`` (the released SentencePiece-style tokenizer puts a prefix space
  first), so the byte-level BPE here prepends a space to every text it normalizes, as that
  tokenizer does, and keeps the two image tokens as vocabulary entries (``_fuyu_backend``). The
  patch count varies with the image's aspect ratio.
* ``kosmos2``: CLIP tower, a latent-query resampler (``latent_query_num`` image embeddings) and a
  decoder with sinusoidal positions. The processor writes ``<s><image>`` + one placeholder per
  latent query + ``</image>`` before the prompt and marks the placeholders in
  ``image_embeds_position_mask``; the placeholders' ids are the ``latent_query_num`` ids after
  ``<unk>``, so the tokenizer keeps XLM-R's ids (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3,
  the BPE after them) and the latent-query count stays at the processor's default of 64.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from hooks.tiny.common import (
    CLIP_MEAN_STD,
    HALF,
    PATCH,
    QWEN2_SPLIT_REGEX,
    TEXT_FFN,
    TEXT_HEADS,
    TEXT_HIDDEN,
    TEXT_LAYERS,
    TILE,
    VISION_DEPTH,
    VISION_FFN,
    VISION_HEADS,
    VISION_HIDDEN,
    TinyParts,
    _padded_vocab,
    _train_bpe,
)

# Fuyu ------------------------------------------------------------------------------------------

# Its processor looks these up by name: BOS, end of text, and the box / point / beginning-of-answer
# tags it writes as byte tokens; the image patch and patch-row end are ordinary vocabulary entries.
FUYU_SPECIAL = ("<unk>", "<s>", "|ENDOFTEXT|", *(f"<0x0{i}>" for i in range(5)))
FUYU_IMAGE = ("|SPEAKER|", "|NEWLINE|")


def _fuyu_backend() -> Any:
    """The shared BPE with the released tokenizer's prefix space on every text it normalizes.

    The processor takes the image ids as ``encode("|SPEAKER|", add_special_tokens=False)[1]``: the
    prefix first, then the token. Added tokens are matched before (or, normalized, together with) the
    prefix, so the two image tokens are vocabulary entries instead, split off with the space before
    them and looked up whole (``ignore_merges``).
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers
    from tokenizers import pre_tokenizers as pre

    data = json.loads(_train_bpe().to_str())
    vocab = data["model"]["vocab"]
    vocab.update({tok: len(vocab) + i for i, tok in enumerate(FUYU_IMAGE)})
    data["model"]["ignore_merges"] = True
    tok = Tokenizer.from_str(json.dumps(data))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Prepend(" ")])
    image = "(?:" + "|".join(re.escape(t) for t in FUYU_IMAGE) + ")"
    tok.pre_tokenizer = pre.Sequence([
        pre.Split(Regex(rf"{image}|\s(?={image})|" + QWEN2_SPLIT_REGEX), behavior="isolated"),
        pre.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in FUYU_SPECIAL])
    return tok


def _build_fuyu() -> TinyParts:
    """Fuyu: image patches embedded by one linear layer straight into a Persimmon decoder."""
    import transformers as tf

    tokenizer = tf.LlamaTokenizerFast(
        tokenizer_object=_fuyu_backend(),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="|ENDOFTEXT|",
        pad_token="|ENDOFTEXT|",
        add_bos_token=True,
        add_eos_token=False,
        legacy=False,
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )
    ids = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in
           (("bos", "<s>"), ("eos", "|ENDOFTEXT|"), ("image", "|SPEAKER|"))}
    text = {
        "model_type": "persimmon",
        "vocab_size": _padded_vocab(tokenizer),
        "hidden_size": TEXT_HIDDEN,
        "intermediate_size": TEXT_FFN,
        "num_hidden_layers": TEXT_LAYERS,
        "num_attention_heads": TEXT_HEADS,
        "hidden_act": "relu2",
        "max_position_embeddings": 4096,
        "qk_layernorm": True,
        "partial_rotary_factor": 0.5,
        "rope_theta": 25000.0,
        "bos_token_id": ids["bos"],
        "eos_token_id": ids["eos"],
        "pad_token_id": ids["eos"],
        "tie_word_embeddings": False,
    }
    config = tf.FuyuConfig(
        vocab_size=text["vocab_size"],
        hidden_size=TEXT_HIDDEN,
        image_size=TILE,
        patch_size=PATCH,
        num_channels=3,
        text_config=text,
        bos_token_id=ids["bos"],
        eos_token_id=ids["eos"],
        pad_token_id=ids["eos"],
        image_token_id=ids["image"],
        tie_word_embeddings=False,
        architectures=["FuyuForCausalLM"],
    )
    image_processor = tf.FuyuImageProcessor(
        size={"height": TILE, "width": TILE}, patch_size={"height": PATCH, "width": PATCH}, **HALF
    )
    processor = tf.FuyuProcessor(image_processor=image_processor, tokenizer=tokenizer)
    return TinyParts(config, processor, tf.FuyuForCausalLM)


# Kosmos-2 --------------------------------------------------------------------------------------

XLMR_SPECIAL = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0..3, as in the released XLM-R vocabulary
KOSMOS2_LATENT_QUERIES = 64  # the processor's default num_image_tokens: both must agree


def _xlmr_ordered_bpe() -> Any:
    """The shared BPE with XLM-R's four special tokens at ids 0..3 and every BPE id after them."""
    from tokenizers import AddedToken, Tokenizer

    data = json.loads(_train_bpe().to_str())
    vocab = data["model"]["vocab"]
    data["model"]["vocab"] = {
        **{tok: i for i, tok in enumerate(XLMR_SPECIAL)},
        **{tok: i + len(XLMR_SPECIAL) for tok, i in vocab.items()},
    }
    tok = Tokenizer.from_str(json.dumps(data))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in XLMR_SPECIAL])
    return tok


def _build_kosmos2() -> TinyParts:
    """Kosmos-2: CLIP tower + latent-query resampler + a decoder; the processor places the image block."""
    import transformers as tf

    tokenizer = tf.XLMRobertaTokenizerFast(
        tokenizer_object=_xlmr_ordered_bpe(),
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<unk>",
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )
    image_processor = tf.CLIPImageProcessor(
        size={"height": TILE, "width": TILE},
        crop_size={"height": TILE, "width": TILE},
        do_center_crop=False,
        **CLIP_MEAN_STD,
    )
    # The processor adds its tag and patch-index tokens to the tokenizer: the vocabulary is sized after it.
    processor = tf.Kosmos2Processor(image_processor=image_processor, tokenizer=tokenizer)
    text = {
        "vocab_size": _padded_vocab(tokenizer),
        "embed_dim": TEXT_HIDDEN,
        "layers": TEXT_LAYERS,
        "ffn_dim": TEXT_FFN,
        "attention_heads": TEXT_HEADS,
        "max_position_embeddings": 2048,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    vision = {
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": TILE,
        "patch_size": PATCH,
    }
    config = tf.Kosmos2Config(
        text_config=text,
        vision_config=vision,
        latent_query_num=KOSMOS2_LATENT_QUERIES,
        architectures=["Kosmos2ForConditionalGeneration"],
    )
    return TinyParts(config, processor, tf.Kosmos2ForConditionalGeneration)


BUILDERS: dict[str, Callable[[], TinyParts]] = {
    "fuyu": _build_fuyu,
    "kosmos2": _build_kosmos2,
}

"""Build tiny, random-weight but *real* VLM directories and a matching demo data set.

Tests and the README demo need a model directory that looks exactly like a Hub
checkpoint (config, safetensors, tokenizer, processor, chat template) without a
network or gigabytes of weights. Each directory is built from the real
transformers classes, so everything downstream (AutoProcessor, the model's
forward, MindSpeed-MM's loaders) exercises the same code paths as with the full
model. Only the sizes are tiny: text 2 layers / hidden 64, vision 2 blocks /
hidden 32, a byte-level BPE tokenizer trained here on a built-in corpus, and a
pixel budget that turns a 64x64 image into 4 vision tokens.

``python -m hooks.tiny ARCH DEST [--seed N]``, ``python -m hooks.tiny --dataset DEST``,
``python -m hooks.tiny --list``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hooks import exit_now

BUILD_VERSION = 1
MARKER = ".tiny-build.json"

# Sizes shared by every family: small enough to build and run in seconds on a CPU,
# large enough that heads, KV groups, mRoPE sections and experts stay non-trivial.
TEXT_HIDDEN = 64
TEXT_LAYERS = 2
TEXT_HEADS = 4
TEXT_KV_HEADS = 2
TEXT_FFN = 128
VISION_HIDDEN = 32
VISION_DEPTH = 2
VISION_HEADS = 2
VISION_FFN = 64
MOE_EXPERTS = 4
MOE_TOP_K = 2
MOE_FFN = 32
BPE_MERGES = 3000
VOCAB_ALIGN = 128  # real checkpoints pad the embedding past the tokenizer; so do we

# The Qwen2 pre-tokenizer split regex (also used by Qwen2.5/Qwen3 and many others).
QWEN2_SPLIT_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# Special tokens in the order the Qwen2 family assigns them ids (after the BPE vocab).
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# Added but not "special" (they survive skip_special_tokens), as in the released files.
QWEN2_ADDED_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
QWEN3_ADDED_TOKENS = (*QWEN2_ADDED_TOKENS, "<tool_response>", "</tool_response>", "<think>", "</think>")

# Chat template shipped with Qwen2-VL and Qwen2.5-VL Instruct checkpoints.
QWEN2_VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Chat template shipped with Qwen3-VL Instruct checkpoints (dense and MoE).
QWEN3_VL_CHAT_TEMPLATE = """{%- set image_count = namespace(value=0) %}
{%- set video_count = namespace(value=0) %}
{%- macro render_content(content, do_vision_count) %}
    {%- if content is string %}
        {{- content }}
    {%- else %}
        {%- for item in content %}
            {%- if 'image' in item or 'image_url' in item or item.type == 'image' %}
                {%- if do_vision_count %}
                    {%- set image_count.value = image_count.value + 1 %}
                {%- endif %}
                {%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}
                <|vision_start|><|image_pad|><|vision_end|>
            {%- elif 'video' in item or item.type == 'video' %}
                {%- if do_vision_count %}
                    {%- set video_count.value = video_count.value + 1 %}
                {%- endif %}
                {%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}
                <|vision_start|><|video_pad|><|vision_end|>
            {%- elif 'text' in item %}
                {{- item.text }}
            {%- endif %}
        {%- endfor %}
    {%- endif %}
{%- endmacro %}
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- render_content(messages[0].content, false) + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n\
You are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and \
arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \
\\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + render_content(messages[0].content, false) + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- set content = render_content(message.content, true) %}
    {%- if message.role == "system" %}
        {%- if not loop.first %}
            {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
        {%- endif %}
    {%- elif message.role == "user" %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

# A small English corpus for the BPE: enough distinct words for a few thousand merges,
# and the vocabulary of the demo data set and chat templates so those encode compactly.
_CORPUS_TEXT = """\
You are a helpful assistant. Describe the picture in one short sentence.
The image shows a square on a plain background. The square is small and bright.
What color is this? It is mostly red. It is mostly green. It is mostly blue.
Look at the top left corner, then at the bottom right corner of the photo.
A model that reads pictures and text must learn to connect the two.
Training starts with a random network; the loss should go down step by step.
Each batch holds a few samples, and every sample pairs an image with a question.
The answer is written by the assistant, and only the answer is used as the label.
Small tests run quickly on a laptop, so mistakes are found before the big run.
The weather today is calm and clear, with a light wind from the west.
She opened the window, looked at the garden, and counted seven yellow flowers.
Numbers such as 1, 2, 3, 10, 42 and 2024 appear in many documents and tables.
Please answer the question with a single word, or with a short phrase.
The quick brown fox jumps over the lazy dog near the quiet river bank.
A dark purple circle sits next to a pale orange triangle on a white page.
Computers store pictures as grids of pixels; each pixel has red, green and blue values.
Tokens are pieces of words, and a tokenizer splits every sentence into tokens.
When the video starts, a ball rolls across the floor and stops by the door.
The report lists the results, explains the method, and suggests what to try next.
Thank you for the question. Here is what I can see in the image.
"""
# Common English words; shuffled into sentences so the BPE learns a few thousand merges.
_WORDS = """
about above across act add after again against age ago agree air all almost alone along already also
always among amount and animal answer any appear apple area arm army around arrive art as ask at away
baby back bad bag ball bank base be bear beat beauty bed before begin behind believe bell best better
between big bird black block blood blow board boat body bone book born both bottom box boy branch bread
break bright bring broad brother brown build burn busy but buy by call came camp can capital captain car
card care carry case cat catch cause cell cent center century certain chair chance change character
charge chart check chief child choose church circle city claim class clean clear climb clock close
cloth cloud coast coat cold collect college colony color column come common company compare complete
condition connect consider contain continue control cook cool copy corn corner correct cost cotton could
count country course cover cow crease create crop cross crowd cry current cut dad dance danger dark day
dead deal dear death decide decimal deep degree depend describe desert design determine develop
dictionary did differ difficult direct discuss distant divide division doctor does dog dollar done door
double down draw dream dress drink drive drop dry duck during each ear early earth ease east eat edge
effect egg eight either electric element else end enemy energy engine enough enter equal equate even
evening event ever every exact example except excite exercise expect experience experiment eye face fact
fair fall family famous far farm fast father favor fear feed feel feet fell felt few field fig fight
figure fill final find fine finger finish fire first fish fit five flat floor flow flower fly follow
food foot for force forest form forward found four fraction free fresh friend from front fruit full fun
game garden gas gather gave general gentle get girl give glad glass gold gone good got govern grand
grass gray great green grew ground group grow guess guide gun hair half hand happen happy hard has hat
have head hear heard heart heat heavy held help her here high hill him his history hit hold hole home
hope horse hot hour house how huge human hundred hunt hurry ice idea imagine inch include indicate
industry insect instant instrument interest invent iron island job join joy jump just keep kept key kill
kind king knew know lady lake land language large last late laugh law lay lead learn least leave led
left leg length less letter level lie life lift light like line liquid list listen little live locate
log lone long look lost lot loud love low machine made magnet main major make man many map mark market
mass master match material matter may mean measure meat meet melody member metal method middle might
mile milk million mind mine minute miss mix modern molecule moment money month moon more morning most
mother motion mount mountain mouth move much multiply music must name nation natural nature near
necessary neck need neighbor never new next night nine noise none noon nor north nose note nothing
notice noun now number numeral object observe occur ocean off offer office often oil old once one only
open operate opposite order organ original other our out over own oxygen page paint pair paper
paragraph parent part particular party pass past path pattern pay people perhaps period person picture
piece pitch place plain plan plane planet plant play please plural poem point poor populate port pose
position possible post pound power practice prepare present press pretty print probable problem process
produce product proper property protect prove provide pull push put quart question quick quiet quite
quotient race radio rail rain raise ran range rather reach read ready real reason receive record region
remember repeat reply represent require rest result rich ride right ring rise river road rock roll room
root rope rose round row rub rule run safe said sail salt same sand sat save saw say scale school science
score sea search season seat second section see seed seem segment select self sell send sense sentence
separate serve set settle seven several shall shape share sharp she sheet shell shine ship shoe shop
shore short should shoulder shout show side sight sign silent silver similar simple since sing single
sister sit six size skill skin sky sleep slip slow small smell smile snow soft soil soldier solution
solve some son song soon sound south space speak special speech speed spell spend spoke spot spread
spring stand star start state station stay stead steam steel step stick still stone stood stop store
storm story straight strange stream street stretch string strong student study subject substance
subtract success such sudden suffix sugar suggest suit summer sun supply support sure surface surprise
swim syllable symbol system table tail take talk tall teach team teeth tell temperature ten term test
than thank that the their them then there these thick thin thing think third this those though thought
thousand three through throw thus tie time tiny tire together told tone too took tool top total touch
toward town track trade train travel tree triangle trip trouble truck true try tube turn twenty two
type under unit until up use usual valley value vary verb very view village visit voice vowel wait walk
wall want war warm wash watch water wave way wear weather week weight well went were west what wheel
when where whether which while white who whole whose why wide wife wild will win wind window wing winter
wire wish with woman women wonder wood word work world would write written wrong wrote yard year yellow
yes yet you young your
"""
_COLORS = ("red", "green", "blue", "yellow", "purple", "orange", "white", "black", "gray", "pink")
_SHAPES = ("square", "circle", "triangle", "stripe", "dot", "line", "box", "ring")
_PLACES = ("center", "corner", "edge", "top", "bottom", "left side", "right side", "middle")


def _corpus() -> Iterator[str]:
    """Yield the built-in text and deterministic sentences for BPE training (no randomness)."""
    yield from _CORPUS_TEXT.splitlines()
    words = _WORDS.split()
    for stride in (1, 7, 13, 29):
        order = [words[(k * stride) % len(words)] for k in range(len(words))]
        for start in range(0, len(order), 12):
            chunk = order[start : start + 12]
            yield " ".join(chunk).capitalize() + "."
            yield ", ".join(w.title() for w in chunk[:4]) + f" and {start} more."
    for i, color in enumerate(_COLORS):
        for j, shape in enumerate(_SHAPES):
            place = _PLACES[(i + j) % len(_PLACES)]
            other = _COLORS[(i + j + 3) % len(_COLORS)]
            yield f"There is a {color} {shape} near the {place}, next to a {other} one."
            yield f"Mostly {color}, with a {other} {shape} at the {place}."


def _train_bpe() -> Any:
    """Train a byte-level BPE with the Qwen2 split regex; deterministic for a fixed corpus."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, trainers
    from tokenizers import pre_tokenizers as pre

    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre.Sequence(
        [
            pre.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    alphabet = pre.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + BPE_MERGES,
        min_frequency=1,
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(list(_corpus()), trainer=trainer)
    return tok


def _bpe_tokenizer(
    tokenizer_cls: type, special: tuple[str, ...], added: tuple[str, ...], **kwargs: Any
) -> Any:
    """Wrap the BPE in a family's fast tokenizer class; special tokens get ids after the BPE vocab.

    Appending them (instead of letting the trainer put them first) mirrors the
    released vocabularies, where e.g. ``<|endoftext|>`` follows all merges.
    """
    from tokenizers import AddedToken

    tok = _train_bpe()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])
    kwargs.setdefault("clean_up_tokenization_spaces", False)
    kwargs.setdefault("model_max_length", 32768)
    return tokenizer_cls(tokenizer_object=tok, **kwargs)


def _qwen_tokenizer(
    added: tuple[str, ...], chat_template: str, extra: tuple[str, ...] = (), **kwargs: Any
) -> Any:
    """A Qwen2TokenizerFast with the Qwen special tokens (plus a family's ``extra`` ones)."""
    import transformers as tf

    return _bpe_tokenizer(
        tf.Qwen2TokenizerFast,
        QWEN_SPECIAL_TOKENS + extra,
        added,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(QWEN_SPECIAL_TOKENS[1:] + extra),
        errors="replace",
        split_special_tokens=False,
        chat_template=chat_template,
        **kwargs,
    )


def text_dims(tokenizer: Any) -> dict[str, Any]:
    """The language-model sizes every tiny family shares (vocab padded past the tokenizer)."""
    return {
        "vocab_size": _padded_vocab(tokenizer),
        "hidden_size": TEXT_HIDDEN,
        "intermediate_size": TEXT_FFN,
        "num_hidden_layers": TEXT_LAYERS,
        "num_attention_heads": TEXT_HEADS,
        "num_key_value_heads": TEXT_KV_HEADS,
    }


def _padded_vocab(tokenizer: Any) -> int:
    """Embedding rows: the tokenizer length rounded up, as released checkpoints do."""
    return -(-len(tokenizer) // VOCAB_ALIGN) * VOCAB_ALIGN


def _qwen_ids(tokenizer: Any) -> dict[str, int]:
    """Token ids the Qwen-VL configs need, read from the tokenizer (never hard-coded)."""
    ids = {
        "image_token_id": "<|image_pad|>",
        "video_token_id": "<|video_pad|>",
        "vision_start_token_id": "<|vision_start|>",
        "vision_end_token_id": "<|vision_end|>",
        "bos_token_id": "<|endoftext|>",
        "eos_token_id": "<|im_end|>",
        "pad_token_id": "<|endoftext|>",
    }
    return {key: tokenizer.convert_tokens_to_ids(tok) for key, tok in ids.items()}


def _qwen_text_config(tokenizer: Any, ids: dict[str, int], mrope_section: list[int]) -> dict[str, Any]:
    """Text sub-config shared by the Qwen-VL families; head_dim 16 so mRoPE sections sum to 8."""
    return {
        **text_dims(tokenizer),
        "max_position_embeddings": 4096,
        "bos_token_id": ids["bos_token_id"],
        "eos_token_id": ids["eos_token_id"],
        "pad_token_id": ids["pad_token_id"],
        "tie_word_embeddings": False,
        "rope_scaling": {"rope_type": "default", "mrope_section": mrope_section},
    }


def _vision_token_ids(ids: dict[str, int]) -> dict[str, int]:
    """The top-level token ids every Qwen-VL config carries."""
    keys = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    return {key: ids[key] for key in keys}


@dataclass
class TinyParts:
    """What a family builder returns; the common code seeds, instantiates and saves."""

    config: Any  # transformers.PretrainedConfig
    processor: Any  # transformers.ProcessorMixin
    model_class: type


def _qwen_pixel_budget(patch: int, merge: int) -> dict[str, int]:
    """Pixel limits so a 64x64 image becomes a 2x2 grid of merged tokens (4 vision tokens)."""
    factor = patch * merge
    return {"shortest_edge": factor * factor, "longest_edge": 4 * factor * factor}


def _qwen2_vl_text() -> tuple[Any, dict[str, int], dict[str, Any]]:
    """Tokenizer, special ids and mRoPE Qwen2 text config shared by Qwen2-VL and Qwen2.5-VL."""
    tokenizer = _qwen_tokenizer(QWEN2_ADDED_TOKENS, QWEN2_VL_CHAT_TEMPLATE)
    ids = _qwen_ids(tokenizer)
    text = _qwen_text_config(tokenizer, ids, [2, 3, 3])
    text["rope_scaling"]["type"] = "mrope"
    text.update(rope_theta=1000000.0, max_window_layers=TEXT_LAYERS, use_sliding_window=False)
    return tokenizer, ids, text


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


# Families with a SigLIP/InternViT tower and a Qwen2 or Gemma3 language model -----------------

# Square tiles of 32 px in 8 px patches: 16 patch features per tile.
TILE = 32
PATCH = 8


def _qwen2_text(tokenizer: Any) -> dict[str, Any]:
    """A plain Qwen2 language model sub-config (used by LLaVA-OneVision and InternVL)."""
    return {
        "model_type": "qwen2",
        **text_dims(tokenizer),
        "max_position_embeddings": 4096,
        "max_window_layers": TEXT_LAYERS,
        "rope_theta": 1000000.0,
        "bos_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
        "pad_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        "tie_word_embeddings": False,
    }


def _siglip_vision() -> dict[str, Any]:
    """A SigLIP tower without the pooling head (unused by VLMs; it would leave params without grads)."""
    return {
        "model_type": "siglip_vision_model",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_FFN,
        "num_hidden_layers": VISION_DEPTH,
        "num_attention_heads": VISION_HEADS,
        "image_size": TILE,
        "patch_size": PATCH,
        "vision_use_head": False,
    }


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


ARCHS: dict[str, Callable[[], TinyParts]] = {
    "qwen2_5_vl": _build_qwen2_5_vl,
    "qwen3_vl": _build_qwen3_vl,
    "qwen3_vl_moe": _build_qwen3_vl_moe,
    "llava_onevision": _build_llava_onevision,
    "internvl": _build_internvl,
    "gemma3": _build_gemma3,
    "glm4v": _build_glm4v,
}

# More families live in sibling modules, each exposing BUILDERS: dict[str, Callable[[], TinyParts]].
FAMILY_MODULES = ("hooks.tiny_llava", "hooks.tiny_idefics", "hooks.tiny_misc", "hooks.tiny_remote")


def all_builders() -> dict[str, Callable[[], TinyParts]]:
    """Every tiny architecture: the ones above plus those of the family modules that exist."""
    import importlib

    found = dict(ARCHS)
    for name in FAMILY_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
            continue
        found.update(module.BUILDERS)
    return found


def _marker(arch: str, seed: int) -> dict[str, Any]:
    """Identity of a build; a directory with an equal marker is reused as is."""
    return {"arch": arch, "seed": seed, "version": BUILD_VERSION}


def _is_complete(dest: Path, arch: str, seed: int) -> bool:
    """True when dest holds a finished build of the same arch, seed and builder version."""
    marker = dest / MARKER
    if not (marker.is_file() and (dest / "config.json").is_file()):
        return False
    if not any(dest.glob("*.safetensors")):
        return False
    try:
        return json.loads(marker.read_text()) == _marker(arch, seed)
    except (OSError, ValueError):
        return False


def _write_model(parts: TinyParts, out: Path, seed: int) -> None:
    """Instantiate random weights deterministically and save them as bf16 safetensors."""
    import torch

    torch.manual_seed(seed)
    model = parts.model_class(parts.config)
    model = model.to(torch.bfloat16)
    model.config.dtype = "bfloat16"
    model.save_pretrained(out, safe_serialization=True)


def _publish_mode(path: Path) -> None:
    """Give the build the usual umask-based modes (mkdtemp and safetensors create 0700/0600)."""
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o777 & ~umask)
    for item in path.iterdir():
        item.chmod((0o777 if item.is_dir() else 0o666) & ~umask)


def _replace_dir(tmp: Path, dest: Path) -> None:
    """Move a finished build into place; only ever removes an earlier tiny build or an empty dir."""
    if dest.exists():
        if any(dest.iterdir()) and not (dest / MARKER).is_file():
            raise FileExistsError(f"{dest} is not empty and is not a tiny build; refusing to overwrite")
        shutil.rmtree(dest)
    tmp.rename(dest)


def build_tiny_model(arch: str, dest: Path, *, seed: int = 0) -> Path:
    """Write a complete tiny HF model directory for ``arch`` into ``dest`` and return it.

    The build happens in a sibling temporary directory and is moved into place
    only when complete, so an interrupted build never looks finished; the marker
    file makes a repeated call with the same arch and seed a no-op.
    """
    builders = all_builders()
    if arch not in builders:
        raise KeyError(f"unknown arch {arch!r}; known: {', '.join(sorted(builders))}")
    dest = Path(dest)
    if _is_complete(dest, arch, seed):
        return dest
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        parts = builders[arch]()
        _write_model(parts, tmp, seed)
        parts.processor.save_pretrained(tmp)
        (tmp / MARKER).write_text(json.dumps(_marker(arch, seed), sort_keys=True, indent=2) + "\n")
        _publish_mode(tmp)
        _replace_dir(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest


# Demo data set ---------------------------------------------------------------------------

_DEMO_COLORS: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("red", (220, 30, 30)),
    ("green", (30, 180, 60)),
    ("blue", (40, 60, 220)),
    ("yellow", (235, 220, 40)),
    ("purple", (140, 50, 170)),
    ("orange", (245, 140, 20)),
    ("white", (245, 245, 245)),
    ("black", (15, 15, 15)),
)
_DEMO_QUESTIONS = (
    "What color is this?",
    "Which color fills most of the picture?",
    "Describe the image in a few words.",
)


def _demo_image(i: int) -> tuple[Any, str]:
    """A 64x64 picture: a background colour with a smaller square of another colour."""
    from PIL import Image, ImageDraw

    name, rgb = _DEMO_COLORS[i % len(_DEMO_COLORS)]
    inner_name, inner_rgb = _DEMO_COLORS[(i * 3 + 1) % len(_DEMO_COLORS)]
    img = Image.new("RGB", (64, 64), rgb)
    offset = 8 + (i % 4) * 6
    ImageDraw.Draw(img).rectangle([offset, offset, offset + 20, offset + 20], fill=inner_rgb)
    answer = f"Mostly {name}, with a small {inner_name} square."
    return img, answer


def _demo_sample(i: int, image_rel: str, answer: str) -> dict[str, Any]:
    """One sample in MindSpeed-MM's ``huggingface`` dataset format."""
    question = _DEMO_QUESTIONS[i % len(_DEMO_QUESTIONS)]
    return {
        "messages": [
            {"role": "user", "content": f"<image>{question}"},
            {"role": "assistant", "content": answer},
        ],
        "images": [image_rel],
    }


def build_demo_dataset(dest: Path, *, samples: int = 8, seed: int = 0) -> Path:
    """Write ``dest/images/img_{i}.png`` and ``dest/data.json``; return the JSON path.

    Images are drawn deterministically (``seed`` rotates the colour assignment) so
    reruns produce byte-identical files; answers differ per sample so the labels
    carry a real training signal.
    """
    dest = Path(dest)
    (dest / "images").mkdir(parents=True, exist_ok=True)
    data = []
    for i in range(samples):
        img, answer = _demo_image(i + seed)
        rel = f"images/img_{i}.png"
        img.save(dest / rel, format="PNG")
        data.append(_demo_sample(i, rel, answer))
    out = dest / "data.json"
    out.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return out


# CLI -------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    """Command line: build a model, build the demo data set, or list the architectures."""
    p = argparse.ArgumentParser(prog="python -m hooks.tiny", description=__doc__.splitlines()[0])
    p.add_argument("arch", nargs="?", help="architecture to build (see --list)")
    p.add_argument("dest", nargs="?", type=Path, help="output model directory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dataset", type=Path, metavar="DEST", help="write the demo data set into DEST")
    p.add_argument("--samples", type=int, default=8, help="demo data set size")
    p.add_argument("--list", action="store_true", help="print the known architectures")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m hooks.tiny``."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(sorted(all_builders())))
        return 0
    if args.dataset is not None:
        print(build_demo_dataset(args.dataset, samples=args.samples, seed=args.seed))
        return 0
    if args.arch is None or args.dest is None:
        parser.error("ARCH and DEST are required (or use --dataset DEST / --list)")
    start = time.perf_counter()
    out = build_tiny_model(args.arch, args.dest, seed=args.seed)
    print(f"{args.arch} -> {out} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    exit_now(main())

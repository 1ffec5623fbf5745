"""What every tiny family shares: sizes, the locally trained BPE tokenizer, Qwen-style token ids.

Sizes are small enough to build and run in seconds on a CPU and large enough that heads, KV
groups, mRoPE sections and experts stay non-trivial (see ``hooks.tiny`` for the whole idea).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def _train_bpe(split_regex: str = QWEN2_SPLIT_REGEX) -> Any:
    """Train a byte-level BPE with the Qwen2 split regex (or ``split_regex``); deterministic for a fixed corpus."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, trainers
    from tokenizers import pre_tokenizers as pre

    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre.Sequence(
        [
            pre.Split(Regex(split_regex), behavior="isolated", invert=False),
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


def _train_metaspace_bpe(first: tuple[str, ...]) -> Any:
    """A SentencePiece-style BPE as Gemma releases it: ``▁`` for spaces, byte fallback, ``first`` ids 0..n.

    transformers 5 rebuilds a Gemma tokenizer from ``tokenizer.json``'s vocab and merges with its own
    pipeline (``Replace(" ", "▁")``, BPE with ``unk_token="<unk>"`` and byte fallback), so a byte-level
    BPE saved under a Gemma class does not reload there; this one does, on 4.57 and 5.x alike.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from tokenizers import pre_tokenizers as pre

    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.pre_tokenizer = pre.Metaspace(replacement="▁", prepend_scheme="never")  # words for training only
    trainer = trainers.BpeTrainer(vocab_size=len(first) + 256 + BPE_MERGES, min_frequency=1, show_progress=False,
                                  special_tokens=[*first, *(f"<0x{i:02X}>" for i in range(256))])
    tok.train_from_iterator(list(_corpus()), trainer=trainer)
    tok.pre_tokenizer = None
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    return tok


def _bpe_tokenizer(
    tokenizer_cls: type, special: tuple[str, ...], added: tuple[str, ...], **kwargs: Any
) -> Any:
    """Wrap the BPE in a family's fast tokenizer class; special tokens get ids after the BPE vocab.

    Appending them (instead of letting the trainer put them first) mirrors the
    released vocabularies, where e.g. ``<|endoftext|>`` follows all merges.
    """
    from tokenizers import AddedToken

    tok = _train_metaspace_bpe(special[:4]) if tokenizer_cls.__name__.startswith("Gemma") else _train_bpe()
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


# Image normalisation of the processors the families use (SigLIP-style halves, CLIP's statistics).
HALF = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
CLIP_MEAN_STD = {
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
}


@dataclass
class TinyParts:
    """What a family builder returns; the common code seeds, instantiates and saves."""

    config: Any  # transformers.PretrainedConfig
    processor: Any  # transformers.ProcessorMixin
    model_class: type
    finish: Callable[[Path], None] | None = None  # edits the saved folder (e.g. what a release left out)


def joint_preprocessor_config(*parts: Any) -> Callable[[Path], None]:
    """A ``finish`` that writes ``preprocessor_config.json`` as the union of ``parts``' own configs.

    A processor with an image processor *and* a feature extractor saves both under that one name
    (transformers 4.57's legacy layout), the later overwriting the earlier, so the folder would reload
    one of them with its defaults instead of the tiny settings. Releases ship the union instead:
    Gemma 3n's converter writes it explicitly (``convert_gemma3n_weights.py``), and each class reads
    its own keys from it.
    """
    import json

    def finish(folder: Path) -> None:
        path = folder / "preprocessor_config.json"
        if not path.is_file():  # transformers 5 nests the attributes in processor_config.json instead
            return
        saved = json.loads(path.read_text())
        joint: dict[str, Any] = {}
        for part in parts:
            joint.update(json.loads(part.to_json_string()))
        if "processor_class" in saved:
            joint["processor_class"] = saved["processor_class"]
        path.write_text(json.dumps(joint, indent=2, sort_keys=True) + "\n")

    return finish


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




def draw_zero_weights(suffixes: tuple[str, ...], std: float) -> Callable[[Path], None]:
    """A ``finish`` that draws the saved tensors named ``*<suffix>`` from N(0, ``std``) (seeded), where the class
    creates them as zeros: a gate a release holds trained values in would otherwise multiply a tower's output by 0 in
    a random-weight build (Mllama's cross-attention gates). Gemma 3's zero image projection is left as it is: a
    user's fresh model has it, and the media proof judges the image by the projection's own gradient."""

    def finish(folder: Path) -> None:
        import torch
        from safetensors.torch import load_file, save_file

        path = folder / "model.safetensors"
        weights = load_file(path)
        generator = torch.Generator().manual_seed(3)
        for key in sorted(k for k in weights if k.endswith(suffixes)):
            weights[key] = (torch.randn(weights[key].shape, generator=generator) * std).to(weights[key].dtype)
        save_file(weights, path, metadata={"format": "pt"})

    return finish

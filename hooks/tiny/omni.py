"""Tiny Qwen-Omni bundles: the FULL published classes (thinker, talker, vocoder): the multi-stage checkpoint is there.

``Qwen2_5OmniForConditionalGeneration`` and ``Qwen3OmniMoeForConditionalGeneration`` hold a ``thinker`` (audio and
vision towers before the language model: the understanding stage, the one a trainer fine-tunes), a ``talker`` (text
to speech codes) and a vocoder (``token2wav``: a DiT and a BigVGAN; ``code2wav``), with ``enable_audio_output`` true
as the releases publish it, so every stage is built and saved. The published class has no ``forward`` of its own
(and Qwen3-Omni's no input embeddings): ``hooks.model.stages`` must find the thinker by itself.

Shapes follow the published configs, shrunk: Qwen3-Omni-30B-A3B-Instruct's (tests/fixtures/full_configs) and, for
Qwen2.5-Omni-7B, transformers' ``Qwen2_5OmniConfig`` defaults (its docstrings name Qwen/Qwen2.5-Omni-7B; no copy of
the Hub folder's config.json was found in the stored sources). Window sizes of the audio encoders stay as published
(``n_window`` 100 / 50 frames per chunk: the processors' token counts assume them); widths, depths, expert and codebook
counts are the tiny ones of ``hooks.tiny.common``. Audio goes through Whisper features with the short window of
``hooks.tiny.audio`` (``AUDIO_SECONDS``), images and videos through the Qwen image/video processors as
``hooks.tiny.core`` sets them up for Qwen2.5-VL (patch 14) and Qwen3-VL (patch 16).

Special tokens, in the published order: Qwen2.5-Omni's ``<|AUDIO|>``, ``<|audio_bos|>``, ``<|audio_eos|>`` take the
ids after ``<|im_end|>`` and the vision tokens are ``<|vision_bos|>``, ``<|vision_eos|>``, ``<|IMAGE|>``,
``<|VIDEO|>`` (the ids transformers' ``Qwen2_5OmniConfig`` defaults name: audio 151646-151648, vision 151652-151656);
Qwen3-Omni keeps Qwen3's vision tokens and adds ``<|audio_start|>``, ``<|audio_end|>``, the tts tokens and
``<|audio_pad|>`` (151669-151675 in the published config). The processors read them off the tokenizer
(``extra_special_tokens``: ``image_token``, ``audio_token``, ...), as the released tokenizer_config.json files carry
them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hooks.tiny.audio import AUDIO_SECONDS, _whisper_features
from hooks.tiny.common import (
    MOE_EXPERTS,
    MOE_FFN,
    MOE_TOP_K,
    QWEN2_ADDED_TOKENS,
    QWEN3_ADDED_TOKENS,
    QWEN_SPECIAL_TOKENS,
    TEXT_HEADS,
    TEXT_HIDDEN,
    TEXT_LAYERS,
    VISION_DEPTH,
    VISION_FFN,
    VISION_HEADS,
    VISION_HIDDEN,
    TinyParts,
    _bpe_tokenizer,
    _qwen_pixel_budget,
    text_dims,
)

# Qwen2.5-Omni-7B's processor chat template, verbatim from transformers' own processor test
# (huggingface/transformers tests/models/qwen2_5_omni/test_processor_qwen2_5_omni.py, prepare_processor_dict, commit
# 134856d34654c9bdc92ebe3a07c1c33390d3a652), which loads Qwen/Qwen2.5-Omni-7B's processor with it.
QWEN2_5_OMNI_CHAT_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}{% set image_count = namespace(value=0) %}"
    "{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif content['type'] == 'audio' or 'audio' in content or 'audio_url' in content %}"
    "{% set audio_count.value = audio_count.value + 1 %}{% if add_audio_id %}Audio {{ audio_count.value }}: "
    "{% endif %}<|audio_bos|><|AUDIO|><|audio_eos|>{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: "
    "{% endif %}<|vision_bos|><|VIDEO|><|vision_eos|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Qwen3-Omni-30B-A3B-Instruct's processor chat template, verbatim as Xinference ships it for that release
# (xorbitsai/inference xinference/model/llm/llm_family.json, entry "Qwen3-Omni-Instruct", added in commit
# a53c19365ae1c98a79d43a96767162782f2b2630 and unchanged through 7ecec16b63383e18e4af790c4b522fb7d79f7e77). No copy
# of the Hub folder's chat_template.json was found in the stored sources; the same Xinference commit's
# "Qwen3-Omni-Thinking" entry is byte for byte the Thinking release's chat_template.json as TheDoctor-JI/Qwen3-Omni
# keeps it (tests/fixtures/thinking_chat_template.json, commit 0fca5b0537f5d0581b360f8e82e96d7f11457f93, "fetched
# from the official Qwen checkpoint repositories"), which is why this copy is taken as the published one. Like
# Qwen3-2507's, it writes an empty ``<think>\n\n</think>\n\n`` before the last assistant answer.
QWEN3_OMNI_CHAT_TEMPLATE = (
    '{%- if tools %}\n'
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    '        {%- if messages[0].content is string %}\n'
    '            {{- messages[0].content }}\n'
    '        {%- else %}\n'
    '            {%- for content in messages[0].content %}\n'
    "                {%- if content.type == 'image' or 'image' in content or 'image_url' in content %}\n"
    '                    {{- "<|vision_start|><|image_pad|><|vision_end|>" }}\n'
    "                {%- elif content.type == 'audio' or 'audio' in content or 'audio_url' in content %}\n"
    '                    {{- "<|audio_start|><|audio_pad|><|audio_end|>" }}\n'
    "                {%- elif content.type == 'video' or 'video' in content %}\n"
    '                    {{- "<|vision_start|><|video_pad|><|vision_end|>" }}\n'
    "                {%- elif content.type == 'text' %}\n"
    '                    {{- content.text }}\n'
    '                {%- endif %}\n'
    '            {%- endfor %}\n'
    '        {%- endif %}\n'
    '    {%- endif %}\n'
    "    {{- '\\n\\n' }}\n"
    '    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are pro'
    'vided with function signatures within <tools></tools> XML tags:\\n<tools>" }}\n'
    '    {%- for tool in tools %}\n'
    '        {{- "\\n" }}\n'
    '        {{- tool | tojson }}\n'
    '    {%- endfor %}\n'
    '    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments'
    ' within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <'
    'args-json-object>}\\n</tool_call><|im_end|>\\n" }}\n'
    '{%- else %}\n'
    "    {%- if messages[0].role == 'system' %}\n"
    '        {%- if messages[0].content is string %}\n'
    "            {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    '        {%- else %}\n'
    '            {%- for content in messages[0].content %}\n'
    "                {%- if content.type == 'image' or 'image' in content or 'image_url' in content %}\n"
    '                    {{- \'<|im_start|>system\\n\' +"<|vision_start|><|image_pad|><|vision_end|>"+ \'<|im'
    "_end|>\\n' }}\n"
    "                {%- elif content.type == 'audio' or 'audio' in content or 'audio_url' in content %}\n"
    '                    {{- \'<|im_start|>system\\n\' +"<|audio_start|><|audio_pad|><|audio_end|>"+ \'<|im_e'
    "nd|>\\n' }}\n"
    "                {%- elif content.type == 'video' or 'video' in content %}\n"
    '                    {{- \'<|im_start|>system\\n\' +"<|vision_start|><|video_pad|><|vision_end|>"+ \'<|im'
    "_end|>\\n' }}\n"
    "                {%- elif content.type == 'text' %}\n"
    "                    {{- '<|im_start|>system\\n' +content.text+ '<|im_end|>\\n' }}\n"
    '                {%- endif %}\n'
    '            {%- endfor %}\n'
    '        {%- endif %}\n'
    '    {%- endif %}\n'
    '{%- endif %}\n'
    '{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n'
    '{%- for message in messages[::-1] %}\n'
    '    {%- set index = (messages|length - 1) - loop.index0 %}\n'
    '    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(messa'
    "ge.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}\n"
    '        {%- set ns.multi_step_tool = false %}\n'
    '        {%- set ns.last_query_index = index %}\n'
    '    {%- endif %}\n'
    '{%- endfor %}\n'
    '{%- for message in messages %}\n'
    '    {%- if message.content is string %}\n'
    '        {%- set content = message.content %}\n'
    '    {%- else %}\n'
    '        {%- set content = namespace(text="") %}\n'
    '        {%- for mcontent in message.content %}\n'
    "            {%- if mcontent.type == 'image' or 'image' in mcontent or 'image_url' in mcontent %}\n"
    '                {%- set content.text = content.text~"<|vision_start|><|image_pad|><|vision_end|>" %}'
    '\n'
    "            {%- elif mcontent.type == 'audio' or 'audio' in mcontent or 'audio_url' in mcontent %}\n"
    '                {%- set content.text = content.text~"<|audio_start|><|audio_pad|><|audio_end|>" %}\n'
    "            {%- elif mcontent.type == 'video' or 'video' in mcontent %}\n"
    '                {%- set content.text = content.text~"<|vision_start|><|video_pad|><|vision_end|>" %}'
    '\n'
    "            {%- elif mcontent.type == 'text' %}\n"
    '                {%- set content.text = content.text~mcontent.text %}\n'
    '            {%- endif %}\n'
    '        {%- endfor %}\n'
    '        {%- set content = content.text %}\n'
    '    {%- endif %}\n'
    '    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}\n'
    "        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}\n"
    '    {%- elif message.role == "assistant" %}\n'
    '        {%- set reasoning_content = "" %}\n'
    '        {%- if message.reasoning_content is string %}\n'
    '            {%- set reasoning_content = message.reasoning_content %}\n'
    '        {%- else %}\n'
    "            {%- if '</think>' in content %}\n"
    "            {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-"
    "1].lstrip('\\n') %}\n"
    "            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    '        {%- endif %}\n'
    '    {%- endif %}\n'
    '    {%- if loop.index0 > ns.last_query_index %}\n'
    '        {%- if loop.last or (not loop.last and reasoning_content) %}\n'
    '            {{- \'<|im_start|>\' + message.role + \'\\n<think>\\n\' + reasoning_content.strip("\\n") + \'\\n<'
    "/think>\\n\\n' + content.lstrip('\\n') }}\n"
    '        {%- else %}\n'
    "            {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    '        {%- endif %}\n'
    '    {%- else %}\n'
    "        {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    '    {%- endif %}\n'
    '    {%- if message.tool_calls %}\n'
    '        {%- for tool_call in message.tool_calls %}\n'
    "            {%- if (loop.first and content) or (not loop.first) %}{{- '\\n' }}{%- endif %}\n"
    '            {%- if tool_call.function %}\n'
    '                {%- set tool_call = tool_call.function %}\n'
    '            {%- endif %}\n'
    '            {{- \'<tool_call>\\n{"name": "\' }}\n'
    '            {{- tool_call.name }}\n'
    '            {{- \'", "arguments": \' }}\n'
    '            {%- if tool_call.arguments is string %}\n'
    '                {{- tool_call.arguments }}\n'
    '            {%- else %}\n'
    '                {{- tool_call.arguments | tojson }}\n'
    '            {%- endif %}\n'
    "            {{- '}\\n</tool_call>' }}\n"
    '        {%- endfor %}\n'
    '    {%- endif %}\n'
    "    {{- '<|im_end|>\\n' }}\n"
    '    {%- elif message.role == "tool" %}\n'
    '        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}{{- \'<|im_start|>user\' }}{'
    '%- endif %}\n'
    "        {{- '\\n<tool_response>\\n' }}\n"
    '        {{- content }}\n'
    "        {{- '\\n</tool_response>' }}\n"
    '        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}{{- \'<|im_end|>\\n\' }}{%- en'
    'dif %}\n'
    '    {%- endif %}\n'
    '{%- endfor %}\n'
    '{%- if add_generation_prompt %}\n'
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }"
    '}{%- endif %}\n'
    '{%- endif %}'
)

# Qwen2.5-Omni renames the Qwen2 ids 151646-151648 (object_ref_start/end, box_start) and the vision tokens.
QWEN2_5_OMNI_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>", "<|box_end|>",
    "<|quad_start|>", "<|quad_end|>", "<|vision_bos|>", "<|vision_eos|>", "<|vision_pad|>", "<|IMAGE|>", "<|VIDEO|>",
)
QWEN2_5_OMNI_MEDIA_TOKENS = {
    "image_token": "<|IMAGE|>", "audio_token": "<|AUDIO|>", "video_token": "<|VIDEO|>",
    "vision_bos_token": "<|vision_bos|>", "vision_eos_token": "<|vision_eos|>",
    "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>",
}
# Qwen3-Omni: Qwen3's tokens, then 151669-151675 as its config.json numbers them (audio_start, audio_end, tts_pad,
# tts_bos, tts_eos, one more tts token, audio_pad).
QWEN3_OMNI_EXTRA_TOKENS = ("<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
                           "<tts_text_bos_single>", "<|audio_pad|>")
QWEN3_OMNI_MEDIA_TOKENS = {
    "image_token": "<|image_pad|>", "audio_token": "<|audio_pad|>", "video_token": "<|video_pad|>",
    "vision_bos_token": "<|vision_start|>", "vision_eos_token": "<|vision_end|>",
    "audio_bos_token": "<|audio_start|>", "audio_eos_token": "<|audio_end|>",
}
CODEC_VOCAB = 128  # the talkers' speech-code vocabulary (8448 / 3072 published); its special ids sit at its end
CODE_GROUPS = 4  # Qwen3-Omni's code groups = code2wav quantizers (16 published)


def _omni_tokenizer(special: tuple[str, ...], added: tuple[str, ...], media: dict[str, str],
                    template: str | None) -> Any:
    """A Qwen2 fast tokenizer with the omni special tokens, the processor's media tokens as attributes."""
    import transformers as tf

    return _bpe_tokenizer(tf.Qwen2TokenizerFast, special, added, unk_token=None, bos_token=None,
                          eos_token="<|im_end|>", pad_token="<|endoftext|>",
                          additional_special_tokens=list(special[1:]), errors="replace", split_special_tokens=False,
                          chat_template=template, extra_special_tokens=dict(media))


def _ids(tokenizer: Any, **names: str) -> dict[str, int]:
    return {key: tokenizer.convert_tokens_to_ids(token) for key, token in names.items()}


def _word_id(tokenizer: Any, word: str) -> int:
    """The id of a role word (``user``: 872 in the releases), where the tiny BPE has it as one token."""
    ids = tokenizer.encode(word, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else tokenizer.convert_tokens_to_ids("<|im_start|>")


def _text(tokenizer: Any, mrope: list[int], **extra: Any) -> dict[str, Any]:
    """The thinker's language model: the tiny sizes, head_dim 16 so the mRoPE sections sum to 8."""
    return {**text_dims(tokenizer), "max_position_embeddings": 4096, "head_dim": TEXT_HIDDEN // TEXT_HEADS,
            "rope_theta": 1000000.0, "tie_word_embeddings": False,
            "rope_scaling": {"rope_type": "default", "type": "default", "mrope_section": mrope}, **extra}


def _audio_encoder(**extra: Any) -> dict[str, Any]:
    """A two-layer Whisper-style encoder over 128 mel bins, projected to the text width (``output_dim``)."""
    return {"num_mel_bins": 128, "d_model": VISION_HIDDEN, "encoder_layers": VISION_DEPTH,
            "encoder_attention_heads": VISION_HEADS, "encoder_ffn_dim": VISION_FFN, "output_dim": TEXT_HIDDEN,
            **extra}


def _processor_parts(patch: int, fast: bool) -> tuple[Any, Any]:
    """The Qwen image and video processors with the tiny pixel budget (a 64x64 image: 4 merged tokens)."""
    import transformers as tf

    size = _qwen_pixel_budget(patch, 2)
    image_cls = tf.Qwen2VLImageProcessorFast if fast else tf.Qwen2VLImageProcessor
    image = image_cls(size=size, min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"], patch_size=patch,
                      merge_size=2)
    video = tf.Qwen2VLVideoProcessor(size=dict(size), patch_size=patch, merge_size=2)
    return image, video


def _finish(processor: Any, speakers: tuple[int, int, int] | None = None) -> Callable[[Path], None]:
    """What the releases hold that ``save_pretrained`` does not write.

    - one ``preprocessor_config.json`` with the image processor's and the feature extractor's keys: transformers
      4.57 writes both to that file, the second over the first, so the image processor would not load back; the
      releases merge them into the one file;
    - Qwen2.5-Omni's ``spk_dict.pt`` (``speakers``: the DiT's ``enc_emb_dim``, ``mel_dim`` and the talker's text
      ``bos_token``), which its ``from_pretrained`` loads: per voice a speaker embedding ``cond``, a reference mel
      ``ref_mel`` and that ``bos_token``; random here, seeded.
    """

    def finish(out: Path) -> None:
        path = out / "preprocessor_config.json"
        if path.is_file():  # transformers 5 nests the parts in processor_config.json instead: nothing to merge
            merged = {**json.loads(path.read_text()), **processor.image_processor.to_dict()}
            merged["processor_class"] = type(processor).__name__
            path.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
        if speakers:
            import torch

            enc_emb_dim, mel_dim, bos_token = speakers
            gen = torch.Generator().manual_seed(0)
            voices = {name: {"cond": torch.randn(1, enc_emb_dim, generator=gen),
                             "ref_mel": torch.randn(1, 300, mel_dim, generator=gen), "bos_token": bos_token}
                      for name in ("Chelsie", "Ethan")}
            torch.save(voices, out / "spk_dict.pt")

    return finish


def _build_qwen2_5_omni() -> TinyParts:
    """Qwen2.5-Omni: thinker (Whisper-style audio tower, Qwen2.5-VL window-attention vision tower, Qwen2 text with
    TMRoPE), talker (codec LM fed the thinker's states) and token2wav (a DiT to mels and a BigVGAN to waves)."""
    import transformers as tf

    tokenizer = _omni_tokenizer(QWEN2_5_OMNI_SPECIAL_TOKENS, QWEN2_ADDED_TOKENS, QWEN2_5_OMNI_MEDIA_TOKENS,
                                QWEN2_5_OMNI_CHAT_TEMPLATE)
    media = _ids(tokenizer, audio_token_index="<|AUDIO|>", image_token_index="<|IMAGE|>",
                 video_token_index="<|VIDEO|>", audio_start_token_id="<|audio_bos|>",
                 audio_end_token_id="<|audio_eos|>")
    vision_ids = _ids(tokenizer, vision_start_token_id="<|vision_bos|>", vision_end_token_id="<|vision_eos|>")
    specials = _ids(tokenizer, bos_token_id="<|endoftext|>", eos_token_id="<|im_end|>", pad_token_id="<|endoftext|>")
    text = _text(tokenizer, [2, 3, 3], max_window_layers=TEXT_LAYERS, use_sliding_window=False, **specials)
    vision = {"depth": VISION_DEPTH, "hidden_size": VISION_HIDDEN, "intermediate_size": VISION_FFN,
              "num_heads": VISION_HEADS, "out_hidden_size": TEXT_HIDDEN, "patch_size": 14, "spatial_merge_size": 2,
              "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [VISION_DEPTH - 1],
              "hidden_act": "silu"}
    thinker = {"audio_config": _audio_encoder(n_window=100, max_source_positions=1500), "vision_config": vision,
               "text_config": text, "user_token_id": _word_id(tokenizer, "user"), **media, **vision_ids}
    vocab = text["vocab_size"]
    tts_text = {"tts_text_start_token_id": vocab - 2, "tts_text_end_token_id": vocab - 1,
                "tts_text_pad_token_id": vocab - 3}  # rows past the tokenizer, as the release's 151859-151861 are
    codec = {"tts_codec_start_token_id": CODEC_VOCAB - 7, "tts_codec_end_token_id": CODEC_VOCAB - 6,
             "tts_codec_pad_token_id": CODEC_VOCAB - 8, "tts_codec_mask_token_id": CODEC_VOCAB - 4}
    talker = {"vocab_size": CODEC_VOCAB, "embedding_size": TEXT_HIDDEN, "hidden_size": TEXT_HIDDEN,
              "intermediate_size": 128, "num_hidden_layers": TEXT_LAYERS, "num_attention_heads": TEXT_HEADS,
              "num_key_value_heads": 2, "head_dim": TEXT_HIDDEN // TEXT_HEADS, "max_position_embeddings": 4096,
              "rope_scaling": {"rope_type": "default", "type": "default", "mrope_section": [2, 3, 3]},
              **media, **vision_ids, **tts_text, **codec}
    dit = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "head_dim": 16, "ff_mult": 2,
           "emb_dim": 16, "block_size": 24, "look_ahead_layers": [1], "look_backward_layers": [0], "repeats": 2,
           "num_embeds": CODEC_VOCAB, "mel_dim": 80, "enc_emb_dim": 16, "enc_dim": 16,
           "enc_channels": [16, 16, 16, 16, 48], "enc_attention_channels": 8, "enc_se_channels": 8}
    bigvgan = {"mel_dim": 80, "upsample_initial_channel": 64}  # halved per upsampling (6 of them): 1 channel last
    config = tf.Qwen2_5OmniConfig(thinker_config=thinker, talker_config=talker,
                                  token2wav_config={"dit_config": dit, "bigvgan_config": bigvgan},
                                  enable_audio_output=True, architectures=["Qwen2_5OmniForConditionalGeneration"])
    image, video = _processor_parts(14, fast=False)
    processor = tf.Qwen2_5OmniProcessor(image_processor=image, video_processor=video,
                                        feature_extractor=_whisper_features(128), tokenizer=tokenizer,
                                        chat_template=QWEN2_5_OMNI_CHAT_TEMPLATE)
    return TinyParts(config, processor, tf.Qwen2_5OmniForConditionalGeneration,
                     finish=_finish(processor, (dit["enc_emb_dim"], dit["mel_dim"], vocab - 4)))


def _build_qwen3_omni_moe() -> TinyParts:
    """Qwen3-Omni (MoE): thinker (AuT audio encoder with conv downsampling, Qwen3-VL vision tower with deepstack,
    Qwen3-MoE text with interleaved mRoPE), talker (MoE codec LM and its code predictor) and code2wav.

    The Instruct release's chat template (``QWEN3_OMNI_CHAT_TEMPLATE``, where it was found is written above it), on
    the tokenizer and the processor as the release ships it.
    """
    import transformers as tf

    tokenizer = _omni_tokenizer(QWEN_SPECIAL_TOKENS + QWEN3_OMNI_EXTRA_TOKENS, QWEN3_ADDED_TOKENS,
                                QWEN3_OMNI_MEDIA_TOKENS, QWEN3_OMNI_CHAT_TEMPLATE)
    media = _ids(tokenizer, audio_token_id="<|audio_pad|>", image_token_id="<|image_pad|>",
                 video_token_id="<|video_pad|>", audio_start_token_id="<|audio_start|>")
    vision_ids = _ids(tokenizer, vision_start_token_id="<|vision_start|>", vision_end_token_id="<|vision_end|>")
    specials = _ids(tokenizer, bos_token_id="<|endoftext|>", eos_token_id="<|im_end|>", pad_token_id="<|endoftext|>")
    moe = {"num_experts": MOE_EXPERTS, "num_experts_per_tok": MOE_TOP_K, "moe_intermediate_size": MOE_FFN,
           "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True}
    text = _text(tokenizer, [3, 3, 2], **moe, **specials)
    text["rope_scaling"].update(interleaved=True, mrope_interleaved=True)
    vision = {"depth": VISION_DEPTH, "hidden_size": VISION_HIDDEN, "intermediate_size": VISION_FFN,
              "num_heads": VISION_HEADS, "out_hidden_size": TEXT_HIDDEN, "patch_size": 16, "spatial_merge_size": 2,
              "temporal_patch_size": 2, "num_position_embeddings": 2304,
              "deepstack_visual_indexes": list(range(VISION_DEPTH)), "hidden_act": "gelu_pytorch_tanh"}
    audio = _audio_encoder(n_window=50, n_window_infer=800, max_source_positions=1500, conv_chunksize=500,
                           downsample_hidden_size=16)
    user = _word_id(tokenizer, "user")
    thinker = {"audio_config": audio, "vision_config": vision, "text_config": text, "user_token_id": user,
               "position_id_per_seconds": 13, "seconds_per_chunk": 2, **media, **vision_ids,
               "audio_end_token_id": tokenizer.convert_tokens_to_ids("<|audio_end|>")}
    codec = {"codec_pad_id": CODEC_VOCAB - 10, "codec_bos_id": CODEC_VOCAB - 9, "codec_eos_token_id": CODEC_VOCAB - 8,
             "codec_nothink_id": CODEC_VOCAB - 3, "codec_think_bos_id": CODEC_VOCAB - 2,
             "codec_think_eos_id": CODEC_VOCAB - 1}
    talker_text = {"vocab_size": CODEC_VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                   "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "num_experts": MOE_EXPERTS,
                   "num_experts_per_tok": MOE_TOP_K, "moe_intermediate_size": MOE_FFN,
                   "shared_expert_intermediate_size": MOE_FFN, "norm_topk_prob": True,
                   "rope_scaling": {"rope_type": "default", "type": "default", "interleaved": True,
                                    "mrope_section": [3, 3, 2]}}
    predictor = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                 "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "num_code_groups": CODE_GROUPS}
    talker = {"text_config": talker_text, "code_predictor_config": predictor, "num_code_groups": CODE_GROUPS,
              "thinker_hidden_size": TEXT_HIDDEN, "accept_hidden_layer": TEXT_LAYERS - 1,
              "position_id_per_seconds": 13, "spatial_merge_size": 2,
              "speaker_id": {"chelsie": CODEC_VOCAB - 7, "ethan": CODEC_VOCAB - 6, "aiden": CODEC_VOCAB - 5},
              **media, **vision_ids, **codec}
    code2wav = {"codebook_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 2, "num_key_value_heads": 2, "num_quantizers": CODE_GROUPS,
                "decoder_dim": 32, "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2]}
    ids = _ids(tokenizer, im_start_token_id="<|im_start|>", im_end_token_id="<|im_end|>",
               tts_pad_token_id="<tts_pad>", tts_bos_token_id="<tts_text_bos>", tts_eos_token_id="<tts_text_eod>")
    config = tf.Qwen3OmniMoeConfig(thinker_config=thinker, talker_config=talker, code2wav_config=code2wav,
                                   enable_audio_output=True, system_token_id=_word_id(tokenizer, "system"),
                                   user_token_id=user, assistant_token_id=_word_id(tokenizer, "assistant"), **ids,
                                   architectures=["Qwen3OmniMoeForConditionalGeneration"])
    image, video = _processor_parts(16, fast=True)
    processor = tf.Qwen3OmniMoeProcessor(image_processor=image, video_processor=video,
                                         feature_extractor=_whisper_features(128), tokenizer=tokenizer,
                                         chat_template=QWEN3_OMNI_CHAT_TEMPLATE)
    return TinyParts(config, processor, tf.Qwen3OmniMoeForConditionalGeneration, finish=_finish(processor))


BUILDERS: dict[str, Callable[[], TinyParts]] = {
    "qwen2_5_omni": _build_qwen2_5_omni,
    "qwen3_omni_moe": _build_qwen3_omni_moe,
}

__all__ = ["AUDIO_SECONDS", "BUILDERS"]

"""Tiny random-weight copies of *published* remote-code VLM releases, read from public mirrors at build time.

The ``remote_*`` fixtures (``hooks.tiny.remote``) are written to this project's own assumptions. Real
releases break them (issue 21), so these fixtures take a release's hub files as published: code,
``config.json``, tokenizer and processor files, chat templates, the ``README.md`` model card. They are
read from a git mirror of the hub folder when the fixture is built and are never part of this
repository. Only sizes in ``config.json`` change (``Release.sizes``, each change listed in the build
marker), plus the few version shims a release needs under transformers 4.57.1 (``Release.shims``:
exact text replacements, each with its reason; a shim whose text is absent fails the build, so a
changed mirror is noticed). The weights are random, drawn by the release's own model class
instantiated from the shrunk config.

Mirrors: ``MSMM_MIRRORS`` names a folder holding ``owner+name/repo`` git directories (what the
search tool's fetch writes, default ``/work/.mirror``) or one family's git directory itself.

``python -m hooks.tiny.published FAMILY DEST [--seed N]``, ``python -m hooks.tiny.published --list``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MIRRORS = "/work/.mirror"
MARKER = ".tiny-build.json"
BUILD_VERSION = 1
LFS_POINTER = b"version https://git-lfs.github.com/spec/"

Notes = list[str]


class MirrorMissing(RuntimeError):
    """The release's mirror (or its pinned commit, or a module its code imports) is not on this machine."""


@dataclass(frozen=True)
class Shim:
    """One exact text replacement in a release file, and why transformers 4.57.1 needs it."""

    path: str
    old: str
    new: str
    why: str


@dataclass(frozen=True)
class Release:
    """A published remote-code release: where its mirror is, which files are taken, what is shrunk."""

    family: str
    hub_id: str
    mirror: str  # owner+name, as fetch names the folder
    commit: str
    files: tuple[str, ...]
    sizes: Callable[[dict[str, Any]], Notes]
    model_auto: str = "AutoModelForCausalLM"
    requires: tuple[str, ...] = ()
    shims: tuple[Shim, ...] = ()
    dropped: dict[str, str] = field(default_factory=dict)  # hub file left out -> why
    root: str = ""  # the hub folder's place inside the mirror repository ("" for a mirror of the folder itself)
    # the release's own initialisers (dotted paths from the model), called after the class is built: a class whose
    # constructor leaves some weights at zero until its own training code resets them (Molmo's embeddings)
    init_calls: tuple[str, ...] = ()


def _set(cfg: dict[str, Any], key: str, value: Any, notes: Notes, where: str = "") -> None:
    """Set one size and record it as 'key: old -> new' so the build marker documents every change."""
    notes.append(f"{where}{key}: {cfg.get(key)!r} -> {value!r}")
    cfg[key] = value


# ---------------------------------------------------------------------------- Qwen-VL-Chat


def _qwen_vl_sizes(cfg: dict[str, Any]) -> Notes:
    """LM 2 layers / hidden 128 / 4 heads of 32; ViT 2 blocks / width 32; vocab kept (tiktoken ids up to 151936).

    Hidden 128, not 64: the resampler has ``output_dim // 128`` heads, and ``output_dim`` is the LM width.

    ``n_queries`` (256 resampler queries) stays: the tokenizer writes 256 image pads per ``<img>`` span.
    The Int4 release's GPTQ ``quantization_config`` is dropped: the tiny weights are plain bf16.
    """
    notes: Notes = []
    for key, value in (("hidden_size", 128), ("num_attention_heads", 4), ("kv_channels", 32),
                       ("intermediate_size", 256), ("num_hidden_layers", 2)):
        _set(cfg, key, value, notes)
    for key, value in (("width", 32), ("heads", 2), ("layers", 2), ("output_dim", 128)):
        _set(cfg["visual"], key, value, notes, "visual.")
    notes.append(f"quantization_config: {cfg.pop('quantization_config', None)!r} -> removed (bf16 weights)")
    return notes


_STREAM_IMPORT = "from transformers_stream_generator.main import NewGenerationMixin, StreamGenerationConfig"
QWEN_VL = Release(
    family="qwen_vl_chat",
    hub_id="Qwen/Qwen-VL-Chat-Int4",
    mirror="x1ngzai+Qwen-VL-Chat-Int4",
    commit="1cd721a27dd000fc4cf688c6ad58e614da1d600d",
    files=("README.md", "config.json", "configuration_qwen.py", "generation_config.json", "modeling_qwen.py",
           "qwen.tiktoken", "qwen_generation_utils.py", "requirements.txt", "tokenization_qwen.py",
           "tokenizer_config.json", "visual.py"),
    sizes=_qwen_vl_sizes,
    requires=("tiktoken", "einops", "matplotlib"),  # of its requirements.txt, those its code imports
    shims=(Shim("modeling_qwen.py", f"        {_STREAM_IMPORT}",
                "        try:  # msmm-migrate shim: a try block keeps transformers' import check away\r\n"
                f"            {_STREAM_IMPORT}\r\n        except ImportError:\r\n            raise",
                "chat_stream()'s import of transformers_stream_generator put in a try block: transformers checks "
                "every module a remote file imports, and that package does not import under transformers 4.57 "
                "(BeamSearchScorer was removed); only streaming chat uses it"),),
    dropped={"quantize_config.json": "GPTQ settings of the Int4 weights; the tiny weights are not quantized",
             "model.safetensors.index.json": "index of the published weights"},
)


# ---------------------------------------------------------------------------- InternVL2-2B


def _internvl_chat_sizes(attention_key: str) -> Callable[[dict[str, Any]], Notes]:
    """InternVL-Chat releases: LM 2 layers / hidden 64 / 4 heads, 2 KV; InternViT 2 blocks / hidden 32; vocab kept.

    The LM's attention (``attention_key``: InternLM2's ``attn_implementation``, Qwen2's ``_attn_implementation``)
    flash_attention_2 -> eager and the ViT's ``use_flash_attn`` -> false: flash-attn is not installed on CPU hosts
    (a size-independent setting a user without flash-attn changes too). Image size (448), patch (14), pixel
    shuffle (0.5) and the tiling limits stay: they fix the 256 context tokens per tile that ``chat()`` writes.
    """

    def sizes(cfg: dict[str, Any]) -> Notes:
        notes: Notes = []
        llm, vit = cfg["llm_config"], cfg["vision_config"]
        for key, value in (("hidden_size", 64), ("intermediate_size", 128), ("num_hidden_layers", 2),
                           ("num_attention_heads", 4), ("num_key_value_heads", 2), (attention_key, "eager")):
            _set(llm, key, value, notes, "llm_config.")
        for key, value in (("hidden_size", 32), ("intermediate_size", 64), ("num_hidden_layers", 2),
                           ("num_attention_heads", 2), ("use_flash_attn", False)):
            _set(vit, key, value, notes, "vision_config.")
        return notes

    return sizes


INTERNVL2 = Release(
    family="internvl2_2b",
    hub_id="OpenGVLab/InternVL2-2B",
    mirror="zylluan+ft-uav_internvl2-2B",
    commit="a19e0a45a8dc6bbb45de0a8e14bd63a2b1a3ac6c",
    files=("added_tokens.json", "config.json", "configuration_intern_vit.py", "configuration_internlm2.py",
           "configuration_internvl_chat.py", "conversation.py", "generation_config.json", "modeling_intern_vit.py",
           "modeling_internlm2.py", "modeling_internvl_chat.py", "special_tokens_map.json",
           "tokenization_internlm2.py", "tokenization_internlm2_fast.py", "tokenizer.model", "tokenizer_config.json"),
    sizes=_internvl_chat_sizes("attn_implementation"),  # InternLM2
    requires=("sentencepiece", "einops"),
    dropped={"README.md": "not in this mirror (a fine-tune's folder): the card's build_transform/"
                          "dynamic_preprocess recipe is missing, as for a user who copied only the code"},
)


# ---------------------------------------------------------------------------- InternVL2-1B (with its model card)


INTERNVL2_1B = Release(
    family="internvl2_1b",
    hub_id="OpenGVLab/InternVL2-1B",
    mirror="tothelast+simlingo_qcar2_integration",
    commit="705506376a62e9de45fc2f44735a141c111878ca",
    root="pretrained/InternVL2-1B",
    files=("README.md", "added_tokens.json", "config.json", "configuration_intern_vit.py",
           "configuration_internvl_chat.py", "conversation.py", "generation_config.json", "merges.txt",
           "modeling_intern_vit.py", "modeling_internvl_chat.py", "preprocessor_config.json",
           "special_tokens_map.json", "tokenizer_config.json", "vocab.json"),
    sizes=_internvl_chat_sizes("_attn_implementation"),  # Qwen2
    requires=("einops", "timm"),
    dropped={"examples/": "the card's sample images and video (partly Git LFS pointers in the mirror)"},
)


# ---------------------------------------------------------------------------- Phi-3-vision-128k-instruct


def _phi3v_sizes(cfg: dict[str, Any]) -> Notes:
    """Phi-3 LM 2 layers / hidden 128 / 4 heads of 32 (4 KV); vocab kept (32064); eager attention.

    ``rope_scaling`` ("su") carries one factor per rotary frequency (head dim / 2 = 48 published);
    ``Phi3VConfig`` checks that length, so both lists keep their first 16 entries (head dim 32).
    ``_attn_implementation`` flash_attention_2 -> eager: flash-attn is not installed on CPU hosts.
    ``img_processor`` (CLIP ViT-L/14-336, ``image_dim_out`` 1024, 144 tokens per crop) stays: the vision
    tower's sizes are fixed in image_embedding_phi3_v.py (asserted 24x24 patches of 1024), not read from
    config.json; only its depth is cut, by the shim below.
    """
    notes: Notes = []
    for key, value in (("hidden_size", 128), ("intermediate_size", 256), ("num_hidden_layers", 2),
                       ("num_attention_heads", 4), ("num_key_value_heads", 4),
                       ("_attn_implementation", "eager")):
        _set(cfg, key, value, notes)
    rope = cfg["rope_scaling"]
    for key in ("long_factor", "short_factor"):
        notes.append(f"rope_scaling.{key}: {len(rope[key])} entries -> first 16")
        rope[key] = rope[key][:16]
    return notes


PHI3V = Release(
    family="phi3_vision_128k",
    hub_id="microsoft/Phi-3-vision-128k-instruct",
    mirror="Aritra02091998+Phi-3-vision-128k-instruct-Improvised-for-QLORA-Training",
    commit="16e16b08556652bc108b7c5d7e3ce94881148246",
    files=("README.md", "config.json", "configuration_phi3_v.py", "image_embedding_phi3_v.py",
           "image_processing_phi3_v.py", "modeling_phi3_v.py", "preprocessor_config.json", "processing_phi3_v.py",
           "sample_inference.py", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"),
    sizes=_phi3v_sizes,
    shims=(Shim("image_embedding_phi3_v.py", "  num_hidden_layers=24,\n",
                "  num_hidden_layers=2,  # msmm-migrate: tiny\n",
                "size, not version: the CLIP ViT-L/14-336 tower's config is a constant in this file (config.json "
                "only names it), so its 24 blocks -> 2 here; width 1024 and 336px/14 patches stay (asserted by "
                "hd_feature_transform); hidden_states[-2] still exists"),
           Shim("modeling_phi3_v.py", "past_key_values_length = past_key_values.get_usable_length(seq_length)",
                "past_key_values_length = past_key_values.get_seq_length()  # msmm-migrate shim",
                "Phi3VModel.forward: Cache.get_usable_length was removed (transformers 4.56); for the DynamicCache "
                "built here it returned get_seq_length(), which is what is called now"),
           Shim("modeling_phi3_v.py",
                "                )\n            kv_seq_len += "
                "past_key_value.get_usable_length(kv_seq_len, self.layer_idx)\n        cos, sin",
                "                )\n            kv_seq_len += "
                "past_key_value.get_seq_length(self.layer_idx)  # msmm-migrate shim\n        cos, sin",
                "Phi3Attention (eager, the tiny config's attention): the same removed get_usable_length, replaced by "
                "get_seq_length(layer_idx); the flash-attn and SDPA classes keep it (not used: no flash-attn here, "
                "_supports_sdpa is False)"),),
    dropped={"model.safetensors.index.json": "index of the published weights",
             "CODE_OF_CONDUCT.md": "repository boilerplate", "LICENSE": "repository boilerplate",
             "SECURITY.md": "repository boilerplate", "SUPPORT.md": "repository boilerplate",
             "**Important Note Local Repo**.txt": "the mirror owner's note (not a hub file): their flash-attn "
                                                  "dtype casts in modeling_phi3_v.py / image_embedding_phi3_v.py "
                                                  "(flash-attn paths only; eager, used here, is as published)",
             "fetch-model.py": "the mirror owner's download script (not a hub file)"},
)


# ---------------------------------------------------------------------------- Ovis2-4B


def _ovis2_sizes(cfg: dict[str, Any]) -> Notes:
    """Qwen2.5 LM 2 layers / hidden 64 / 4 heads of 16 (2 KV); AIMv2 ViT 2 blocks / width 32; text vocab kept.

    ``hidden_size`` (Ovis asserts it equals the LM's) follows the LM. The visual tokenizer's vocabulary
    (65536 soft tokens, 5 of them image indicators) -> 1024: its head and the visual embedding table are
    sized by it, nothing else reads it. ``llm_attn_implementation`` flash_attention_2 -> eager: ``Ovis.__init__``
    asserts flash-attn >= 2.6.3 otherwise, and it is not installed on CPU hosts. ``multimodal_max_length``
    32768 -> 1024: in training ``merge_multimodal`` pads every first sample to this length (the release's
    "padding ... for increased training speed") and truncates to it, so the published value makes each
    tiny step a 32k-token attention. Image size 448, patch 14 and ``hidden_stride`` 2 stay (256 visual
    tokens per crop, the preprocessor's 448 crop).
    """
    notes: Notes = []
    llm, vit = cfg["llm_config"], cfg["visual_tokenizer_config"]
    for key, value in (("hidden_size", 64), ("intermediate_size", 128), ("num_hidden_layers", 2),
                       ("num_attention_heads", 4), ("num_key_value_heads", 2), ("max_window_layers", 2)):
        _set(llm, key, value, notes, "llm_config.")
    for key, value in (("hidden_size", 64), ("llm_attn_implementation", "eager"), ("multimodal_max_length", 1024)):
        _set(cfg, key, value, notes)
    _set(vit, "vocab_size", 1024, notes, "visual_tokenizer_config.")
    for key, value in (("hidden_size", 32), ("intermediate_size", 64), ("num_hidden_layers", 2),
                       ("num_attention_heads", 2)):
        _set(vit["backbone_config"], key, value, notes, "visual_tokenizer_config.backbone_config.")
    return notes


_OVIS_OWNER = ("the mirror owner's edit (their commit 'Changing Padding Side') reverted to the published text, "
               "as the other public copies of this release's modeling_ovis.py carry it: ")
OVIS2 = Release(
    family="ovis2_4b",
    hub_id="AIDC-AI/Ovis2-4B",
    mirror="AmbiTyga+Research-Bookmark",
    commit="2888f4b7252ccfd231274fd5a8fa0f26131d4230",
    root="ReFT/Ovis2-4b",
    files=("NOTICE", "README.md", "added_tokens.json", "config.json", "configuration_aimv2.py",
           "configuration_ovis.py", "generation_config.json", "merges.txt", "modeling_aimv2.py", "modeling_ovis.py",
           "preprocessor_config.json", "special_tokens_map.json", "tokenizer_config.json", "vocab.json"),
    sizes=_ovis2_sizes,
    shims=(Shim("configuration_ovis.py", 'AutoConfig.register("aimv2", AIMv2Config)\n',
                'AutoConfig.register("aimv2", AIMv2Config, exist_ok=True)  # msmm-migrate shim\n',
                "transformers 4.57 ships its own 'aimv2' model type (Aimv2Config), so the release's registration of "
                "its AIMv2Config under that name raises 'already used by a Transformers config' when config.json "
                "loads; exist_ok=True lets the release's own class take the name, as under the transformers it "
                "was published for"),
           Shim("modeling_ovis.py",
                "            pixel_values=pixel_values,\n            padding_side=kwargs.get('padding_side', 'left')\n"
                "        )\n        return self.llm(",
                "            pixel_values=pixel_values\n        )\n        return self.llm(",
                _OVIS_OWNER + "Ovis.forward calls merge_multimodal without a padding argument"),
           Shim("modeling_ovis.py",
                "        pixel_values: List[Optional[torch.Tensor]],\n        padding_side: str = \"left\"\n    ):",
                "        pixel_values: List[Optional[torch.Tensor]],\n        left_padding: bool = False\n    ):",
                _OVIS_OWNER + "merge_multimodal's last parameter is left_padding=False"),
           Shim("modeling_ovis.py",
                "            input_embeds[0] = torch.nn.ConstantPad2d((0, 0, padding_size, 0), 0.0)(input_embeds[0])\n"
                "            attention_masks[0] = "
                "torch.nn.ConstantPad1d((padding_size, 0), False)(attention_masks[0])\n"
                "            labels[0] = torch.nn.ConstantPad1d((padding_size, 0), IGNORE_ID)(labels[0])\n"
                "        batch_input_embeds = self.pad_truncate_sequence(input_embeds, batch_first=True, "
                "padding_value=0.0, padding_side=padding_side)\n"
                "        batch_attention_mask = self.pad_truncate_sequence(attention_masks, batch_first=True, "
                "padding_value=False, padding_side=padding_side)\n"
                "        batch_labels = self.pad_truncate_sequence(labels, batch_first=True, padding_value=IGNORE_ID, "
                "padding_side=padding_side)\n\n"
                "        return visual_input_ids, batch_input_embeds, batch_labels, batch_attention_mask\n\n"
                "    def pad_truncate_sequence(self, sequences: List[torch.Tensor], batch_first: bool = True, "
                "padding_value: float = 0.0, padding_side: str = \"left\") -> torch.Tensor:\n"
                "        pad_sequence = torch.nn.utils.rnn.pad_sequence(sequences, batch_first=batch_first, "
                "padding_value=padding_value, padding_side=padding_side)\n"
                "        return pad_sequence[:,:self.config.multimodal_max_length]\n",
                "            input_embeds[0] = torch.nn.ConstantPad2d((0, 0, 0, padding_size), 0.0)(input_embeds[0])\n"
                "            attention_masks[0] = "
                "torch.nn.ConstantPad1d((0, padding_size), False)(attention_masks[0])\n"
                "            labels[0] = torch.nn.ConstantPad1d((0, padding_size), IGNORE_ID)(labels[0])\n"
                "        batch_input_embeds = self.pad_truncate_sequence(input_embeds, batch_first=True, "
                "padding_value=0.0, left_padding=left_padding)\n"
                "        batch_attention_mask = self.pad_truncate_sequence(attention_masks, batch_first=True, "
                "padding_value=False, left_padding=left_padding)\n"
                "        batch_labels = self.pad_truncate_sequence(labels, batch_first=True, padding_value=IGNORE_ID, "
                "left_padding=left_padding)\n\n"
                "        return visual_input_ids, batch_input_embeds, batch_labels, batch_attention_mask\n\n"
                "    def pad_truncate_sequence(self, sequences: List[torch.Tensor], batch_first: bool = True, "
                "padding_value: float = 0.0, left_padding: bool = False) -> torch.Tensor:\n"
                "        if not left_padding:\n"
                "            pad_sequence = torch.nn.utils.rnn.pad_sequence(sequences, batch_first=batch_first, "
                "padding_value=padding_value)\n"
                "            return pad_sequence[:,:self.config.multimodal_max_length]\n"
                "        else:\n"
                "            pad_sequence = torch.nn.utils.rnn.pad_sequence([i.flip(dims=[0]) for i in sequences],"
                "batch_first=True, padding_value=padding_value).flip(dims=[1])\n"
                "            return pad_sequence[:,-self.config.multimodal_max_length:]\n",
                _OVIS_OWNER + "training pads the first sample on the right up to multimodal_max_length, and "
                "pad_truncate_sequence pads right (left only for generate, by flipping)"),
           Shim("modeling_ovis.py",
                "            pixel_values=kwargs.pop('pixel_values'),\n            padding_side=\"left\"\n        )",
                "            pixel_values=kwargs.pop('pixel_values'),\n            left_padding=True\n        )",
                _OVIS_OWNER + "generate asks merge_multimodal for left_padding=True"),),
    dropped={"tokenizer.json": "not in the mirror's snapshot (over 4 MiB); Qwen2TokenizerFast is converted from "
                               "vocab.json + merges.txt, as tokenizer_config.json names Qwen2Tokenizer",
             "model.safetensors.index.json": "index of the published weights",
             ".gitattributes": "Git LFS attributes of the hub repository"},
)


# ---------------------------------------------------------------------------- FastVLM-0.5B (LLaVA's original code)


def _fastvlm_sizes(cfg: dict[str, Any]) -> Notes:
    """Qwen2 LM 2 layers / hidden 64 / 4 heads of 16 (2 KV); vocab kept (151936, tied); the tower's input kept.

    ``mm_vision_tower`` ("mobileclip_l_1024") stays: the code builds the tower from that name (no hub download),
    reads its input size after the last "_" for the model's own ``CLIPImageProcessor``, and FastViTHD's
    squeeze-excite blocks pool a fixed 16 x 16 map (``SEBlock.forward``), which only a 1024 input gives: 256 image
    tokens per image (patch 64). ``mm_hidden_size`` follows the tiny tower's output width (its last stage
    128 x ``cls_ratio`` 2 = 256, set by the shims below).
    """
    notes: Notes = []
    for key, value in (("hidden_size", 64), ("intermediate_size", 128), ("num_hidden_layers", 2),
                       ("num_attention_heads", 4), ("num_key_value_heads", 2), ("max_window_layers", 2),
                       ("mm_hidden_size", 256)):
        _set(cfg, key, value, notes)
    return notes


FASTVLM = Release(
    family="fastvlm_0_5b",
    hub_id="apple/FastVLM-0.5B",
    mirror="tiagojr159+fast_1.5b_assistente_voz",
    commit="6eccbd67cc033c6c849379fb49d7473d26e7031d",
    files=("README.md", "added_tokens.json", "config.json", "generation_config.json", "llava_qwen.py", "merges.txt",
           "special_tokens_map.json", "tokenizer_config.json", "vocab.json"),
    sizes=_fastvlm_sizes,
    requires=("timm",),
    shims=(Shim("llava_qwen.py", "    layers = [2, 12, 24, 4, 2]\n    embed_dims = [96, 192, 384, 768, 1536]\n",
                "    layers = [1, 1, 1, 1, 1]  # msmm-migrate: tiny\n"
                "    embed_dims = [8, 16, 32, 64, 128]  # msmm-migrate: tiny\n",
                "size, not version: FastViTHD's depth and widths are constants in fastvithd() (config.json only "
                "names the tower), so 2/12/24/4/2 blocks -> 1 each and widths 96..1536 -> 8..128 (the attention "
                "stages keep MHSA's 32-wide heads: 2 and 4 of them); five stages and the /64 patch stay"),
           Shim("llava_qwen.py", '            "embed_dim": 3072,\n',
                '            "embed_dim": 256,  # msmm-migrate: tiny\n',
                "size, not version: load_model_config() states the tower's output width (its hidden_size, which the "
                "projector's input must equal) as a constant: 3072 -> 256, the tiny tower's conv_exp output"),),
    dropped={"acc_vs_latency_qwen-2.png": "the card's figure (a Git LFS pointer in the mirror)",
             "LICENSE": "the license text (apple-amlr)", ".gitattributes": "Git LFS attributes of the hub repository",
             "server.py": "the mirror owner's web chat app (not a hub file); the card keeps the owner's two "
                          "sections about it (text and shell blocks, no Python)",
             "trainer_state.json": "not in the hub folder's published snapshot in this mirror (a broken blob)",
             "model.safetensors": "the published weights (Git LFS)"},
)


# ---------------------------------------------------------------------------- Molmo-7B-D-0924 (processor method)


def _molmo_sizes(cfg: dict[str, Any]) -> Notes:
    """Qwen2-style LM 2 layers / hidden 64 / 4 heads of 16 (2 KV); vocab kept (152064 + the class's 128 added rows).

    The token ids stay: the image tokens (``<im_start>`` 152064 .. ``<|image|>`` 152068) are rows of the additional
    embedding the class adds. The NF4 ``quantization_config`` (bitsandbytes, the republisher's) is dropped: the tiny
    weights are plain, and bitsandbytes is not a CPU host's package. The vision tower's sizes are constants in
    ``MolmoForCausalLM.__init__`` (config.json has none): the shims below cut them.
    """
    notes: Notes = []
    for key, value in (("hidden_size", 64), ("intermediate_size", 128), ("num_hidden_layers", 2),
                       ("num_attention_heads", 4), ("num_key_value_heads", 2)):
        _set(cfg, key, value, notes)
    notes.append(f"quantization_config: {cfg.pop('quantization_config', None)!r} -> removed (plain weights)")
    return notes


_MOLMO_TF_RESIZE = """    # if resize_method == "tensorflow":
    #     FIXME remove
    import tensorflow as tf
    image = tf.image.convert_image_dtype(tf.constant(image), dtype=tf.float32)
    image = tf.image.resize(
        image,
        [scaled_height, scaled_width],
        method=tf.image.ResizeMethod.BILINEAR,
        antialias=True,
    )
    image = tf.clip_by_value(image, 0.0, 1.0)
    image = image.numpy()
    # else:
    #     image = torch.permute(torch.from_numpy(image), [2, 0, 1])
    #     image = convert_image_dtype(image)  # resize in flaot32
    #     image = torchvision.transforms.Resize(
    #         [scaled_height, scaled_width], InterpolationMode.BILINEAR, antialias=True
    #     )(image)
    #     image = torch.clip(image, 0.0, 1.0)
    #     image = torch.permute(image, [1, 2, 0]).numpy()
""".replace("\n", "\r\n")
_MOLMO_TORCH_RESIZE = """    # msmm-migrate shim: the file's own torchvision branch (tensorflow is not installed)
    image = torch.permute(torch.from_numpy(image), [2, 0, 1])
    image = convert_image_dtype(image)  # resize in flaot32
    image = torchvision.transforms.Resize(
        [scaled_height, scaled_width], InterpolationMode.BILINEAR, antialias=True
    )(image)
    image = torch.clip(image, 0.0, 1.0)
    image = torch.permute(image, [1, 2, 0]).numpy()
""".replace("\n", "\r\n")  # the file's line endings are CRLF


def _molmo_vit(old: str, new: str, why: str) -> Shim:
    """One of the CLIP tower's constants in MolmoForCausalLM.__init__ (its VisionBackboneConfig), shrunk."""
    return Shim("modeling_molmo.py", f"                    {old},\n",
                f"                    {new},  # msmm-migrate: tiny\n",
                f"size, not version: the ViT-L/14-336 tower's {why} is a constant in MolmoForCausalLM.__init__ "
                f"(config.json does not carry it): {old} -> {new}")


# README.md is the republisher's card (NF4 sizes, a link to the base model's card), taken as published: it has no
# quick-start, so the entry point is the release's own code, its processor's process() and the model's
# generate_from_batch() (hooks.data.model_recipe: the processor-method entry)
MOLMO = Release(
    family="molmo_7b_d",
    hub_id="allenai/Molmo-7B-D-0924",
    mirror="reubzdubz+Molmo7B_D_NF4Quant",
    commit="6afb2aefe9ed93d3faf905c2dc7e75697aded533",
    files=("README.md", "added_tokens.json", "config.json", "config_molmo.py", "generation_config.json",
           "image_preprocessing_molmo.py", "merges.txt", "modeling_molmo.py", "preprocessing_molmo.py",
           "preprocessor_config.json", "processor_config.json", "special_tokens_map.json", "tokenizer_config.json",
           "vocab.json"),
    sizes=_molmo_sizes,
    requires=("einops",),
    shims=(_molmo_vit("image_emb_dim=1024", "image_emb_dim=32", "width"),
           _molmo_vit("image_num_heads=16", "image_num_heads=2", "head count"),
           _molmo_vit("image_num_key_value_heads=16", "image_num_key_value_heads=2", "KV head count"),
           _molmo_vit("image_num_layers=23", "image_num_layers=9",
                      "depth (9, not fewer: the class reads the features of blocks -2 and -9, vit_layers)"),
           _molmo_vit("image_head_dim=64", "image_head_dim=16", "head width"),
           _molmo_vit("image_mlp_dim=4096", "image_mlp_dim=64", "MLP width"),
           Shim("image_preprocessing_molmo.py", _MOLMO_TF_RESIZE, _MOLMO_TORCH_RESIZE,
                "resize_and_pad resizes with tensorflow (an 'import tensorflow' transformers' import check demands "
                "before the processor loads; tensorflow is neither a CPU host's nor MindSpeed-MM's package): the "
                "file's own commented-out torchvision branch right below it (the same bilinear, antialiased "
                "resize in float32, clipped to [0, 1]) is used instead; pixel values may differ from tensorflow's "
                "in the last bits, the processor and every check here run the same code")),
    init_calls=("model.transformer.wte.reset_parameters", "model.vision_backbone.reset_parameters"),
    dropped={"tokenizer.json": "a broken blob in the mirror's snapshot; Qwen2TokenizerFast is converted from "
                               "vocab.json + merges.txt and added_tokens.json, as tokenizer_config.json names "
                               "Qwen2Tokenizer",
             "molmo_quant.py": "the mirror owner's quantisation script (not a hub file)",
             "model.safetensors.index.json": "index of the published (NF4) weights"},
)


# The same code without its model card, as a user who copied only the code files has it: nothing in the folder
# builds a sample, so a copy asks for a prompt builder (hooks.data.prompt_builder), written from the skeleton and
# the card (tests/test_published_remote.py)
FASTVLM_NOCARD = dataclasses.replace(
    FASTVLM, family="fastvlm_0_5b_nocard", files=tuple(f for f in FASTVLM.files if f != "README.md"),
    dropped={**FASTVLM.dropped, "README.md": "left out: the code without its card (the quick-start is the only "
                                             "place the release writes its inference prompt)"})


RELEASES: dict[str, Release] = {r.family: r for r in (QWEN_VL, INTERNVL2, INTERNVL2_1B, PHI3V, OVIS2, FASTVLM,
                                                      FASTVLM_NOCARD, MOLMO)}


# ---------------------------------------------------------------------------- mirror access


def _is_git_dir(path: Path) -> bool:
    """True for a bare git directory (what fetch writes) or a work tree's .git."""
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def mirror_dir(release: Release) -> Path:
    """The release's git directory under ``MSMM_MIRRORS``, holding its pinned commit; MirrorMissing otherwise."""
    root = Path(os.environ.get("MSMM_MIRRORS", DEFAULT_MIRRORS))
    for candidate in (root / release.mirror / "repo", root / release.mirror, root / release.mirror / ".git", root):
        if _is_git_dir(candidate) and _has_commit(candidate, release.commit):
            return candidate
    raise MirrorMissing(f"{release.family}: no mirror of {release.hub_id} ({release.mirror} at "
                        f"{release.commit[:12]}) under {root} (set MSMM_MIRRORS)")


def _has_commit(git_dir: Path, commit: str) -> bool:
    """True when the git directory holds the pinned commit (a newer snapshot may not)."""
    done = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True, check=False)
    return done.returncode == 0


def read_file(git_dir: Path, commit: str, path: str) -> bytes:
    """A file's bytes at the pinned commit; an LFS pointer is refused (the content is not in the mirror)."""
    data = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"],
                          capture_output=True, check=True).stdout
    if data.startswith(LFS_POINTER):
        raise MirrorMissing(f"{path} is a Git LFS pointer in the mirror; its content is not there")
    return data


def missing_requirements(release: Release) -> list[str]:
    """Modules the release's code imports that this interpreter lacks (the build and its test skip then)."""
    return [name for name in release.requires if importlib.util.find_spec(name) is None]


# ---------------------------------------------------------------------------- build


def _copy_files(release: Release, git_dir: Path, out: Path) -> None:
    """Write the taken hub files unchanged (byte for byte) into the model folder."""
    for path in release.files:
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read_file(git_dir, release.commit, f"{release.root}/{path}" if release.root else path))


def _apply_shims(release: Release, out: Path) -> Notes:
    """Apply each version shim exactly once; a shim whose text is not found is an error, not a silent no-op."""
    notes: Notes = []
    for shim in release.shims:
        path = out / shim.path
        text = path.read_bytes().decode("utf-8")  # bytes: keep the file's own line endings (CRLF in some)
        if text.count(shim.old) != 1:
            raise RuntimeError(f"shim for {shim.path} does not match the mirror's file once: {shim.why}")
        path.write_bytes(text.replace(shim.old, shim.new).encode("utf-8"))
        notes.append(f"{shim.path}: {shim.why}")
    return notes


def _shrink_config(release: Release, out: Path) -> Notes:
    """Rewrite config.json with the tiny sizes; every other key keeps its published value."""
    path = out / "config.json"
    cfg = json.loads(path.read_text())
    notes = release.sizes(cfg)
    path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    return notes


def _write_weights(release: Release, out: Path, seed: int) -> int:
    """Instantiate the release's own model class from the shrunk config and save its random bf16 weights.

    Only the weights are written, every name of a shared tensor included (as published checkpoints store
    them: Ovis2's embedding and head; a loader that does not tie them again would leave the missing name on the
    meta device): ``save_pretrained`` would rewrite the published config.json and code files.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    config = AutoConfig.from_pretrained(out, trust_remote_code=True)
    model_class = get_class_from_dynamic_module(config.auto_map[release.model_auto], str(out))
    torch.manual_seed(seed)
    model = model_class(config)
    for call in release.init_calls:
        owner, _, name = call.rpartition(".")
        getattr(model.get_submodule(owner), name)()
    model = model.to(torch.bfloat16)
    save_file({name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    return sum(p.numel() for p in model.parameters())


def _marker(release: Release, seed: int, notes: dict[str, Any]) -> dict[str, Any]:
    """Identity of a build plus its documentation: mirror, commit, files taken and every change made."""
    return {"arch": f"published:{release.family}", "seed": seed, "version": BUILD_VERSION,
            "hub_id": release.hub_id, "mirror": release.mirror, "commit": release.commit,
            "files": list(release.files), "dropped": release.dropped, **notes}


def _is_complete(dest: Path, release: Release, seed: int) -> bool:
    """True when dest holds a finished build of the same release, commit, seed and builder version."""
    try:
        found = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (dest / "model.safetensors").is_file() and all(
        found.get(k) == v for k, v in _marker(release, seed, {}).items())


def build(family: str, dest: Path, *, seed: int = 0) -> Path:
    """Build the tiny copy of ``family`` into ``dest`` (reused when already built); MirrorMissing when it cannot."""
    release = RELEASES[family]
    dest = Path(dest)
    if _is_complete(dest, release, seed):
        return dest
    if missing := missing_requirements(release):
        raise MirrorMissing(f"{family}: its code imports {', '.join(missing)}, not installed here")
    git_dir = mirror_dir(release)
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _copy_files(release, git_dir, tmp)
        notes = {"sizes": _shrink_config(release, tmp), "shims": _apply_shims(release, tmp)}
        notes["init_calls"] = [f"{call}(): the release's own initialiser, called after the class is built (its "
                               "constructor leaves these weights at zero)" for call in release.init_calls]
        notes["num_parameters"] = _write_weights(release, tmp, seed)
        (tmp / MARKER).write_text(json.dumps(_marker(release, seed, notes), indent=2) + "\n")
        _replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _replace(tmp: Path, dest: Path) -> None:
    """Move a finished build into place; only an earlier tiny build or an empty folder is replaced."""
    if dest.exists():
        if any(dest.iterdir()) and not (dest / MARKER).is_file():
            raise FileExistsError(f"{dest} is not empty and is not a tiny build; refusing to overwrite")
        shutil.rmtree(dest)
    tmp.chmod(0o755)  # mkdtemp and safetensors create 0700/0600
    for item in tmp.iterdir():
        item.chmod(0o644)
    tmp.rename(dest)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m hooks.tiny.published``."""
    parser = argparse.ArgumentParser(prog="python -m hooks.tiny.published", description=__doc__.splitlines()[0])
    parser.add_argument("family", nargs="?", choices=sorted(RELEASES))
    parser.add_argument("dest", nargs="?", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="print the families and their mirrors")
    args = parser.parse_args(argv)
    if args.list or args.family is None or args.dest is None:
        for r in RELEASES.values():
            print(f"{r.family}\t{r.hub_id}\t{r.mirror}@{r.commit[:12]}")
        return 0 if args.list else 2
    try:
        print(build(args.family, args.dest, seed=args.seed))
    except MirrorMissing as exc:
        print(f"not built: {exc}")
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

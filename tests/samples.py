"""Inputs several tests share: the Qwen2.5-VL plan and a one-image chat batch."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from hooks.model.shrink import is_weight_file

FULL_CONFIGS = Path(__file__).resolve().parent / "fixtures" / "full_configs"

# The plan the probe derives for Qwen2.5-VL (MindSpeed-MM example order).
QWEN2_5_VL_PLAN = [
    "model.visual.blocks.{*}",
    "model.visual.merger",
    "model.visual",
    "model.language_model.embed_tokens",
    "model.language_model.layers.{*}",
    "model.language_model",
    "lm_head",
]


# Special tokens whose ids a published Qwen config names; re-pointed at the tiny tokenizer.
TOKEN_IDS = {
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
    "vision_token_id": "<|vision_pad|>",
    "bos_token_id": "<|endoftext|>",
    "eos_token_id": "<|im_end|>",
}


def retarget_token_ids(config: dict[str, Any], tokenizer: Any) -> None:
    """Point the published config's token ids at the tiny tokenizer (top level and sub-configs)."""
    for key, token in TOKEN_IDS.items():
        if key in config:
            config[key] = tokenizer.convert_tokens_to_ids(token)
    for value in config.values():
        if isinstance(value, dict) and "model_type" in value:
            retarget_token_ids(value, tokenizer)


def full_model_dir(name: str, tiny_dir: Path, dest: Path) -> Path:
    """Published config + tiny tokenizer/processor + weight shards that are never meant to be read: one whose header
    holds every parameter the config builds, with its shape, as the release's shards do (the copy's pre-flight reads
    headers only and holds them against the model), over sparse data nothing loads."""
    from transformers import AutoTokenizer

    dest.mkdir(parents=True)
    for item in tiny_dir.iterdir():
        if item.is_file() and item.name != "config.json" and not item.name.startswith("."):
            if not is_weight_file(item.name):
                shutil.copy2(item, dest / item.name)
    config = json.loads((FULL_CONFIGS / name / "config.json").read_text())
    retarget_token_ids(config, AutoTokenizer.from_pretrained(tiny_dir))
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    # A valid header over the model's full size in holes (no disk used): loading it would show in time and memory, so
    # the shrinker and the smoke never touching the weights stays visible; the other file is no checkpoint at all.
    shard = dest / "model-00001-of-00002.safetensors"
    tensors, end = {}, 0
    for tensor, shape in full_parameters(dest).items():
        size = 2 * math.prod(shape)
        tensors[tensor] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [end, end + size]}
        end += size
    header = json.dumps(tensors).encode()
    header += b" " * (-len(header) % 8)
    with shard.open("wb") as out:
        out.write(len(header).to_bytes(8, "little") + header)
        out.truncate(8 + len(header) + end)
    (dest / "model.safetensors.index.json").write_text(json.dumps({"weight_map": dict.fromkeys(tensors, shard.name)}))
    (dest / "original").mkdir()
    (dest / "original" / "consolidated.00.pth").write_bytes(b"not a checkpoint")
    (dest / "original" / "params.json").write_text('{"dim": 4096}')
    return dest


def full_parameters(model_dir: Path) -> dict[str, tuple[int, ...]]:
    """Each parameter (tied ones once) of the model ``model_dir``'s config.json builds, built as the probe builds it
    (on the meta device), with its shape: the names and shapes a release's shards hold."""
    from hooks.compat import ensure_torchvision
    from hooks.model.build import build_structure
    from hooks.model.facts import load_config_and_class

    ensure_torchvision()
    config, cls, _ = load_config_and_class(model_dir, trust_remote_code=False)
    model, _, _ = build_structure(cls, config, model_dir)
    return {name: tuple(param.shape) for name, param in model.named_parameters()}


def one_image_batch(model_dir: Path) -> tuple[Any, dict[str, Any]]:
    """The model's processor and its output for one 64x64 image in a user turn plus an answer."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What color is this?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Mostly red."}]},
    ]
    text = processor.apply_chat_template(messages, tokenize=False)
    image = Image.new("RGB", (64, 64), (220, 30, 30))
    return processor, processor(text=[text], images=[image], return_tensors="pt")


def encoded_sample(model_dir: Path) -> tuple[Any, dict[str, Any]]:
    """The processor and the contract smoke's encoding of its first built-in sample (labels included)."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from transformers import AutoProcessor

    from hooks.data.encoders import builtin_samples, encode

    processor = AutoProcessor.from_pretrained(model_dir)
    return processor, encode(processor, builtin_samples()[0])


def train_once(model_dir: Path, batch: dict[str, Any]) -> tuple[float, list[str]]:
    """Forward with labels and backward in fp32; the loss and the parameters left without a gradient."""
    import torch
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    # Floating inputs follow the parameter dtype, as MindSpeed-MM's move_to_device does (Llama 4 emits bf16).
    batch = {k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in batch.items()}
    out = model(**batch, use_cache=False)
    out.loss.backward()
    return float(out.loss.detach()), [n for n, p in model.named_parameters() if p.grad is None]


def feature_token_id(config: Any) -> int:
    """The placeholder id the model replaces with image features."""
    value = getattr(config, "image_token_id", None)
    return int(value if value is not None else config.image_token_index)


def tiny_sample(model_dir: Path) -> tuple[Any, Any, dict[str, Any]]:
    """Config, processor and encoded sample of a tiny build, after the size checks every family shares."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    processor, batch = encoded_sample(model_dir)
    text = config.get_text_config()
    assert (text.hidden_size, text.num_hidden_layers) == (64, 2)
    assert len(processor.tokenizer) <= text.vocab_size < len(processor.tokenizer) + 128
    return config, processor, batch



def template_on_tokenizer(model_dir: Path, dest: Path) -> Path:
    """``model_dir`` laid out as releases made before processors carried a chat template: the template in
    tokenizer_config.json only (no chat_template.jinja/.json), so the processor loads without one."""
    if not dest.is_dir():
        shutil.copytree(model_dir, dest)
        template = ""
        for name in ("chat_template.jinja", "chat_template.json"):
            if (dest / name).is_file():
                text = (dest / name).read_text(encoding="utf-8")
                template = json.loads(text)["chat_template"] if name.endswith(".json") else text
                (dest / name).unlink()
        config = json.loads((dest / "tokenizer_config.json").read_text(encoding="utf-8"))
        config["chat_template"] = template or config["chat_template"]
        (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return dest

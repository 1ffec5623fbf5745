"""Tiny model directories: complete, loadable through the Auto classes, trainable, reproducible."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hooks.data.sample import build_demo_dataset
from hooks.tiny import MARKER, all_builders, build_tiny_model, main
from hooks.tiny.core import BUILDERS, UNAVAILABLE
from tests.samples import one_image_batch

ARCHS = [arch for arch in BUILDERS if arch not in UNAVAILABLE]  # Qwen3.5: the transformers-5 leg (test_tf5)

QWEN_ARCHS = ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")

ALL_ARCHS = tuple(sorted(ARCHS))  # core families; the family test files and test_matrix cover the rest
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "video_preprocessor_config.json",
    "chat_template.jinja",
    MARKER,
)


def _file_bytes(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def train_step(model_dir: Path) -> float:
    """Load with the Auto classes, run forward with labels and backward; return the loss."""
    import torch
    from transformers import AutoModelForImageTextToText

    _, batch = one_image_batch(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    out = model(**batch, labels=batch["input_ids"])
    out.loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert any(g is not None and g.abs().sum() > 0 for g in grads)
    return float(out.loss.detach())


def image_token_id(config: Any) -> int:
    """The image placeholder id, whichever name the family's config uses."""
    value = getattr(config, "image_token_id", None)
    return int(value if value is not None else config.image_token_index)


def test_registry() -> None:
    assert set(QWEN_ARCHS) <= set(all_builders())
    assert {"llava_onevision", "internvl", "gemma3", "glm4v"} <= set(all_builders())


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_directory_is_complete(tiny_models, arch: str) -> None:
    model_dir = tiny_models(arch)
    for name in REQUIRED_FILES:
        if name != "video_preprocessor_config.json" or arch != "gemma3":  # Gemma 3 has no video
            assert (model_dir / name).is_file(), name
    assert json.loads((model_dir / MARKER).read_text())["arch"] == arch


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_image_token_and_sizes_match(tiny_models, arch: str) -> None:
    from transformers import AutoConfig

    model_dir = tiny_models(arch)
    config = AutoConfig.from_pretrained(model_dir)
    processor, batch = one_image_batch(model_dir)
    tok = processor.tokenizer
    assert image_token_id(config) == tok.convert_tokens_to_ids(processor.image_token)
    assert int((batch["input_ids"] == image_token_id(config)).sum()) > 0
    text = config.get_text_config()
    assert (text.hidden_size, text.num_hidden_layers) == (64, 2)
    assert len(tok) <= text.vocab_size < len(tok) + 128


@pytest.mark.parametrize("arch", QWEN_ARCHS)
def test_config_matches_tokenizer_and_sizes(tiny_models, arch: str) -> None:
    from transformers import AutoConfig, AutoTokenizer

    model_dir = tiny_models(arch)
    config = AutoConfig.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    text, vision = config.text_config, config.vision_config
    assert config.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert config.video_token_id == tok.convert_tokens_to_ids("<|video_pad|>")
    assert config.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_start|>")
    assert text.eos_token_id == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert text.pad_token_id == tok.pad_token_id
    assert len(tok) <= text.vocab_size < len(tok) + 128
    assert (text.hidden_size, text.num_hidden_layers, vision.depth, vision.hidden_size) == (64, 2, 2, 32)
    head_dim = text.hidden_size // text.num_attention_heads
    assert sum(text.rope_scaling["mrope_section"]) == head_dim // 2
    assert vision.out_hidden_size == text.hidden_size
    for key in ("fullatt_block_indexes", "deepstack_visual_indexes"):
        indexes = getattr(vision, key, None)
        if indexes is not None:
            assert indexes and all(0 <= i < vision.depth for i in indexes)
    if arch == "qwen3_vl_moe":
        assert (text.num_experts, text.num_experts_per_tok) == (4, 2)


@pytest.mark.parametrize("arch", QWEN_ARCHS)
def test_processor_gives_four_vision_tokens(tiny_models, arch: str) -> None:
    from transformers import AutoConfig

    model_dir = tiny_models(arch)
    processor, batch = one_image_batch(model_dir)
    assert {"input_ids", "pixel_values", "image_grid_thw"} <= set(batch)
    assert batch["image_grid_thw"].tolist() == [[1, 4, 4]]
    image_id = AutoConfig.from_pretrained(model_dir).image_token_id
    assert int((batch["input_ids"] == image_id).sum()) == 4
    text = processor.tokenizer.decode(batch["input_ids"][0])
    assert "<|im_start|>assistant\nMostly red.<|im_end|>" in text


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_loads_and_trains_one_step(tiny_models, arch: str) -> None:
    loss = train_step(tiny_models(arch))
    assert math.isfinite(loss) and loss > 0


def test_rebuild_is_a_noop(tiny_models) -> None:
    model_dir = tiny_models("qwen2_5_vl")
    before = {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()}
    assert build_tiny_model("qwen2_5_vl", model_dir) == model_dir
    assert {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()} == before


def test_same_seed_same_bytes(tiny_models, tmp_path: Path) -> None:
    again = build_tiny_model("qwen3_vl_moe", tmp_path / "again", seed=0)
    assert _file_bytes(again) == _file_bytes(tiny_models("qwen3_vl_moe"))


def test_other_seed_rebuilds_in_place(tmp_path: Path) -> None:
    dest = tmp_path / "m"
    seed0 = _file_bytes(build_tiny_model("qwen2_5_vl", dest, seed=0))
    seed1 = _file_bytes(build_tiny_model("qwen2_5_vl", dest, seed=1))
    assert seed0["model.safetensors"] != seed1["model.safetensors"]
    assert seed0["tokenizer.json"] == seed1["tokenizer.json"]
    assert json.loads(seed1[MARKER])["seed"] == 1


def test_refuses_to_overwrite_foreign_dir(tmp_path: Path) -> None:
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        build_tiny_model("qwen2_5_vl", dest)
    assert (dest / "notes.txt").read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temporary directory left behind


def test_unknown_arch() -> None:
    with pytest.raises(KeyError):
        build_tiny_model("no_such_arch", Path("/nonexistent"))


def test_demo_dataset(tmp_path: Path) -> None:
    from PIL import Image

    data_json = build_demo_dataset(tmp_path / "d", samples=5)
    data = json.loads(data_json.read_text())
    assert len(data) == 5
    for i, sample in enumerate(data):
        user, assistant = sample["messages"]
        assert user["role"] == "user" and user["content"].startswith("<image>")
        assert assistant["role"] == "assistant" and assistant["content"]
        assert sample["images"] == [f"images/img_{i}.png"]
        with Image.open(data_json.parent / sample["images"][0]) as img:
            assert img.size == (64, 64) and img.mode == "RGB"
    assert len({s["messages"][1]["content"] for s in data}) == 5
    again = build_demo_dataset(tmp_path / "e", samples=5)
    assert _file_bytes(again.parent / "images") == _file_bytes(data_json.parent / "images")
    assert again.read_bytes() == data_json.read_bytes()


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    assert capsys.readouterr().out.split() == sorted(all_builders())
    assert main(["--dataset", str(tmp_path / "data"), "--samples", "2"]) == 0
    assert len(json.loads((tmp_path / "data" / "data.json").read_text())) == 2
    with pytest.raises(SystemExit):
        main(["qwen2_5_vl"])

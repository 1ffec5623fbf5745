"""Shrinking model directories: consistent configs, verbatim files, a model that trains.

Sources are the tiny directories of ``hooks.tiny`` and two published full-size
configs (``tests/fixtures/full_configs``) placed next to a tiny tokenizer and
processor. In those assembled directories the token ids of the published config
are re-pointed at the tiny tokenizer's ids (a 150k-token tokenizer is not
available offline); every hyper-parameter stays as published.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hooks.model.shrink import (
    MARKER,
    is_weight_file,
    main,
    shrink_config_dict,
    shrink_model_dir,
)
from hooks.model.shrink_rules import (
    Dims,
    clamp_feature_layer,
    iter_levels,
    remap_per_layer,
    remap_special,
    remap_taps,
    scale_sections,
)
from hooks.tiny.core import BUILDERS, UNAVAILABLE
from tests.samples import full_model_dir, one_image_batch

ARCHS = [arch for arch in BUILDERS if arch not in UNAVAILABLE]  # Qwen3.5: the transformers-5 leg (test_tf5)

TINY_ARCHS = tuple(sorted(ARCHS))  # core families; tests/test_family_*.py shrink the others
FULL = {"Qwen2.5-VL-7B-Instruct": "qwen2_5_vl", "Qwen3-VL-30B-A3B-Instruct": "qwen3_vl_moe"}
PARAM_BUDGET = 5_000_000


@dataclass
class Case:
    name: str
    src: Path
    dest: Path


CASES = [f"tiny:{a}" for a in TINY_ARCHS] + [f"full:{n}" for n in FULL]


@pytest.fixture(scope="module", params=CASES)
def case(request: pytest.FixtureRequest, tiny_models, tmp_path_factory: pytest.TempPathFactory) -> Case:
    kind, name = request.param.split(":")
    root = tmp_path_factory.mktemp("shrink")
    if kind == "tiny":
        src = tiny_models(name)
    else:
        src = full_model_dir(name, tiny_models(FULL[name]), root / "src")
    dest = shrink_model_dir(src, root / "dest")
    return Case(request.param, src, dest)


@pytest.fixture(scope="module")
def model(case: Case) -> Any:
    import torch
    from transformers import AutoModelForImageTextToText

    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    return AutoModelForImageTextToText.from_pretrained(case.dest, dtype=torch.float32)


def _config_dicts(case: Case) -> tuple[dict[str, Any], dict[str, Any]]:
    """Source and shrunk configs as dicts, through AutoConfig (flat legacy keys normalised)."""
    from transformers import AutoConfig

    return (AutoConfig.from_pretrained(case.src).to_dict(), AutoConfig.from_pretrained(case.dest).to_dict())


def _levels(data: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [lv.data for lv in iter_levels(data) if lv.role == role]


def _head_dim(level: dict[str, Any]) -> int:
    heads = level.get("num_attention_heads") or level.get("num_heads")
    return level.get("head_dim") or level["hidden_size"] // heads


def test_text_config_is_small_and_consistent(case: Case) -> None:
    _, cfg = _config_dicts(case)
    texts = _levels(cfg, "text")
    assert texts
    for text in texts:
        heads, kv = text["num_attention_heads"], text["num_key_value_heads"]
        assert (text["hidden_size"], text["num_hidden_layers"], heads) == (64, 2, 4)
        assert heads % kv == 0 and _head_dim(text) * heads == 64
        assert len(text.get("layer_types") or [None] * 2) == 2
        rope = text.get("rope_scaling") or {}
        if rope.get("mrope_section"):
            rotary = round(_head_dim(text) * text.get("partial_rotary_factor", 1.0))
            assert sum(rope["mrope_section"]) == rotary // 2
        if text.get("num_experts"):
            assert 2 <= text["num_experts"] <= 4 and text["num_experts_per_tok"] <= text["num_experts"]
            assert text["moe_intermediate_size"] == 32


def test_vision_config_is_small_and_consistent(case: Case) -> None:
    _, cfg = _config_dicts(case)
    for vision in _levels(cfg, "vision"):
        depth = vision.get("depth") or vision.get("num_hidden_layers")
        assert vision["hidden_size"] == 32 and depth == 2
        assert vision["hidden_size"] % (vision.get("num_heads") or vision["num_attention_heads"]) == 0
        if "out_hidden_size" in vision:
            assert vision["out_hidden_size"] == 64
        for key in ("fullatt_block_indexes", "deepstack_visual_indexes"):
            if vision.get(key) is not None:
                assert vision[key] and all(0 <= i < depth for i in vision[key]), key
        if vision.get("fullatt_block_indexes"):
            assert len(vision["fullatt_block_indexes"]) < depth  # window blocks survive too
        if vision.get("deepstack_visual_indexes"):
            assert len(vision["deepstack_visual_indexes"]) >= 2


GEOMETRY = ("patch_size", "spatial_merge_size", "temporal_patch_size", "image_size", "in_channels")


def test_geometry_vocab_ids_and_ties_kept(case: Case) -> None:
    src, cfg = _config_dicts(case)
    for old, new in zip(_levels(src, "vision"), _levels(cfg, "vision"), strict=True):
        for key in GEOMETRY:
            assert new.get(key) == old.get(key), key
    for old, new in zip(_levels(src, "text"), _levels(cfg, "text"), strict=True):
        assert new["vocab_size"] == old["vocab_size"]
        assert new.get("tie_word_embeddings") == old.get("tie_word_embeddings")
    ids = [k for k in src if k.endswith(("_token_id", "_token_index"))]
    assert ids and all(cfg[k] == src[k] for k in ids)
    assert cfg.get("tie_word_embeddings") == src.get("tie_word_embeddings")


def test_non_weight_files_copied_verbatim(case: Case) -> None:
    expected = {
        p.name for p in case.src.iterdir()
        if p.is_file() and not p.name.startswith(".") and not is_weight_file(p.name)
    } - {"config.json"}
    for name in expected:
        assert (case.dest / name).read_bytes() == (case.src / name).read_bytes(), name
    weights = sorted(str(p.relative_to(case.dest)) for p in case.dest.rglob("*") if is_weight_file(p.name))
    assert weights == ["model.safetensors"]
    if (case.src / "original").is_dir():
        assert (case.dest / "original" / "params.json").is_file()
    assert json.loads((case.dest / MARKER).read_text())["layers"] == 2


def test_trains_one_step_with_unchanged_processor(case: Case, model: Any) -> None:
    batch = one_image_batch(case.dest)[1]
    assert batch["input_ids"].tolist() == one_image_batch(case.src)[1]["input_ids"].tolist()
    image_id = getattr(model.config, "image_token_id", None) or model.config.image_token_index
    assert int((batch["input_ids"] == image_id).sum()) > 0
    model.train()
    out = model(**batch, labels=batch["input_ids"])
    assert math.isfinite(float(out.loss.detach()))
    out.loss.backward()
    assert sum(p.grad is not None for p in model.parameters()) > 0
    model.zero_grad(set_to_none=True)


def test_repeated_containers_keep_two_entries(model: Any) -> None:
    import torch

    lists = {name: len(m) for name, m in model.named_modules() if isinstance(m, torch.nn.ModuleList)}
    assert lists and all(n >= 2 for n in lists.values()), lists


def test_parameter_budget(case: Case, model: Any) -> None:
    vocab = model.config.text_config.vocab_size
    total = sum(p.numel() for p in model.parameters())
    vocab_sized = sum(p.numel() for p in model.parameters() if p.dim() == 2 and p.shape[0] == vocab)
    # A 150k vocabulary alone costs vocab x 64 per embedding matrix (~9.7M; ~19.5M untied):
    # the budget applies to everything else, and to the whole model for small vocabularies.
    assert total - vocab_sized < PARAM_BUDGET
    if vocab < 10_000:
        assert total < PARAM_BUDGET


def test_deterministic(tiny_models, tmp_path: Path) -> None:
    src = tiny_models("qwen3_vl_moe")
    a = shrink_model_dir(src, tmp_path / "a", seed=3)
    b = shrink_model_dir(src, tmp_path / "b", seed=3)
    c = shrink_model_dir(src, tmp_path / "a", seed=4)  # replaces an earlier shrink output
    files = sorted(p.name for p in a.iterdir())
    assert files == sorted(p.name for p in b.iterdir())
    assert (b / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()
    b2 = shrink_model_dir(src, tmp_path / "b2", seed=3)
    for name in files:
        if name != MARKER:
            assert (b / name).read_bytes() == (b2 / name).read_bytes(), name


def test_more_layers(tiny_models, tmp_path: Path) -> None:
    from transformers import AutoConfig

    dest = shrink_model_dir(tiny_models("qwen2_5_vl"), tmp_path / "d", layers=3)
    cfg = AutoConfig.from_pretrained(dest)
    assert (cfg.text_config.num_hidden_layers, cfg.vision_config.depth) == (3, 3)
    assert cfg.vision_config.fullatt_block_indexes == [2]


def test_refuses_foreign_dest_and_one_layer(tiny_models, tmp_path: Path) -> None:
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError):
        shrink_model_dir(tiny_models("qwen2_5_vl"), dest)
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]
    with pytest.raises(ValueError):
        shrink_model_dir(tiny_models("qwen2_5_vl"), tmp_path / "x", layers=1)


def test_cli(tiny_models, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tiny_models("qwen3_vl")), str(tmp_path / "out"), "--layers", "2"]) == 0
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and "M params" in line and line.endswith(" s")


# Pure helpers --------------------------------------------------------------------------


def test_scale_sections() -> None:
    assert scale_sections([16, 24, 24], 8) == [2, 3, 3]
    assert sum(scale_sections([24, 20, 20], 8)) == 8
    assert sum(scale_sections([8, 12, 12], 4)) == 4  # GLM-4V partial rotary
    assert min(scale_sections([1, 100, 100], 3)) >= 1


def test_remap_special_keeps_both_kinds() -> None:
    assert remap_special([7, 15, 23, 31], 32, 2) == [1]
    assert remap_special([], 48, 2) == []
    assert remap_special(list(range(4)), 4, 2) == [0, 1]
    assert remap_special([0], 28, 3) == [0]


def test_remap_taps() -> None:
    assert remap_taps([8, 16, 24], 3, 2) == [0, 1]
    assert remap_taps([8, 16, 24], 3, 4) == [0, 2, 3]
    assert remap_taps([5], 1, 2) == [1]


def test_remap_per_layer_keeps_every_kind() -> None:
    gemma = (["sliding_attention"] * 5 + ["full_attention"]) * 8
    assert remap_per_layer(gemma, 2) == ["sliding_attention", "full_attention"]
    assert remap_per_layer(["full_attention"] * 28, 2) == ["full_attention"] * 2


def test_clamp_feature_layer() -> None:
    assert clamp_feature_layer(-2, 2) == -2
    assert clamp_feature_layer(-24, 2) == -3
    assert clamp_feature_layer([3, 26, -1], 2) == [2, 2, -1]


def test_per_frequency_rope_factors_follow_head_dim() -> None:
    """Phi-3's LongRoPE lists hold one factor per rotary frequency and its config checks their length."""
    factors = [1.0 + i / 100 for i in range(48)]
    data = {"model_type": "phi3_v", "vocab_size": 32064, "hidden_size": 3072, "num_hidden_layers": 32,
            "num_attention_heads": 32, "intermediate_size": 8192,
            "rope_scaling": {"type": "su", "short_factor": factors, "long_factor": factors[::-1]}}
    rope = shrink_config_dict(data, Dims())["rope_scaling"]
    assert len(rope["short_factor"]) == len(rope["long_factor"]) == 8  # head_dim 64 / 4 heads = 16, / 2
    assert rope["short_factor"] == [factors[i * 6] for i in range(8)] and rope["type"] == "su"


def test_generic_walk_on_other_families() -> None:
    """Config dicts of other layouts: nested llm_config, dense-first MoE, sliding patterns."""
    data = {
        "model_type": "x_vl",
        "vision_feature_layer": -12,
        "quantization_config": {"bits": 4},
        "llm_config": {
            "vocab_size": 100000, "hidden_size": 4096, "num_hidden_layers": 46, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 11008,
            "moe_intermediate_size": 1408, "n_routed_experts": 64, "num_experts_per_tok": 6,
            "n_shared_experts": 2, "first_k_dense_replace": 1, "n_group": 8, "topk_group": 3,
            "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 11 + ["full_attention"] * 2,
            "rope_scaling": {"rope_type": "default", "mrope_section": [8, 12, 12]},
            "partial_rotary_factor": 0.5,
        },
        "vision_config": {"hidden_size": 1536, "depth": 24, "num_heads": 12, "intermediate_size": 13696,
                          "out_hidden_size": 4096, "patch_size": 14, "image_size": 336},
    }
    out = shrink_config_dict(data, Dims())
    llm, vision = out["llm_config"], out["vision_config"]
    assert "quantization_config" not in out
    assert (llm["hidden_size"], llm["num_attention_heads"], llm["num_key_value_heads"], llm["head_dim"]) == (
        64, 4, 2, 16)
    assert llm["num_hidden_layers"] == 3 and llm["first_k_dense_replace"] == 1
    assert (llm["n_routed_experts"], llm["num_experts_per_tok"], llm["n_shared_experts"]) == (4, 2, 1)
    assert (llm["n_group"], llm["topk_group"]) == (1, 1)
    assert set(llm["layer_types"]) == {"sliding_attention", "full_attention"} and len(llm["layer_types"]) == 3
    assert sum(llm["rope_scaling"]["mrope_section"]) == 4  # partial rotary: 16 * 0.5 / 2
    assert llm["vocab_size"] == 100000
    assert (vision["hidden_size"], vision["depth"], vision["out_hidden_size"]) == (32, 2, 64)
    assert (vision["patch_size"], vision["image_size"]) == (14, 336)
    assert out["vision_feature_layer"] == -3

"""The remaining families (``hooks.tiny.misc``): tiny builds, token agreement, plans, shrink and the FSDP2 smoke.

Each architecture is built once per session (``tiny_models``), reloaded through the Auto classes
and trained on the contract smoke's own encoding of one image + one answer, with floating inputs
cast to the parameter dtype as MindSpeed-MM's ``move_to_device`` does (Llama 4's image processor
returns bf16 on purpose). The shrink tests start from a full-size config next to the tiny
tokenizer and a processor set to that config's geometry: the published GLM-4.5V / Llama-4-Scout
configs, else the family's transformers defaults plus the published fields the defaults lack
(Qwen2-VL's mRoPE sections, Aria's 14 px patches). The plan-rule tests at the end use synthetic
module tables and need no model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hooks.model.facts import ModelFacts
from hooks.model.plan import ModuleInfo, ModuleTable, derive_plan
from hooks.tiny import all_builders
from hooks.tiny.misc import BUILDERS
from tests.model_facts import stand_in_facts
from tests.samples import encoded_sample, feature_token_id, tiny_sample, train_once

ARCHS = tuple(BUILDERS)
FULL_CONFIGS = Path(__file__).resolve().parent / "fixtures" / "full_configs"

# Feature placeholders for the built-in 64x64 sample (the id the model fills): locks each family's geometry.
IMAGE_TOKENS = {
    "qwen2_vl": 4,  # 2x2 merged 14 px patches
    "glm4v_moe": 4,
    "deepseek_vl": 16,  # one per SigLIP patch (32 px / 8 px)
    "deepseek_vl_hybrid": 16,  # SAM features resampled to the SigLIP grid
    "ovis2": 4,  # 4x4 patches, hidden_stride 2
    "aria": 8,  # AriaProcessor always asks for the 980 px canvas
    "llama4": 20,  # 2x2 tiles + global tile, 4 tokens each after pixel shuffle
}
LANGUAGE_UNITS = ["model.language_model.embed_tokens", "model.language_model.layers.{*}", "model.language_model",
                  "lm_head"]
EXPECTED_UNITS = {
    "qwen2_vl": ["model.visual.blocks.{*}", "model.visual.merger", "model.visual", *LANGUAGE_UNITS],
    "glm4v_moe": ["model.visual.blocks.{*}", "model.visual.merger", "model.visual.downsample", "model.visual",
                  *LANGUAGE_UNITS],
    "deepseek_vl": ["model.vision_model.vision_model.encoder.layers.{*}", "model.vision_model", "model.aligner",
                    *LANGUAGE_UNITS],
    "deepseek_vl_hybrid": [
        "model.high_res_vision_model.vision_encoder.layers.{*}", "model.high_res_vision_model.vision_encoder.neck",
        "model.high_res_vision_model", "model.vision_model.vision_model.encoder.layers.{*}", "model.vision_model",
        "model.high_res_vision_neck", "model.high_res_vision_proj", "model.aligner", *LANGUAGE_UNITS],
    "ovis2": ["model.vision_tower.transformer.encoder.layers.{*}", "model.vision_tower",
              "model.visual_embeddings_table", *LANGUAGE_UNITS],
    # Aria reads the vision tower's recorded hidden states: the tower is not a unit (fully_shard renames it).
    "aria": ["model.vision_tower.encoder.layers.{*}", "model.multi_modal_projector", *LANGUAGE_UNITS],
    # No top-level ``model.``; the CausalLM wrapper's inner model is the tower and its head a unit of its own.
    "llama4": ["vision_model.model.layers.{*}", "vision_model", "multi_modal_projector",
               "language_model.model.embed_tokens", "language_model.model.layers.{*}", "language_model.model",
               "language_model.lm_head"],
}
EXPECTED_EP = {
    "glm4v_moe": ["model.language_model.layers.{*}.mlp.experts"],  # ModuleList of per-expert MLPs
    "aria": ["model.language_model.layers.{*}.mlp.experts"],  # AriaGroupedExpertsMLP
    "llama4": ["language_model.model.layers.{*}.feed_forward.experts"],  # fused Llama4TextExperts
}
# Layer 0 of the tiny GLM-4.5V and Llama 4 is dense (first_k_dense_replace / interleave step 2).
EP_LAYERS = {"glm4v_moe": 1, "aria": 2, "llama4": 1}


def test_registered() -> None:
    assert set(ARCHS) <= set(all_builders())
    assert len(ARCHS) == 7


@pytest.mark.parametrize("arch", ARCHS)
def test_builds_reloads_and_trains(arch: str, tiny_models) -> None:
    model_dir = tiny_models(arch)
    config, processor, batch = tiny_sample(model_dir)
    assert processor.chat_template
    assert int((batch["input_ids"] == feature_token_id(config)).sum()) == IMAGE_TOKENS[arch]
    assert "It is red." in processor.tokenizer.decode(batch["input_ids"][batch["labels"] != -100])
    loss, no_grad = train_once(model_dir, batch)
    assert math.isfinite(loss) and loss > 0
    assert no_grad == []


def test_family_geometry(tiny_models) -> None:
    """Facts each family's config must keep consistent with its processor or its own sub-configs."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from transformers import AutoConfig, AutoProcessor

    llama4 = AutoConfig.from_pretrained(tiny_models("llama4"))
    vision = llama4.vision_config
    assert vision.intermediate_size == vision.hidden_size / vision.pixel_shuffle_ratio**2
    assert (llama4.text_config.moe_layers, llama4.text_config.no_rope_layers) == ([1], [1, 0])
    glm = AutoConfig.from_pretrained(tiny_models("glm4v_moe")).text_config
    assert (glm.first_k_dense_replace, glm.n_routed_experts, glm.n_shared_experts) == (1, 4, 1)
    ovis2 = AutoConfig.from_pretrained(tiny_models("ovis2"))
    assert (ovis2.hidden_size, ovis2.vocab_size) == (ovis2.text_config.hidden_size, ovis2.text_config.vocab_size)
    aria = AutoConfig.from_pretrained(tiny_models("aria"))
    patches = {px: (px // aria.vision_config.patch_size) ** 2 for px in (490, 980)}
    conversion = AutoProcessor.from_pretrained(tiny_models("aria")).size_conversion
    assert {conversion[px]: aria.projector_patch_to_query_dict[n] for px, n in patches.items()} == {4: 4, 8: 8}
    sam = AutoConfig.from_pretrained(tiny_models("deepseek_vl_hybrid")).high_res_vision_config
    assert sam.global_attn_indexes[0] + 1 < sam.num_hidden_layers  # hidden_states[-1] is the neck output


@pytest.mark.parametrize("arch", ARCHS)
def test_plan(arch: str, tiny_models) -> None:
    from transformers import AutoModelForImageTextToText

    from hooks.model.matching import module_name_match
    from hooks.probe import probe

    facts = probe(tiny_models(arch))
    plan = facts.plan
    assert plan.problems == [] and facts.processor.error is None
    assert plan.apply_modules == EXPECTED_UNITS[arch]
    assert plan.ep_modules == EXPECTED_EP.get(arch, [])
    assert plan.hook_modules == (plan.recompute_modules[-1:] if arch in EXPECTED_EP else [])
    assert not facts.tie_word_embeddings
    names = [n for n, _ in AutoModelForImageTextToText.from_pretrained(tiny_models(arch)).named_modules()]
    for pattern in plan.apply_modules + plan.recompute_modules + plan.ep_modules:
        assert any(module_name_match(pattern, n) for n in names), pattern
    experts = [n for n in names if any(module_name_match(p, n) for p in plan.ep_modules)]
    assert len(experts) == EP_LAYERS.get(arch, 0)
    # No FSDP unit is an expert module or inside one: EP shards the experts, nothing wraps them twice.
    units = [n for n in names if any(module_name_match(p, n) for p in plan.apply_modules)]
    assert not [u for u in units for e in experts if u == e or u.startswith(e + ".")]


@pytest.mark.parametrize("arch", ARCHS)
def test_recompute_targets_take_past_key_values(arch: str, tiny_models) -> None:
    import inspect

    from transformers import AutoModelForImageTextToText

    from hooks.model.matching import module_name_match
    from hooks.probe import probe

    plan = probe(tiny_models(arch), with_processor=False).plan
    model = AutoModelForImageTextToText.from_pretrained(tiny_models(arch))
    for pattern in plan.recompute_modules:
        for name, module in model.named_modules():
            if module_name_match(pattern, name):
                params = inspect.signature(module.forward).parameters.values()
                assert any(p.name == "past_key_values" or p.kind is p.VAR_KEYWORD for p in params), name


def test_recommendation_without_a_checkout() -> None:
    """No data parity can run: the family's in-repo template, then a derivable chat format, then branch c."""
    from hooks.data.candidates import recommend

    def facts(model_type: str, chat: dict | None) -> ModelFacts:
        data_format = {"chat": chat, "media": {"item_prefix": ""}} if chat is not None else None
        return stand_in_facts(model_type, {"data_format": data_format})

    assert recommend(facts("qwen2_vl", {"problems": []}), None).template == "qwen2vl"
    for model_type, template in (("glm4v", "glm4.1v"), ("glm4v_moe", "glm4v_moe")):
        choice = recommend(facts(model_type, {"problems": []}), None)
        assert (choice.branch, choice.template, choice.collator_id) == ("a", template, "qwen3vl")
        assert "not checked" in choice.reason
    assert recommend(facts("llama4", {"problems": [], "image_item": "<|image|>"}), None).branch == "b"
    no_slots = recommend(facts("emu3", {"problems": ["the expansion depends on where it stands"]}), None)
    assert no_slots.branch == "c" and "depends on where it stands" in no_slots.reason
    assert recommend(facts("paligemma", None), None).branch == "c"


# Shrinking a full-size config ---------------------------------------------------------------------

# arch -> (published fixture, or None for transformers' defaults; fields the defaults lack; processor settings).
FULL_SIZE: dict[str, tuple[str | None, dict[str, Any], dict[str, Any]]] = {
    # Qwen2VLConfig() has no rope_scaling: forward needs the mRoPE sections (Qwen2-VL-7B's).
    "qwen2_vl": (None, {"text_config": {"rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}}, {}),
    "glm4v_moe": ("GLM-4.5V", {}, {}),
    "deepseek_vl": (None, {}, {"num_image_tokens": 196, "image_processor.size": {"height": 224, "width": 224}}),
    "deepseek_vl_hybrid": (None, {}, {"num_image_tokens": 196, "image_processor.size": {"height": 224, "width": 224},
                                      "image_processor.high_res_size": {"height": 1024, "width": 1024}}),
    # Ovis2Config(): top-level hidden/vocab disagree with its own text config (the shrink fix aligns them).
    "ovis2": (None, {}, {"image_seq_length": 256, "image_processor.size": {"height": 224, "width": 224}}),
    # AriaConfig()'s projector expects 14 px patches (1225/4900) but its default vision config has 32 px.
    "aria": (None, {"vision_config": {"patch_size": 14}}, {"size_conversion": {490: 128, 980: 256}}),
    "llama4": ("Llama-4-Scout-17B-16E-Instruct", {}, {"image_processor.size": {"height": 336, "width": 336}}),
}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _retarget_token_ids(config: dict[str, Any], tiny: dict[str, Any]) -> None:
    """Point every token-id field at the tiny tokenizer's id (a 150k-200k token tokenizer is not offline)."""
    for key, value in config.items():
        if isinstance(value, dict) and isinstance(tiny.get(key), dict):
            _retarget_token_ids(value, tiny[key])
        elif isinstance(key, str) and ("token_id" in key or "token_index" in key) and key in tiny:
            config[key] = tiny[key]


def full_size_dir(arch: str, tiny_dir: Path, dest: Path) -> Path:
    """A full-size config next to the tiny tokenizer and a processor with that config's geometry (no weights)."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from transformers import AutoConfig, AutoProcessor

    fixture, extra, settings = FULL_SIZE[arch]
    tiny = json.loads((tiny_dir / "config.json").read_text())
    if fixture:
        data = json.loads((FULL_CONFIGS / fixture / "config.json").read_text())
    else:
        data = type(AutoConfig.from_pretrained(tiny_dir))().to_dict()
        data["architectures"] = tiny["architectures"]
    _merge(data, extra)
    _retarget_token_ids(data, tiny)
    processor = AutoProcessor.from_pretrained(tiny_dir)
    for path, value in settings.items():
        *parents, name = path.split(".")
        owner = processor
        for parent in parents:
            owner = getattr(owner, parent)
        setattr(owner, name, value)
    processor.save_pretrained(dest)
    (dest / "config.json").write_text(json.dumps(data, indent=2))
    return dest


@pytest.mark.parametrize("source", ["tiny", "full"])
@pytest.mark.parametrize("arch", ARCHS)
def test_shrink(arch: str, source: str, tiny_models, tmp_path: Path) -> None:
    from transformers import AutoConfig

    from hooks.model.shrink import shrink_model_dir

    src = tiny_models(arch) if source == "tiny" else full_size_dir(arch, tiny_models(arch), tmp_path / "src")
    dest = shrink_model_dir(src, tmp_path / "dest")
    text = AutoConfig.from_pretrained(dest).get_text_config()
    assert text.hidden_size == 64
    _, batch = encoded_sample(dest)
    loss, _ = train_once(dest, batch)
    assert math.isfinite(loss) and loss > 0


def test_family_fixes() -> None:
    """The shrink fixes on published / default layouts (config dicts only, no model)."""
    import transformers as tf

    from hooks.model.shrink import shrink_config_dict
    from hooks.model.shrink_rules import Dims

    dims = Dims()
    scout = shrink_config_dict(json.loads((FULL_CONFIGS / "Llama-4-Scout-17B-16E-Instruct" / "config.json")
                                          .read_text()), dims)
    vision, text = scout["vision_config"], scout["text_config"]
    assert vision["intermediate_size"] == vision["hidden_size"] * 4  # pixel shuffle 0.5
    assert vision["projector_input_dim"] == vision["projector_output_dim"] == vision["vision_output_dim"] == 64
    assert (text["intermediate_size"], text["intermediate_size_mlp"], text["moe_layers"]) == (32, 128, [0, 1])
    ovis2 = shrink_config_dict(tf.Ovis2Config().to_dict(), dims)
    assert (ovis2["hidden_size"], ovis2["vocab_size"]) == (64, ovis2["text_config"]["vocab_size"])
    assert ovis2["vision_config"]["vocab_size"] == 512
    hybrid = shrink_config_dict(tf.DeepseekVLHybridConfig().to_dict(), dims)["high_res_vision_config"]
    assert (hybrid["num_hidden_layers"], hybrid["global_attn_indexes"], hybrid["mlp_dim"]) == (2, [0], 64)


# Plan rules on synthetic module tables ---------------------------------------------------------


def _table(rows: list[tuple[str, str, int]], *, tied: list[tuple[str, str]] | None = None,
           inp: str, out: str) -> ModuleTable:
    """A module table from (name, class, own params) rows; subtree totals are summed here."""
    lists = {"ModuleList"}
    totals = {name: 0 for name, _, _ in rows}
    for name, _, own in rows:
        parts = name.split(".") if name else []
        for i in range(len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in totals:
                totals[prefix] += own
    modules = [ModuleInfo(n, c, totals[n], own, c in lists) for n, c, own in rows]
    return ModuleTable(modules, no_split=["DecoderLayer", "VisionLayer"], input_embeddings=inp,
                       output_embeddings=out, tied=tied or [])


def _causal_lm_wrapper(moe: str) -> list[tuple[str, str, int]]:
    """Llama-4-like layout: vision_model / projector / language_model.{model, lm_head}, with MoE layers."""
    rows = [("", "Top", 0), ("vision_model", "Vision", 10), ("vision_model.layers", "ModuleList", 0)]
    rows += [(f"vision_model.layers.{i}", "VisionLayer", 100) for i in range(2)]
    rows += [("projector", "Proj", 50), ("language_model", "CausalLM", 0), ("language_model.model", "Text", 0),
             ("language_model.model.embed_tokens", "Embedding", 1000), ("language_model.model.layers", "ModuleList", 0)]
    for i in range(2):
        layer = f"language_model.model.layers.{i}"
        rows += [(layer, "DecoderLayer", 100), (f"{layer}.mlp", "MoE", 0)]
        if moe == "list":  # GLM-4.5V: one module per expert, plus dense shared experts
            rows += [(f"{layer}.mlp.experts", "ModuleList", 0), (f"{layer}.mlp.shared_experts", "MLP", 30)]
            rows += [(f"{layer}.mlp.experts.{e}", "MLP", 30) for e in range(2)]
        else:  # fused 3-D experts inside a module named experts
            rows += [(f"{layer}.mlp.experts", "TextExperts", 60), (f"{layer}.mlp.shared_expert", "MLP", 30)]
    rows += [("language_model.model.norm", "Norm", 1), ("language_model.lm_head", "Linear", 1000)]
    return rows


@pytest.mark.parametrize("moe", ["list", "fused"])
def test_plan_splits_head_off_a_causal_lm_wrapper(moe: str) -> None:
    table = _table(_causal_lm_wrapper(moe), inp="language_model.model.embed_tokens", out="language_model.lm_head")
    plan = derive_plan(table)
    assert plan.language_tower == "language_model.model"
    assert plan.apply_modules == ["vision_model.layers.{*}", "vision_model", "projector",
                                  "language_model.model.embed_tokens", "language_model.model.layers.{*}",
                                  "language_model.model", "language_model.lm_head"]
    assert plan.ep_modules == ["language_model.model.layers.{*}.mlp.experts"]
    assert plan.hook_modules == ["language_model.model.layers.{*}"] and plan.problems == []


def test_plan_keeps_a_tied_causal_lm_wrapper_whole() -> None:
    table = _table(_causal_lm_wrapper("fused"), inp="language_model.model.embed_tokens",
                   out="language_model.lm_head", tied=[("language_model.model.embed_tokens", "language_model.lm_head")])
    plan = derive_plan(table)
    assert plan.language_tower == "language_model"
    assert plan.apply_modules[-2:] == ["language_model.model.layers.{*}", "language_model"]
    assert plan.problems == []


# The FSDP2 contract smoke of these architectures runs in tests/test_matrix.py (ranks forked, warm).

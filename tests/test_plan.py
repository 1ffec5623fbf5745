"""Plan derivation on synthetic module tables (no torch): layouts that trip naive plans."""

from __future__ import annotations

from hooks.model.matching import module_name_match
from hooks.model.plan import ModuleInfo, ModuleTable, derive_plan


def table(spec: list[tuple[str, str, int]], *, lists: set[str], **kw) -> ModuleTable:
    """Build a table from (name, class, own params); subtree totals are summed here."""
    totals = {name: 0 for name, _, _ in spec}
    for name, _, own in spec:
        parts = name.split(".") if name else []
        for i in range(len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in totals:
                totals[prefix] += own
    mods = [ModuleInfo(n, c, totals[n], own, n in lists) for n, c, own in spec]
    return ModuleTable(modules=mods, **kw)


def qwen_like(*, tied: bool = False, moe: bool = False) -> ModuleTable:
    spec = [("", "VLM", 0), ("model", "Model", 0), ("model.visual", "Vision", 0),
            ("model.visual.patch_embed", "PatchEmbed", 10), ("model.visual.blocks", "ModuleList", 0)]
    spec += [(f"model.visual.blocks.{i}", "VisionBlock", 100) for i in range(2)]
    spec += [("model.visual.merger", "Merger", 50), ("model.visual.merger.norm", "Norm", 1),
             ("model.language_model", "TextModel", 0), ("model.language_model.embed_tokens", "Embedding", 500),
             ("model.language_model.layers", "ModuleList", 0)]
    for i in range(3):
        spec.append((f"model.language_model.layers.{i}", "DecoderLayer", 200))
        if moe:
            spec.append((f"model.language_model.layers.{i}.mlp", "SparseMoeBlock", 0))
            spec.append((f"model.language_model.layers.{i}.mlp.experts", "TextExperts", 400))
    spec += [("model.language_model.norm", "Norm", 2), ("lm_head", "Linear", 0 if tied else 500)]
    return table(spec, lists={"model.visual.blocks", "model.language_model.layers"},
                 no_split=["DecoderLayer", "VisionBlock"], input_embeddings="model.language_model.embed_tokens",
                 output_embeddings="lm_head", tied=[("model.language_model.embed_tokens", "lm_head")] if tied else [])


def test_qwen_layout_matches_mindspeed_examples_order() -> None:
    plan = derive_plan(qwen_like())
    assert plan.apply_modules == [
        "model.visual.blocks.{*}", "model.visual.merger", "model.visual",
        "model.language_model.embed_tokens", "model.language_model.layers.{*}", "model.language_model", "lm_head",
    ]
    assert plan.recompute_modules == ["model.visual.blocks.{*}", "model.language_model.layers.{*}"]
    assert plan.ep_modules == [] and plan.problems == []
    assert plan.freeze_proposal == ["model.visual"]
    assert plan.non_root_share == 1.0


def test_tied_embeddings_are_owned_by_one_unit() -> None:
    plan = derive_plan(qwen_like(tied=True))
    assert "lm_head" not in plan.apply_modules
    assert "model.language_model.embed_tokens" not in plan.apply_modules
    assert "model.language_model" not in plan.apply_modules  # it would hold the embedding but not lm_head
    assert "model.language_model.layers.{*}" in plan.apply_modules
    assert plan.problems == []


def test_moe_experts_give_ep_plan() -> None:
    plan = derive_plan(qwen_like(moe=True))
    assert plan.ep_modules == ["model.language_model.layers.{*}.mlp.experts"]
    assert plan.hook_modules == ["model.language_model.layers.{*}"]
    assert not any("experts" in p for p in plan.apply_modules)


def test_llava_layout_gets_projector_between_towers() -> None:
    spec = [("", "Llava", 0), ("model", "LlavaModel", 0), ("model.vision_tower", "CLIPVisionModel", 0),
            ("model.vision_tower.vision_model", "CLIPVisionTransformer", 0),
            ("model.vision_tower.vision_model.embeddings", "Emb", 30),
            ("model.vision_tower.vision_model.encoder", "Encoder", 0),
            ("model.vision_tower.vision_model.encoder.layers", "ModuleList", 0)]
    spec += [(f"model.vision_tower.vision_model.encoder.layers.{i}", "CLIPEncoderLayer", 100) for i in range(2)]
    spec += [("model.vision_tower.vision_model.post_layernorm", "LayerNorm", 1),
             ("model.multi_modal_projector", "Projector", 40), ("model.language_model", "LlamaModel", 0),
             ("model.language_model.embed_tokens", "Embedding", 500), ("model.language_model.layers", "ModuleList", 0)]
    spec += [(f"model.language_model.layers.{i}", "LlamaDecoderLayer", 200) for i in range(2)]
    spec += [("lm_head", "Linear", 500)]
    lists = {"model.vision_tower.vision_model.encoder.layers", "model.language_model.layers"}
    plan = derive_plan(table(spec, lists=lists, no_split=["LlamaDecoderLayer"],
                             input_embeddings="model.language_model.embed_tokens", output_embeddings="lm_head"))
    assert plan.apply_modules == [
        "model.vision_tower.vision_model.encoder.layers.{*}", "model.vision_tower", "model.multi_modal_projector",
        "model.language_model.embed_tokens", "model.language_model.layers.{*}", "model.language_model", "lm_head",
    ]


def test_every_pattern_matches_and_none_overlap() -> None:
    tbl = qwen_like(moe=True)
    plan = derive_plan(tbl)
    for pattern in plan.apply_modules + plan.recompute_modules + plan.ep_modules:
        assert any(module_name_match(pattern, m.name) for m in tbl.modules), pattern
    for rep in plan.reports:
        assert rep.matched >= 1


def test_tower_read_for_hidden_states_is_not_a_unit() -> None:
    """fully_shard renames the class; transformers 4.57 then finds no output recorders for it."""
    tbl = qwen_like()
    tbl.hidden_state_sources = ["model.visual"]
    plan = derive_plan(tbl)
    assert "model.visual" not in plan.apply_modules
    assert "model.visual.blocks.{*}" in plan.apply_modules and plan.problems == []


def test_blocks_without_past_key_values_are_not_recomputed() -> None:
    """MindSpeed-MM's recompute wrapper always passes past_key_values=None."""
    tbl = qwen_like()
    tbl.no_recompute_classes = ["VisionBlock"]
    plan = derive_plan(tbl)
    assert plan.recompute_modules == ["model.language_model.layers.{*}"]
    assert "model.visual.blocks.{*}" in plan.apply_modules
    assert plan.recompute_left_out == ["VisionBlock"]  # MIGRATION.md says why


def test_no_recomputable_block_leaves_an_empty_plan() -> None:
    """Every block refuses past_key_values: no recompute pattern (the YAML then says recompute: false)."""
    tbl = qwen_like()
    tbl.no_recompute_classes = ["VisionBlock", "DecoderLayer"]
    plan = derive_plan(tbl)
    assert plan.recompute_modules == [] and plan.recompute_left_out == ["DecoderLayer", "VisionBlock"]

"""The probe on every published full-size config (meta device, no weights): plans and the fast meta build.

The fixtures under ``tests/fixtures/full_configs`` are the configs as published on the Hub. GLM-4.5V
(one module per routed expert, ~30k modules) is the case that forced the fast build; its table is
compared with a plain build on a shortened copy, and its parameter count with the published weights.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

import hooks.model.facts as facts_mod
from hooks.model.build import build_meta_model
from hooks.model.loading import resolve_model_class
from hooks.model.matching import module_name_match
from hooks.model.plan import ModuleTable, unit_owners
from hooks.probe import probe
from tests.conftest import FULL_CONFIGS

NAMES = sorted(p.name for p in FULL_CONFIGS.iterdir() if (p / "config.json").is_file())

# Sum of all tensors in GLM-4.5V's 46 safetensors files is 107,710,933,120; 5,760 of them are the
# 45 x 128 ``e_score_correction_bias`` entries, a buffer (not a parameter) in transformers.
GLM45V_PARAMS = 107_710_933_120 - 45 * 128

# Per config: patterns the plan must contain (in this relative order), and the exact EP plan.
EXPECTED: dict[str, tuple[list[str], list[str]]] = {
    "Qwen2.5-VL-7B-Instruct": (
        ["model.visual.blocks.{*}", "model.visual.merger", "model.visual", "model.language_model.embed_tokens",
         "model.language_model.layers.{*}", "model.language_model", "lm_head"], []),
    "Qwen2.5-VL-72B-Instruct": (
        ["model.visual.blocks.{*}", "model.visual.merger", "model.visual", "model.language_model.embed_tokens",
         "model.language_model.layers.{*}", "model.language_model", "lm_head"], []),
    "Qwen3-VL-30B-A3B-Instruct": (
        ["model.visual.blocks.{*}", "model.visual.deepstack_merger_list.{*}", "model.visual",
         "model.language_model.layers.{*}", "lm_head"], ["model.language_model.layers.{*}.mlp.experts"]),
    "Qwen3-VL-235B-A22B-Instruct": (
        ["model.visual.blocks.{*}", "model.visual.deepstack_merger_list.{*}", "model.visual",
         "model.language_model.layers.{*}", "lm_head"], ["model.language_model.layers.{*}.mlp.experts"]),
    "InternVL3-78B-hf": (
        ["model.vision_tower.encoder.layer.{*}", "model.vision_tower", "model.multi_modal_projector",
         "model.language_model.embed_tokens", "model.language_model.layers.{*}", "model.language_model", "lm_head"],
        []),
    "Llama-4-Scout-17B-16E-Instruct": (
        ["vision_model.model.layers.{*}", "vision_model", "multi_modal_projector",
         "language_model.model.embed_tokens", "language_model.model.layers.{*}", "language_model.model",
         "language_model.lm_head"], ["language_model.model.layers.{*}.feed_forward.experts"]),
    "GLM-4.5V": (
        ["model.visual.blocks.{*}", "model.visual.merger", "model.visual", "model.language_model.embed_tokens",
         "model.language_model.layers.{*}", "model.language_model", "lm_head"],
        ["model.language_model.layers.{*}.mlp.experts"]),
    # Tied embeddings: embed_tokens and lm_head share one weight, so neither (nor the language model
    # holding only one side) is a unit; the root owns both.
    "gemma-3-27b-it": (
        ["model.vision_tower.vision_model.encoder.layers.{*}", "model.vision_tower", "model.multi_modal_projector",
         "model.language_model.layers.{*}"], []),
    # The thinker, as MindSpeed-MM's plugin trains it (TRAINED below; tests/test_stages.py compares with its YAML).
    "Qwen3-Omni-30B-A3B-Instruct": (
        ["audio_tower.layers.{*}", "audio_tower", "visual.blocks.{*}", "visual", "model.embed_tokens",
         "model.layers.{*}", "model", "lm_head"], ["model.layers.{*}.mlp.experts"]),
}

# Published classes whose trainer builds one sub-model (hooks/model/stages.py): probed from that sub-model.
TRAINED = {"Qwen3-Omni-30B-A3B-Instruct": "thinker"}


@pytest.fixture(scope="module")
def probed() -> dict[str, tuple[facts_mod.ModelFacts, ModuleTable]]:
    """Each full config probed once, with the module table the probe itself built."""
    results: dict[str, tuple[facts_mod.ModelFacts, ModuleTable]] = {}
    tables: list[ModuleTable] = []
    table_fn = facts_mod.module_table

    def capturing(model: Any) -> ModuleTable:
        tables.append(table_fn(model))
        return tables[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(facts_mod, "module_table", capturing)
        for name in NAMES:
            facts = probe(FULL_CONFIGS / name, with_processor=False, trained_submodule=TRAINED.get(name))
            results[name] = (facts, tables[-1])
    return results


def test_every_full_config_has_expectations() -> None:
    assert set(NAMES) == set(EXPECTED)


@pytest.mark.parametrize("name", NAMES)
def test_full_config_plan(name: str, probed) -> None:
    facts, table = probed[name]
    plan = facts.plan
    assert plan.problems == []
    wanted_apply, wanted_ep = EXPECTED[name]
    assert [p for p in plan.apply_modules if p in wanted_apply] == wanted_apply
    assert plan.ep_modules == wanted_ep
    assert plan.hook_modules == (plan.recompute_modules[-1:] if wanted_ep else [])
    names = [m.name for m in table.modules]
    for pattern in plan.apply_modules + plan.recompute_modules + plan.ep_modules:
        assert any(module_name_match(pattern, n) for n in names), pattern
    # Experts are sharded by EP inside their layer's unit, never FSDP units of their own.
    assert not any(".experts" in p for p in plan.apply_modules)
    assert plan.recompute_modules[-1] == [p for p in wanted_apply if p.endswith("layers.{*}")][-1]
    assert plan.non_root_share > 0.9
    owners = unit_owners(table, plan.apply_modules)
    for a, b in table.tied:  # one unit owns a shared weight
        assert owners[a] == owners[b], (a, b)


def test_tied_gemma3_keeps_the_tie_in_one_unit(probed) -> None:
    facts, table = probed["gemma-3-27b-it"]
    assert facts.tie_word_embeddings and table.tied == [("model.language_model.embed_tokens", "lm_head")]
    assert not {"lm_head", "model.language_model", "model.language_model.embed_tokens"} & set(
        facts.plan.apply_modules)


def test_full_glm45v_parameters_and_modules(probed) -> None:
    facts, table = probed["GLM-4.5V"]
    assert facts.num_parameters == GLM45V_PARAMS
    assert len(table.modules) == 29_823
    experts = [m.name for m in table.modules if module_name_match("model.language_model.layers.{*}.mlp.experts.{*}",
                                                                     m.name)]
    assert len(experts) == 45 * 128  # first_k_dense_replace=1: layer 0 is dense
    # Build time is a benchmark figure (tests/benchmarks/bench_full_probe.py), not an assert.


def _tables(name: str, mutate: Any = None) -> tuple[ModuleTable, ModuleTable]:
    from transformers import AutoConfig

    model_dir = Path(FULL_CONFIGS / name)
    config = AutoConfig.from_pretrained(model_dir)
    if mutate:
        mutate(config)
    cls = resolve_model_class(config, model_dir, trust_remote_code=False)
    fast = facts_mod.module_table(build_meta_model(cls, copy.deepcopy(config)))
    plain = facts_mod.module_table(build_meta_model(cls, config, fast=False))
    return fast, plain


def _shorten_glm(config: Any) -> None:
    config.text_config.num_hidden_layers = 3  # layer 0 dense + 2 MoE layers of 128 experts
    config.vision_config.depth = 2


def _shorten_gemma(config: Any) -> None:
    config.text_config.num_hidden_layers = 2
    config.vision_config.num_hidden_layers = 2


@pytest.mark.parametrize(("name", "mutate"), [("GLM-4.5V", _shorten_glm), ("gemma-3-27b-it", _shorten_gemma)],
                         ids=["glm45v-3-layers", "gemma3-tied-2-layers"])
def test_fast_meta_build_gives_the_same_table_as_a_plain_build(name: str, mutate: Any) -> None:
    """Names, classes, parameter counts, lists, no-split classes, embeddings and ties: all identical."""
    fast, plain = _tables(name, mutate)
    assert fast == plain
    assert len(fast.modules) > 1000 if name == "GLM-4.5V" else fast.tied

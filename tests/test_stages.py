"""Multi-stage checkpoints (issue 22): Qwen3-Omni's published class bundles a thinker, a talker and a vocoder.

``tests/fixtures/full_configs/Qwen3-Omni-30B-A3B-Instruct/config.json`` carries the published hyper-parameters of
Qwen/Qwen3-Omni-30B-A3B-Instruct (every width, depth, expert count and token id as the Hub folder's config prints
them), written with the key names transformers 4.57 reads (``rope_scaling``/``rope_theta``, ``num_experts``): no
public mirror of the Hub folder's own file was found, so it is a transcription, not a byte copy.

The top-level class has no input embeddings (``get_input_embeddings`` raises ``NotImplementedError``); the probe
must not crash on it. MindSpeed-MM's plugin trains the thinker only; with the thinker as the trained sub-model
the plan must agree with MindSpeed-MM's own example YAML (recorded below with file:line; tier 2 reads the file).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import hooks.model.facts as facts_mod
from hooks.model.loading import ProbeError
from hooks.model.stages import Stage, embeddings, plugin_stage
from hooks.probe import probe
from tests.conftest import FULL_CONFIGS

OMNI = FULL_CONFIGS / "Qwen3-Omni-30B-A3B-Instruct"
EXAMPLE_YAML = Path("examples") / "qwen3omni" / "qwen3omni_config_v1.yaml"

# MindSpeed-MM 57069cd5, examples/qwen3omni/qwen3omni_config_v1.yaml:7-12 (parallel.fsdp_plan.apply_modules)
# and :98 (features.recompute_plan.apply_modules).
YAML_APPLY = ["visual", "visual.blocks.{*}", "model", "model.embed_tokens", "model.layers.{*}", "lm_head"]
YAML_RECOMPUTE = ["model.layers.{*}"]

# Where ours differ, read off transformers 4.57.1's Qwen3OmniMoeThinkerForConditionalGeneration:
# - audio_tower.layers.{*}, audio_tower: the thinker's get_audio_features calls self.audio_tower(...), a
#   32-layer encoder (~0.64B parameters). The example leaves it in the root unit because it freezes it
#   (qwen3omni_config_v1.yaml:81-87, `freeze: [..., audio_tower]`); our YAML trains every tower by default
#   (freeze is only proposed), so its layers are units and recompute targets like the vision blocks.
# - audio_tower.conv_out: a 7680x1280 Linear registered after the encoder layers (1.5% of the tower), called
#   by the tower's own forward: a unit by the "siblings after a container" rule; gathered by its own hooks.
# - visual.merger: registered after visual.blocks (the rule as for Qwen2.5-VL's merger); the example leaves it
#   in visual's unit. Both are correct under FSDP2: a module's forward gathers its own unit.
# - visual.blocks.{*} in recompute: frozen in the example (no activations kept for backward there), trained here.
# - model.layers.{*}.mlp.experts as the EP plan: the example runs expert_parallel_size 1 and names none.
EXTRA_APPLY = {"audio_tower.layers.{*}", "audio_tower.conv_out", "audio_tower", "visual.merger"}
EXTRA_RECOMPUTE = {"audio_tower.layers.{*}", "visual.blocks.{*}"}


@pytest.fixture(scope="module")
def thinker() -> facts_mod.ModelFacts:
    return probe(OMNI, with_processor=False, trained_submodule="thinker")


def test_published_class_without_input_embeddings_trains_its_thinker(tmp_path: Path,
                                                                      thinker: facts_mod.ModelFacts) -> None:
    """No trained sub-model named, no plugin in the checkout: the published class (no forward of its own, no input
    embeddings) is not planned whole; the classes show the thinker (issue 33), built on the meta device, no crash.

    Before issue 33 this planned the whole bundle (``thinker.model.layers.{*}``, ``talker.model.layers.{*}``): a
    class whose forward returns no loss, with patterns that match nothing the trainer builds."""
    facts = probe(OMNI, with_processor=False, checkout=tmp_path)  # a folder with no plugins
    assert facts.architecture == "Qwen3OmniMoeThinkerForConditionalGeneration"
    assert facts.trained_submodule.name == "thinker" and "read off the classes" in facts.trained_submodule.reason
    assert not facts.build.how  # built on the meta device, nothing failed: nothing recorded
    assert facts.plan == thinker.plan  # the same plan as the user's answer gives


def test_thinker_plan_matches_the_example_yaml(thinker: facts_mod.ModelFacts) -> None:
    assert thinker.model_type == "qwen3_omni_moe"  # the family stays the published one
    assert thinker.architecture == "Qwen3OmniMoeThinkerForConditionalGeneration"
    stage = thinker.trained_submodule
    assert stage.name == "thinker" and stage.config_key == "thinker_config"
    assert stage.published_class == "Qwen3OmniMoeForConditionalGeneration"
    plan = thinker.plan
    assert plan.problems == []
    assert set(plan.apply_modules) == set(YAML_APPLY) | EXTRA_APPLY
    assert set(plan.recompute_modules) == set(YAML_RECOMPUTE) | EXTRA_RECOMPUTE
    assert plan.ep_modules == ["model.layers.{*}.mlp.experts"]
    assert plan.freeze_proposal == ["audio_tower", "visual"]  # the towers the example freezes
    assert thinker.media_tokens["image_token_id"] == 151655  # read off thinker_config, not the top level


def test_user_names_a_sub_model_the_class_lacks() -> None:
    with pytest.raises(ProbeError, match=r"^trained_submodule: .*'speaker'.*thinker, talker, code2wav"):
        probe(OMNI, with_processor=False, trained_submodule="speaker")


def test_embeddings_of_a_class_without_them_are_none() -> None:
    class NoEmbeddings:
        def get_input_embeddings(self) -> None:
            raise NotImplementedError("not auto-handled")

        def get_output_embeddings(self) -> None:
            raise AttributeError("lm_head")

    assert embeddings(NoEmbeddings(), "get_input_embeddings") is None
    assert embeddings(NoEmbeddings(), "get_output_embeddings") is None
    assert embeddings(object(), "get_input_embeddings") is None


PLUGIN = '''
from mindspeed_mm.fsdp.utils.register import model_register


@model_register.register("{model_type}")
class Thinker(Base):
    base_model_prefix = "thinker"

    @classmethod
    def _from_config(cls, config, **kwargs):
        if config.thinker_config is not None:
            config = config.thinker_config
        return super()._from_config(config, **kwargs)
'''


def _checkout(root: Path, source: str) -> Path:
    folder = root / "mindspeed_mm" / "fsdp" / "models" / "omni"
    folder.mkdir(parents=True)
    (folder / "modeling.py").write_text(source)
    return root


def test_plugin_stage_is_read_from_the_plugin_source(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "a", PLUGIN.format(model_type="qwen3_omni_moe"))
    stage = plugin_stage(checkout, "qwen3_omni_moe")
    assert stage == Stage("thinker", "thinker_config", stage.reason)
    assert "mindspeed_mm/fsdp/models/omni/modeling.py:12" in stage.reason
    assert plugin_stage(checkout, "qwen3_vl") is None  # another family's plugin says nothing
    whole = _checkout(tmp_path / "b", PLUGIN.format(model_type="qwen3_omni_moe").replace(
        "config = config.thinker_config", "pass"))
    assert plugin_stage(whole, "qwen3_omni_moe") is None  # a plugin that builds the published class itself


@pytest.mark.skipif(not os.environ.get("MINDSPEED_MM_HOME"), reason="tier 2: needs MINDSPEED_MM_HOME")
def test_checkout_plugin_picks_the_thinker_and_its_yaml_agrees(thinker: facts_mod.ModelFacts) -> None:
    import yaml

    home = Path(os.environ["MINDSPEED_MM_HOME"])
    facts = probe(OMNI, with_processor=False, checkout=home)
    assert facts.trained_submodule.name == "thinker"
    assert "mindspeed_mm/fsdp/models/qwen3omni/" in facts.trained_submodule.reason
    assert facts.plan == thinker.plan
    example = yaml.safe_load((home / EXAMPLE_YAML).read_text(encoding="utf-8"))
    assert example["parallel"]["fsdp_plan"]["apply_modules"] == YAML_APPLY
    assert example["features"]["recompute_plan"]["apply_modules"] == YAML_RECOMPUTE


def test_rendered_plugin_and_yaml_start_at_the_thinker(thinker: facts_mod.ModelFacts, tiny_models,
                                                      tmp_path: Path) -> None:
    """The thinker's facts (as a copy freezes them) render a plugin that builds the thinker from thinker_config,
    and a YAML whose plans are the thinker's patterns."""
    import ast
    import json

    import yaml

    from tests.copier_run import copy, git_init

    dest = git_init(tmp_path / "checkout")
    evidence = {"recommended": {"branch": "a", "reason": "test", "template": "qwen2vl", "collator_id": "qwen3vl"},
                "candidates": []}
    done = copy(dest, model_id="omni", model_path=tiny_models("qwen2_5_vl"), data_branch="a",
                model_facts=thinker.to_json(with_timings=False), data_evidence=json.dumps(evidence))
    assert done.returncode == 0, done.stderr[-3000:]
    source = (dest / "mindspeed_mm/fsdp/models/omni/modeling_omni.py").read_text()
    ast.parse(source)
    cls = "Qwen3OmniMoeThinkerForConditionalGeneration"
    assert f"class {cls}(transformers.{cls}):" in source
    assert 'super()._from_config(getattr(config, "thinker_config", config), **kwargs)' in source
    assert 'config = getattr(transformer_config, "thinker_config", transformer_config)' in source
    config = yaml.safe_load((dest / "examples/omni/omni_config.yaml").read_text())
    assert config["parallel"]["fsdp_plan"]["apply_modules"] == thinker.plan.apply_modules
    assert config["features"]["recompute_plan"]["apply_modules"] == thinker.plan.recompute_modules

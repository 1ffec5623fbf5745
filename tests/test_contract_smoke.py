"""Tests for the contract smoke: plan checks on toy modules (fast), real 2-rank FSDP2 runs (tiny model)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hooks.data.encoders import SampleError, to_chat
from hooks.smoke import contract as contract_smoke
from hooks.smoke import parallelize
from hooks.smoke.contract import run_contract_smoke
from hooks.smoke.parallelize import ContractError
from tests.model_facts import stand_in_facts
from tests.samples import QWEN2_5_VL_PLAN


def _toy() -> object:
    """A small module tree shaped like a VLM: model.{visual.blocks, language_model.layers}, lm_head."""
    from torch import nn

    root = nn.Module()
    root.model = nn.Module()
    root.model.visual = nn.Module()
    root.model.visual.blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
    root.model.language_model = nn.Module()
    root.model.language_model.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    root.lm_head = nn.Linear(2, 2)
    return root


def _names(root: object, modules: list) -> list[str]:
    by_id = {id(m): n for n, m in root.named_modules()}
    return [by_id[id(m)] for m in modules]


def test_post_order_puts_children_before_parents() -> None:
    names = [name for name, _ in parallelize._post_order(_toy())]
    assert names.index("model.visual.blocks.1") < names.index("model.visual.blocks") < names.index("model")
    assert names[-1] == ""


def test_fsdp_units_follow_post_order_not_plan_order() -> None:
    root = _toy()
    units = parallelize._fsdp_units(root, ["model.visual", "model.visual.blocks.{*}", "lm_head"])
    assert _names(root, units) == [
        "model.visual.blocks.0",
        "model.visual.blocks.1",
        "model.visual",
        "lm_head",
    ]


def test_fsdp_units_name_the_pattern_that_matches_nothing() -> None:
    with pytest.raises(ContractError, match=r"model\.vision_tower"):
        parallelize._fsdp_units(_toy(), ["model.visual", "model.vision_tower"])


def test_fsdp_units_reject_a_plan_that_wraps_only_the_root() -> None:
    with pytest.raises(ContractError, match="only the root"):
        parallelize._fsdp_units(_toy(), [])


def test_freeze_uses_mindspeed_matching() -> None:
    root = _toy()
    parallelize.apply_freeze(root, ["model.language_model.layers.{0-1}"])
    frozen = sorted({n.rsplit(".", 1)[0] for n, p in root.named_parameters() if not p.requires_grad})
    assert frozen == ["model.language_model.layers.0", "model.language_model.layers.1"]


def test_to_chat_turns_placeholders_into_image_items(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (8, 8), (1, 2, 3)).save(tmp_path / "a.png")
    record = {
        "messages": [
            {"role": "user", "content": "<image>What is it?"},
            {"role": "assistant", "content": "A dot."},
        ],
        "images": ["a.png"],
    }
    chat = to_chat(record, tmp_path)
    assert [item["type"] for item in chat[0]["content"]] == ["image", "text"]
    assert chat[0]["content"][0]["image"].size == (8, 8)
    assert chat[1]["content"] == [{"type": "text", "text": "A dot."}]


def test_to_chat_rejects_missing_images(tmp_path: Path) -> None:
    record = {"messages": [{"role": "user", "content": "<image><image>Hi"}], "images": []}
    with pytest.raises(SampleError, match="more <image> placeholders"):
        to_chat(record, tmp_path)


def test_missing_model_dir_fails_without_launching(tmp_path: Path) -> None:
    result = run_contract_smoke(tmp_path / "absent", QWEN2_5_VL_PLAN)
    assert not result.passed and "does not exist" in result.error


def test_timeout_stops_the_ranks(tmp_path: Path) -> None:
    result = run_contract_smoke(tmp_path, QWEN2_5_VL_PLAN, timeout_s=1)
    assert not result.passed
    assert "timed out after 1 s" in result.error
    assert result.wall_s < 30


# Real runs on a tiny Qwen2.5-VL: two gloo ranks, torch fully_shard.


@pytest.fixture(scope="module")
def tiny_qwen2_5_vl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tiny = pytest.importorskip("hooks.tiny")
    return tiny.build_tiny_model("qwen2_5_vl", tmp_path_factory.mktemp("tiny") / "qwen2_5_vl")


def test_qwen2_5_vl_plan_trains(tiny_qwen2_5_vl: Path) -> None:
    result = run_contract_smoke(tiny_qwen2_5_vl, QWEN2_5_VL_PLAN, steps=5)
    assert result.passed, result.summary() + "\n" + result.error + "\n" + result.log_tail
    assert result.mode == "contract"
    assert len(result.losses) == 5 and all(math.isfinite(x) and x > 0 for x in result.losses)
    assert len(result.grad_norms) == 5 and all(math.isfinite(x) and x > 0 for x in result.grad_norms)
    assert result.label_tokens and result.label_tokens > 0
    assert len(result.peak_rss_mb) == 2
    # issue 13: each rank's parameter, gradient and AdamW bytes after step 1 equal the memory plan's arithmetic
    assert any(n.startswith("verified: shard sizes equal the memory plan's arithmetic to the byte (rank 0 params ")
               for n in result.notes), result.notes
    forked = run_contract_smoke(tiny_qwen2_5_vl, QWEN2_5_VL_PLAN, steps=5, fork=True)
    assert forked.passed and forked.losses == result.losses, "forked ranks must train exactly like fresh ones"


RECOMPUTE = ["model.visual.blocks.{*}", "model.language_model.layers.{*}"]


def test_recompute_plan_trains_with_the_same_losses(tiny_qwen2_5_vl: Path) -> None:
    """Checkpointing the planned blocks must not change the math, only when activations are computed."""
    plain = run_contract_smoke(tiny_qwen2_5_vl, QWEN2_5_VL_PLAN, steps=3, fork=True)
    recomputed = run_contract_smoke(tiny_qwen2_5_vl, QWEN2_5_VL_PLAN, recompute=RECOMPUTE, steps=3, fork=True)
    assert recomputed.passed, recomputed.summary() + "\n" + recomputed.error + "\n" + recomputed.log_tail
    assert recomputed.losses == pytest.approx(plain.losses, rel=1e-5)


def test_recompute_target_without_past_key_values_fails(tiny_qwen2_5_vl: Path) -> None:
    """MindSpeed-MM's wrapper passes past_key_values=None: a PatchMerger.forward(x) cannot take it."""
    result = run_contract_smoke(tiny_qwen2_5_vl, QWEN2_5_VL_PLAN, recompute=["model.visual.merger"], steps=2,
                                fork=True)
    assert not result.passed and "past_key_values" in result.error


def test_unmatched_recompute_pattern_fails_with_its_name(tiny_qwen2_5_vl: Path) -> None:
    result = run_contract_smoke(tiny_qwen2_5_vl, QWEN2_5_VL_PLAN, recompute=["model.vision_tower.{*}"], steps=2,
                                fork=True)
    assert not result.passed and "recompute_plan pattern(s) ['model.vision_tower.{*}']" in result.error


def test_contract_plans_come_from_the_generated_yaml(tmp_path: Path) -> None:
    from hooks.smoke.run import contract_plans

    probe_plan = stand_in_facts(plan={"apply_modules": ["a"], "recompute_modules": ["b"], "ep_modules": ["e"]}).plan
    assert contract_plans(tmp_path / "absent.yaml", probe_plan) == {"apply_modules": ["a"], "freeze": [],
                                                                    "recompute": ["b"], "experts": ["e"]}
    yaml_file = tmp_path / "x_config.yaml"
    yaml_file.write_text("parallel:\n  fsdp_plan:\n    apply_modules: [u, v]\n  ep_plan:\n    apply_modules: [x]\n"
                         "model:\n  freeze: [model.visual]\n"
                         "features:\n  recompute: false\n  recompute_plan:\n    apply_modules: [w]\n")
    assert contract_plans(yaml_file, probe_plan) == {"apply_modules": ["u", "v"], "freeze": ["model.visual"],
                                                     "recompute": [], "experts": ["x"]}  # recompute off: not applied


def test_unmatched_pattern_fails_with_its_name(
    tiny_qwen2_5_vl: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tiny_qwen2_5_vl), "--apply-modules", ",".join([*QWEN2_5_VL_PLAN, "model.vision_tower.{*}"])]
    assert contract_smoke.main(argv) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "model.vision_tower.{*}" in out and "matched no module" in out


def test_freezing_everything_fails(tiny_qwen2_5_vl: Path) -> None:
    result = run_contract_smoke(tiny_qwen2_5_vl, QWEN2_5_VL_PLAN, freeze=["*"], steps=2)
    assert not result.passed
    assert "no trainable parameters" in result.reason


def test_json_data_with_frozen_vision_tower(tiny_qwen2_5_vl: Path, tmp_path: Path) -> None:
    tiny = pytest.importorskip("hooks.tiny")
    data_json = Path(tiny.build_demo_dataset(tmp_path / "data", samples=4))
    assert len(json.loads(data_json.read_text())) == 4
    result = run_contract_smoke(
        tiny_qwen2_5_vl, QWEN2_5_VL_PLAN, freeze=["model.visual"], data_json=data_json, steps=3
    )
    assert result.passed, result.summary() + "\n" + result.error + "\n" + result.log_tail

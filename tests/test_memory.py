"""The memory plan (``hooks.model.memory``): exact shard arithmetic, and the plans for published configs.

The shard arithmetic is checked twice: against ``torch.chunk`` (FSDP2's own ``_chunk_with_empty``)
for every small size, and against real ``fully_shard`` + AdamW on 2 gloo ranks for a tiny
Qwen2.5-VL, to the byte. The full-size configs are probed once each on the meta device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from hooks.model import cluster, memory, memory_config, memory_measure, memory_plan
from hooks.model.memory import GIB, Layout, ParamShape, rank_bytes
from hooks.model.memory_plan import LOADING_META, LOADING_PLAIN, plan_memory
from hooks.model.memory_text import markdown
from tests.conftest import FULL_CONFIGS, TEMPLATE_ROOT

QWEN25_7B, QWEN3_30B, QWEN3_235B = "Qwen2.5-VL-7B-Instruct", "Qwen3-VL-30B-A3B-Instruct", "Qwen3-VL-235B-A22B-Instruct"


@pytest.fixture(scope="module")
def shapes() -> dict[str, memory.ModelShapes]:
    """Each config probed on the meta device once for the whole module."""

    class Lazy(dict):
        def __missing__(self, name: str) -> memory.ModelShapes:
            self[name] = cluster.model_shapes(FULL_CONFIGS / name)
            return self[name]

    return Lazy()


# --------------------------------------------------------------------------- arithmetic

def test_shard_rows_follow_torch_chunk_including_empty_late_ranks() -> None:
    from torch.distributed.fsdp._fully_shard._fsdp_common import _chunk_with_empty

    for d0 in range(0, 14):
        for world in range(1, 7):
            chunks = _chunk_with_empty(torch.empty(d0, 3), world, dim=0)
            for rank in range(world):
                local, padded = memory.shard_numel((d0, 3), world, rank)
                assert local == chunks[rank].numel(), (d0, world, rank)
                assert padded == chunks[0].numel(), (d0, world, rank)
    assert [memory.shard_rows(5, 4, r) for r in range(4)] == [2, 2, 1, 0]


def test_freeze_uses_mindspeed_matching_on_every_enclosing_module() -> None:
    assert memory.is_frozen("model.visual.blocks.0.attn.qkv.weight", ["model.visual"])
    assert memory.is_frozen("model.visual.blocks.3.mlp.fc1.bias", ["model.visual.blocks.{*}"])
    assert memory.is_frozen("lm_head.weight", ["*"])
    assert not memory.is_frozen("model.visual_proj.weight", ["model.visual"])
    assert not memory.is_frozen("model.language_model.layers.0.mlp.up_proj.weight", [])


def test_per_layer_sizes_count_as_their_widest_layer(tiny_models) -> None:
    """Gemma 3n lists ``intermediate_size`` per layer; the activation estimate takes the widest."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_models("gemma3n"))
    widths = config.get_text_config().intermediate_size
    assert isinstance(widths, list)
    assert memory_config.dims_from_config(config).intermediate == max(widths)


def test_optimizer_states_of_a_container_are_read_member_by_member() -> None:
    """A test double of MindSpeed-MM's MultiOptimizer (its ``state`` is a ChainMap of the members' states):
    reading through the ChainMap would create empty entries in the first member and miss the second's."""
    from collections import ChainMap

    experts, dense = torch.nn.Linear(2, 2), torch.nn.Linear(3, 3)
    members = {"ep": torch.optim.AdamW(experts.parameters()), "non_ep": torch.optim.AdamW(dense.parameters())}
    for module, opt in ((experts, members["ep"]), (dense, members["non_ep"])):
        module(torch.ones(1, module.in_features)).sum().backward()
        opt.step()

    class MultiOptimizerDouble:
        optimizers_dict = members
        state = property(lambda self: ChainMap(*(o.state for o in members.values())))

    states = memory_measure.optimizer_states(MultiOptimizerDouble())
    assert len(states) == 4 and all(set(s) == {"step", "exp_avg", "exp_avg_sq"} for s in states)
    assert len(members["ep"].state) == 2  # nothing created in the first member


def test_expert_params_split_over_ep_then_fully_shard_dim1_over_efsdp() -> None:
    shapes = [ParamShape("layers.0.mlp.experts.gate_up_proj", (8, 4, 12), "layers.0", "layers.0.mlp.experts"),
              ParamShape("layers.0.mlp.experts.down_proj", (8, 6, 4), "layers.0", "layers.0.mlp.experts"),
              ParamShape("layers.0.attn.weight", (5, 4), "layers.0")]
    layout = Layout(world=4, ep=2)  # efsdp = 2
    for rank in range(4):
        per = memory.local_numels(shapes, layout, rank)
        assert per["layers.0.mlp.experts.gate_up_proj"] == 4 * 2 * 12  # 8/2 experts, dim 1 4/2
        assert per["layers.0.mlp.experts.down_proj"] == 4 * 3 * 4
        assert per["layers.0.attn.weight"] == [2, 2, 1, 0][rank] * 4  # plain FSDP over all 4 ranks
    units = memory.unit_gathers(shapes, layout)
    assert units["layers.0.mlp.experts"] == (4 * 4 * 12 + 4 * 6 * 4,) * 2  # the rank's 4 experts, gathered
    assert units["layers.0"] == (32, 32)  # padded: 2 rows x 4 ranks x 4 columns
    with pytest.raises(ValueError, match="dim 1"):
        memory.local_numels(shapes, Layout(world=8, ep=2), 0)  # efsdp 4 does not divide dim 1 = 6
    frozen = rank_bytes(shapes, layout, 0, freeze=["layers.0.attn"])
    assert frozen.trainable_tensors == 2 and frozen.params_local > frozen.grads_local


_WORKER = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    import torch, torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from hooks.compat import ensure_torchvision
    ensure_torchvision()
    from hooks.model.loading import load_config_and_class
    from hooks.model.matching import module_name_match
    from hooks.model.memory_measure import measure_rank
    from hooks.model.plan import derive_plan
    from hooks.model.facts import module_table

    model_dir, store, out, freeze = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), json.loads(sys.argv[4])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (world,))
    config, cls, _ = load_config_and_class(model_dir, trust_remote_code=False)
    model = cls._from_config(config).float()  # random weights: only the shapes matter
    plan = derive_plan(module_table(model))
    for name, module in model.named_modules():
        if any(module_name_match(p, name) for p in freeze):
            module.requires_grad_(False)
    cfg = {"mesh": mesh, "mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)}
    post = []
    def walk(mod, prefix):
        for n, child in mod.named_children():
            yield from walk(child, f"{prefix}.{n}" if prefix else n)
        yield prefix, mod
    for name, module in walk(model, ""):
        if name and any(module_name_match(p, name) for p in plan.apply_modules):
            fully_shard(module, **cfg)
    fully_shard(model, **cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=False)
    ids = torch.randint(0, 100, (1, 16))
    model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    opt.step()
    out.write_text(json.dumps(measure_rank(model, opt)))
    dist.destroy_process_group()
""")


@pytest.mark.parametrize("freeze", [[], ["model.visual"]], ids=["all-trainable", "vision-frozen"])
def test_rank_bytes_equal_real_fully_shard_on_two_gloo_ranks(tiny_models, tmp_path: Path, freeze: list[str]) -> None:
    """Per parameter and in total, what ``fully_shard`` + AdamW hold on each rank equals ``rank_bytes``.

    The tiny config gets odd sizes (vocabulary 3201, intermediate 129) so rank 1's shards are shorter
    than the padded ones. Text-only batches: with the vision tower trainable it gets no gradient (it
    never runs), so the all-trainable case compares its absent grads and states as frozen ones.
    """
    config = json.loads((tiny_models("qwen2_5_vl") / "config.json").read_text())
    config["text_config"].update(vocab_size=3201, intermediate_size=129)
    config["vision_config"]["intermediate_size"] = 65
    model_dir = tmp_path / "odd_qwen2_5_vl"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(config))
    env = {**os.environ, "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(TEMPLATE_ROOT),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    store = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(model_dir), str(store), str(tmp_path / f"r{r}.json"),
                               json.dumps(freeze)], env={**env, "RANK": str(r)}, cwd=TEMPLATE_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(2)]
    logs = [p.communicate(timeout=240)[0].decode()[-3000:] for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    shapes = cluster.model_shapes(model_dir)  # meta build: its shapes must be the real model's
    used_freeze = freeze or ["model.visual"]  # unused tower: no grads, as if frozen
    assert any(p.shape[0] % 2 for p in shapes.shapes)  # padding is exercised
    for rank in range(2):
        got = json.loads((tmp_path / f"r{rank}.json").read_text())
        assert got["per_param"] == memory.local_numels(shapes.shapes, Layout(2), rank)
        want = rank_bytes(shapes.shapes, Layout(2), rank, freeze=used_freeze)
        assert (got["params_local"], got["params_padded"]) == (want.params_local, want.params_padded)
        assert (got["grads_local"], got["grads_padded"]) == (want.grads_local, want.grads_padded)
        assert got["optimizer"] == want.optimizer
        assert rank == 0 or want.params_local < want.params_padded


def test_a_tiny_models_plan_prints_sizes_not_rows_of_zero_gib(tiny_models) -> None:
    """The demo's plan (a tiny model) reads its real sizes: a fixed GiB column printed "0.0 GiB" on every row."""
    plan = plan_memory(cluster.model_shapes(tiny_models("qwen2_5_vl")), devices_per_node=8, device_memory_gb=64)
    text = markdown(plan)
    assert "0.0 GiB" not in text and " 0 GiB" not in text and "| 0 B |" not in text
    assert "KiB" in text or "MiB" in text
    assert memory.size_text(116 * GIB) == "116.0 GiB" and memory.size_text(24 * 1024, 2) == "24.00 KiB"


# --------------------------------------------------------------------------- plans for published configs

def test_qwen2_5_vl_7b_fits_one_node_with_plain_loading(shapes) -> None:
    plan = plan_memory(shapes[QWEN25_7B], devices_per_node=8, device_memory_gb=64, nodes=1, cutoff_len=2048)
    assert plan.fits and plan.verdict == "fits on 1 node(s)"
    assert plan.loading == LOADING_PLAIN
    yaml = plan.yaml_defaults()
    assert yaml["parallel.fsdp_plan.cpu_offload"] is False and yaml["model.freeze"] == []
    assert yaml["parallel.fully_shard_parallel_size"] == "auto" and yaml["parallel.expert_parallel_size"] == 1
    assert yaml["training.init_model_with_meta_device"] is False and yaml["training.micro_batch_size"] == 1
    b = plan.breakdown
    # 8,292,166,656 parameters, fp32, over 8 ranks (+ padding): ~3.9 GiB each for params and grads, 2x for AdamW.
    assert abs(b.params - 4 * plan.total_params / 8) < 0.01 * GIB and b.grads == b.params
    assert 2 * b.params < b.optimizer < 2 * b.params + 0.01 * GIB
    assert plan.max_micro_batch >= 1 and b.device_total(1) <= plan.usable_bytes
    assert "| verdict | fits on 1 node(s) |" in markdown(plan)


def test_qwen3_vl_235b_does_not_fit_one_node_and_names_the_nodes_and_ep_that_do(shapes) -> None:
    model = shapes[QWEN3_235B]
    plan = plan_memory(model, devices_per_node=8, device_memory_gb=64, nodes=1)
    assert not plan.fits and plan.verdict.startswith("does not fit on 1 node(s); smallest that fits: 16 node(s)")
    s = plan.settings
    # One layer's full activations under recompute include the copies of all 128 experts' weights that the HF
    # training loop indexes out (~4.5 GiB): HSDP (shard within a node) no longer fits, sharding over all 128 does.
    assert (s.nodes, s.expert_parallel_size, s.cpu_offload, s.freeze) == (16, 2, False, ())
    assert 128 % s.expert_parallel_size == 0 and plan.world % s.expert_parallel_size == 0
    assert plan.breakdown.device_total(1) <= plan.usable_bytes
    assert plan.loading == LOADING_META
    yaml = plan.yaml_defaults()
    assert yaml["training.load_format"] == "hf" and yaml["training.load_strict"] is True
    assert yaml["training.no_load_optim"] is True and yaml["training.no_load_rng"] is True
    # 15 nodes (120 devices): no EP size divides both 128 experts and the world with dim 1 splitting evenly,
    # and plain FSDP gathers whole 128-expert layers: nothing fits there without offload.
    assert memory_plan._search(model, range(15, 16), 8, 2048, plan.usable_bytes, 1 << 50, intrusive=False) is None
    assert any("CPU offload" in n for n in plan.notes)  # the slow alternative on fewer nodes is named


# MindSpeed-MM's examples/qwen3vl/qwen3vl_30B_config_v1.yaml, launched by finetune_qwen3vl_30B_v1.sh on one
# node of 16 NPUs (64 GB each), cutoff_len 1024.
MINDSPEED_QWEN3VL_30B = {
    "parallel.fully_shard_parallel_size": "auto",
    "parallel.expert_parallel_size": 1,
    "parallel.fsdp_plan.cpu_offload": False,
    "model.freeze": ["model.visual"],
    "training.micro_batch_size": 1,
    "features.recompute": True,
    "training.init_model_with_meta_device": True,
}


def test_qwen3_vl_30b_lands_within_one_setting_of_mindspeed_mm_example(shapes) -> None:
    plan = plan_memory(shapes[QWEN3_30B], devices_per_node=16, device_memory_gb=64, nodes=1, cutoff_len=1024)
    ours = plan.yaml_defaults()
    differ = {k for k, v in MINDSPEED_QWEN3VL_30B.items() if ours[k] != v}
    # The one difference: MindSpeed-MM freezes model.visual by choice (language-side fine-tuning); the plan
    # freezes only when the model would not fit otherwise, and its notes say what freezing would save.
    assert differ == {"model.freeze"}
    assert any("MindSpeed-MM's own Qwen3-VL examples freeze model.visual" in n for n in plan.notes)
    assert plan.fits and plan.loading == LOADING_META  # 16 ranks x 116 GiB fp32 would not fit the host


def test_cli_prints_markdown_and_json(shapes, monkeypatch, capsys) -> None:
    monkeypatch.setattr(cluster, "model_shapes", lambda path, trust_remote_code=False, **_: shapes[QWEN25_7B])
    assert cluster.main([str(FULL_CONFIGS / QWEN25_7B)]) == 0
    assert "| settings | 1 node(s), fully_shard_parallel_size auto |" in capsys.readouterr().out
    assert cluster.main([str(FULL_CONFIGS / QWEN25_7B), "--nodes", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["yaml"]["parallel.fully_shard_parallel_size"] == 8  # HSDP: shard within a node
    assert data["world"] == 16 and data["fits"]


# --------------------------------------------------------------------------- world size 1 and margins (issue 23)

H200_MEASURED_GIB = 101.0  # max_memory_allocated, Qwen2.5-VL-7B shape, vision frozen, recompute, one H200


def test_one_device_runs_the_frameworks_ddp_path_and_matches_the_h200_measurement(shapes) -> None:
    """At ``fully_shard_parallel_size`` 1 without meta init MindSpeed-MM casts the model to bf16 and wraps it in
    DDP (``fully_shard_parallel_modules``); its clip upcasts every grad to fp32 at once: that is the peak."""
    model = shapes[QWEN25_7B]
    frozen = memory_plan.breakdown(model, memory_plan.Settings(1, 1, freeze=("model.visual",)), 1, 2048)
    assert frozen.mode == "ddp" and frozen.gather_peak == 0
    assert frozen.params == 2 * model.total_params and frozen.after_backward == frozen.grads  # fp32 = 2 x bf16
    assert abs(frozen.device_total(1) / GIB - H200_MEASURED_GIB) < 0.01 * H200_MEASURED_GIB
    assert memory_plan.breakdown(model, memory_plan.Settings(1, 1), 1, 2048, meta_init=True).mode == "fsdp2"
    plan = plan_memory(model, devices_per_node=1, device_memory_gb=141)
    assert plan.verdict == "fits on 1 node(s)" and plan.yaml_defaults()["model.freeze"] == []  # the tower trains
    assert "DDP at one shard rank" in markdown(plan)


def test_intrusive_settings_only_beyond_the_plans_measured_error(shapes) -> None:
    model = shapes[QWEN25_7B]
    whole = memory_plan.breakdown(model, memory_plan.Settings(1, 1), 1, 2048).device_total(1)
    # over by half the error
    just_over = whole / GIB / memory_plan.USABLE_DEVICE_SHARE / (1 + memory_plan.PLAN_ERROR / 2)
    close = plan_memory(model, devices_per_node=1, device_memory_gb=just_over)
    assert close.verdict.startswith("fits with little margin on 1 node(s)") and close.fits
    assert close.yaml_defaults()["model.freeze"] == [] and not close.settings.cpu_offload
    assert any("5 %" in n or "(5%" in n for n in close.notes)
    far = plan_memory(model, devices_per_node=1, device_memory_gb=whole / GIB / memory_plan.USABLE_DEVICE_SHARE / 1.06)
    assert far.verdict == "fits on 1 node(s)" and far.yaml_defaults()["model.freeze"] == ["model.visual"]

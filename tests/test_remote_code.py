"""Remote-code VLMs (config.json ``auto_map``): consent, probe, plan, shrink, contract smoke, plugin.

The model is ``remote_vlm`` from ``hooks.tiny.remote``: a folder with its own
``configuration_*.py`` / ``modeling_*.py`` / ``processing_*.py`` that transformers
only runs with ``trust_remote_code=True``. The generated plugin must subclass the
model's class from a verbatim copy of those files next to it (MindSpeed-MM's
kimik2_5 / kimi_k3 practice), never load code from the model path at import time.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.copier_run import commit_all, copier, copy, git_init, snapshot

ARCHS = ("remote_vlm",)
MODEL_ID = "remote_vlm"
PLUGIN = Path("mindspeed_mm/fsdp/models") / MODEL_ID
CODE_DIR = Path(__file__).resolve().parent.parent / "hooks" / "remote_vlm"
APPLY_MODULES = [
    "vision_tower.blocks.{*}", "vision_tower", "mm_projector", "language_model.embed_tokens",
    "language_model.layers.{*}", "language_model", "lm_head",
]


def _batch(model_dir: Path) -> dict[str, Any]:
    """One image + chat text through the model's own processor (remote code, with consent)."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir, trust_remote_code=True)
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What color is this?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Mostly red."}]},
    ]
    text = processor.apply_chat_template(messages, tokenize=False)
    return dict(processor(text=[text], images=[Image.new("RGB", (64, 64), (220, 30, 30))], return_tensors="pt"))


def _train_step(model_dir: Path) -> float:
    """Forward with labels and backward through AutoModelForImageTextToText; returns the loss."""
    import torch
    from transformers import AutoModelForImageTextToText

    batch = _batch(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, trust_remote_code=True, dtype=torch.float32)
    model.train()
    out = model(**batch, labels=batch["input_ids"])
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    return float(out.loss.detach())


# ---------------------------------------------------------------------------- the tiny model


@pytest.mark.parametrize("arch", ARCHS)
def test_folder_ships_its_code_and_trains(tiny_models, arch: str) -> None:
    from transformers import AutoConfig

    model_dir = tiny_models(arch)
    config = json.loads((model_dir / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_remote_vlm.RemoteVlmConfig",
        "AutoModelForImageTextToText": "modeling_remote_vlm.RemoteVlmForConditionalGeneration",
    }
    processor_config = json.loads((model_dir / "processor_config.json").read_text())
    assert processor_config["auto_map"] == {"AutoProcessor": "processing_remote_vlm.RemoteVlmProcessor"}
    for source in sorted(CODE_DIR.glob("*_remote_vlm.py")):
        assert (model_dir / source.name).read_bytes() == source.read_bytes(), source.name
    cfg = AutoConfig.from_pretrained(model_dir, trust_remote_code=True)
    batch = _batch(model_dir)
    assert set(batch) == {"input_ids", "attention_mask", "pixel_values"}
    assert int((batch["input_ids"] == cfg.image_token_id).sum()) == cfg.tokens_per_image == 4
    loss = _train_step(model_dir)
    assert math.isfinite(loss) and loss > 0


def test_remote_code_model_is_registered(tiny_models) -> None:
    from hooks.tiny import all_builders, build_tiny_model
    from hooks.tiny.remote import BUILDERS

    assert "remote_vlm" in all_builders() and set(BUILDERS) == {"remote_vlm", "remote_tiles", "custom_tiles"}
    model_dir = tiny_models("remote_vlm")
    assert build_tiny_model("remote_vlm", model_dir) == model_dir  # same arch and seed: reused as is


# ---------------------------------------------------------------------------- consent


def test_probe_refuses_without_consent(tiny_models) -> None:
    from hooks.model.loading import ProbeError
    from hooks.probe import probe

    with pytest.raises(ProbeError, match="trust_remote_code"):
        probe(tiny_models("remote_vlm"))


def test_copier_refuses_without_consent(tiny_models, tmp_path: Path) -> None:
    dest = git_init(tmp_path / "checkout")
    before = snapshot(dest)
    done = copy(dest, model_id=MODEL_ID, model_path=tiny_models("remote_vlm"))
    assert done.returncode != 0
    assert "trust_remote_code" in done.stderr and "auto_map" in done.stderr
    assert snapshot(dest) == before, "a refused copy must leave the checkout unchanged"


# ---------------------------------------------------------------------------- probe and plan


@pytest.fixture(scope="module")
def facts(tiny_models):
    from hooks.probe import probe

    return probe(tiny_models("remote_vlm"), trust_remote_code=True)


def test_probe_with_consent(facts) -> None:
    plan = facts.plan
    assert plan.problems == []
    assert facts.remote_code and facts.architecture == "RemoteVlmForConditionalGeneration"
    assert facts.class_module.endswith(".modeling_remote_vlm")
    assert plan.apply_modules == APPLY_MODULES
    assert plan.recompute_modules == ["vision_tower.blocks.{*}", "language_model.layers.{*}"]
    assert plan.ep_modules == [] and plan.vision_towers == ["vision_tower"]
    assert plan.language_tower == "language_model"
    assert facts.forward_accepts_kwargs and facts.returns_loss and not facts.tie_word_embeddings
    assert facts.no_split_modules == ["RemoteVlmDecoderLayer", "RemoteVlmVisionBlock"]
    assert facts.processor.class_name == "RemoteVlmProcessor"
    assert facts.processor.output_keys == ["attention_mask", "input_ids", "pixel_values"]


def test_plan_patterns_match_the_real_model(facts, tiny_models) -> None:
    from transformers import AutoModelForImageTextToText

    from hooks.model.matching import module_name_match

    model = AutoModelForImageTextToText.from_pretrained(tiny_models("remote_vlm"), trust_remote_code=True)
    names = [name for name, _ in model.named_modules()]
    plan = facts.plan
    for pattern in plan.apply_modules + plan.recompute_modules + plan.ep_modules:
        assert any(module_name_match(pattern, name) for name in names), pattern


# ---------------------------------------------------------------------------- shrink


def _check_shrunk(dest: Path) -> None:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(dest, trust_remote_code=True)
    text, vision = config.text_config, config.vision_config
    assert (text.hidden_size, text.num_hidden_layers, vision.hidden_size, vision.num_hidden_layers) == (64, 2, 32, 2)
    assert json.loads((dest / "config.json").read_text())["auto_map"]["AutoConfig"]
    loss = _train_step(dest)
    assert math.isfinite(loss) and loss > 0


def test_shrink_tiny(tiny_models, tmp_path: Path) -> None:
    from hooks.model.shrink import shrink_model_dir

    src = tiny_models("remote_vlm")
    dest = shrink_model_dir(src, tmp_path / "shrunk", trust_remote_code=True)
    for name in ("configuration_remote_vlm.py", "modeling_remote_vlm.py", "processing_remote_vlm.py"):
        assert (dest / name).read_bytes() == (src / name).read_bytes()
    _check_shrunk(dest)


def test_shrink_full_size_default_config(tiny_models, tmp_path: Path) -> None:
    """The code's default (full-size, ~1.5B) config next to the tiny tokenizer/processor/code files."""
    from hooks.model.shrink import copy_non_weight_files, shrink_model_dir
    from hooks.tiny.remote_vlm.configuration_remote_vlm import RemoteVlmConfig

    tiny = tiny_models("remote_vlm")
    tiny_config = json.loads((tiny / "config.json").read_text())
    src = tmp_path / "full"
    src.mkdir()
    copy_non_weight_files(tiny, src)
    ids = {key: tiny_config[key] for key in ("image_token_id", "eos_token_id", "pad_token_id")}
    full = RemoteVlmConfig(**ids).to_dict()
    full.update(auto_map=tiny_config["auto_map"], architectures=tiny_config["architectures"])
    assert full["text_config"]["num_hidden_layers"] == 24 and full["vision_config"]["hidden_size"] == 1024
    (src / "config.json").write_text(json.dumps(full, indent=2))
    _check_shrunk(shrink_model_dir(src, tmp_path / "shrunk", trust_remote_code=True))


# ---------------------------------------------------------------------------- contract smoke


@pytest.mark.parametrize("arch", ARCHS)
def test_contract_smoke(tiny_models, facts, arch: str) -> None:
    from hooks.smoke.contract import run_contract_smoke

    result = run_contract_smoke(tiny_models(arch), facts.plan.apply_modules, trust_remote_code=True)
    assert result.passed, result.summary() + "\n" + result.error + "\n" + result.log_tail
    assert len(result.losses) == 5 and all(math.isfinite(x) and x > 0 for x in result.losses)


# ---------------------------------------------------------------------------- generated plugin


@pytest.fixture(scope="module")
def rendered(tiny_models, tmp_path_factory: pytest.TempPathFactory, template_src: Path) -> Path:
    """copier copy with consent; the post-generation task runs (it copies the code), the smoke does not."""
    dest = git_init(tmp_path_factory.mktemp("remote-render") / "checkout")
    done = copy(dest, skip_tasks=False, template=template_src, model_id=MODEL_ID,
                model_path=tiny_models("remote_vlm"), trust_remote_code=True, data_branch="a", run_smoke=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return dest


def test_render_copies_the_model_code(rendered: Path, tiny_models) -> None:
    files = set(snapshot(rendered))
    assert {
        f"{PLUGIN}/modeling_{MODEL_ID}.py",
        f"{PLUGIN}/remote_code/configuration_remote_vlm.py",
        f"{PLUGIN}/remote_code/modeling_remote_vlm.py",
    } <= files
    copied = {name for name in files if name.startswith(f"{PLUGIN}/remote_code/")}
    assert len(copied) == 2, copied  # no __init__.py (import_plugin must not walk it), no processor code
    model_dir = tiny_models("remote_vlm")
    for name in ("configuration_remote_vlm.py", "modeling_remote_vlm.py"):
        assert (rendered / PLUGIN / "remote_code" / name).read_bytes() == (model_dir / name).read_bytes()
    answers = yaml.safe_load((rendered / f".copier-answers/{MODEL_ID}.yml").read_text())
    assert answers["trust_remote_code"] is True and answers["model_facts"]["remote_code"] is True
    cfg = yaml.safe_load((rendered / f"examples/{MODEL_ID}/{MODEL_ID}_config.yaml").read_text())
    assert cfg["model"]["trust_remote_code"] is True
    assert cfg["parallel"]["fsdp_plan"]["apply_modules"] == APPLY_MODULES


def test_plugin_has_no_import_time_loading(rendered: Path, tiny_models) -> None:
    source = (rendered / PLUGIN / f"modeling_{MODEL_ID}.py").read_text()
    assert "from .remote_code import modeling_remote_vlm as _upstream" in source
    assert "class RemoteVlmForConditionalGeneration(_upstream.RemoteVlmForConditionalGeneration):" in source
    assert f'@model_register.register("{MODEL_ID}")' in source
    for banned in (str(tiny_models("remote_vlm")), "get_class_from_dynamic_module", "from_pretrained", "sys.argv",
                   "torch.distributed", "_MODEL_PATH"):
        assert banned not in source, banned
    ruff = ruff_check_owned(rendered / "mindspeed_mm")
    assert ruff.returncode == 0, ruff.stdout


def ruff_check_owned(path: Path) -> subprocess.CompletedProcess[str]:
    """ruff as in tests/test_render.py, excluding the verbatim upstream files under remote_code/."""
    cmd = [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "E,F,W,I,B,UP",
           "--line-length", "120", "--config", "lint.isort.known-first-party=['mindspeed_mm']",
           "--extend-exclude", "remote_code", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_update_keeps_code_without_model_dir(tiny_models, tmp_path: Path, template_src: Path) -> None:
    """copier update re-renders from frozen facts; the copied code stays (the task runs on copy only)."""
    model = tmp_path / "model"
    shutil.copytree(tiny_models("remote_vlm"), model)
    dest = git_init(tmp_path / "checkout")
    done = copy(dest, skip_tasks=False, template=template_src, model_id=MODEL_ID, model_path=model,
                trust_remote_code=True, data_branch="a", run_smoke=False)
    assert done.returncode == 0, done.stderr[-3000:]
    commit_all(dest)
    before = snapshot(dest)
    shutil.rmtree(model)
    done = copier("update", "--trust", "--defaults", "--skip-tasks", "--quiet", "-a",
                  f".copier-answers/{MODEL_ID}.yml", cwd=dest)
    assert done.returncode == 0, done.stderr
    assert snapshot(dest) == before


IMPORT_CHECK = textwrap.dedent("""
    import sys
    import torch
    from mindspeed_mm.fsdp.utils.register import import_plugin, model_register

    import_plugin(["mindspeed_mm/fsdp/models/{model_id}"])
    cls = model_register.get("{model_id}")
    print("REGISTERED", cls.__module__, cls.__name__)
    dynamic = sorted(m for m in sys.modules if m.startswith("transformers_modules"))
    print("DYNAMIC", dynamic)
    from transformers import AutoConfig

    # What ModelHub's transformers path does, with and without trust_remote_code in the YAML.
    for trust in (False, True):
        config = AutoConfig.from_pretrained(sys.argv[1], trust_remote_code=trust, _attn_implementation="sdpa")
        model = cls.from_pretrained(sys.argv[1], config=config, dtype=torch.float32, low_cpu_mem_usage=True,
                                    device_map="cpu", trust_remote_code=trust)
        ids = torch.tensor([[1, 2, 3, 4]])
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids, use_cache=False).loss
        loss.backward()
        print("LOSS", trust, float(loss))
""")


@pytest.mark.tier2
def test_import_plugin_registers_the_id(rendered: Path, mm_home: Path, tiny_models, tmp_path: Path) -> None:
    """MindSpeed-MM's own import_plugin on a copy of its package with the generated plugin added."""
    from hooks.framework.environment import framework_env

    mindspeed_home = Path(os.environ["MINDSPEED_HOME"]) if os.environ.get("MINDSPEED_HOME") else None
    if mindspeed_home is None and not (mm_home / "mindspeed").is_dir():
        pytest.skip("MindSpeed core not found: set MINDSPEED_HOME")
    tree = tmp_path / "mm"
    shutil.copytree(mm_home / "mindspeed_mm", tree / "mindspeed_mm",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(rendered / PLUGIN, tree / PLUGIN)
    env = framework_env(tree, mindspeed_home, cpu_bridges=True)
    env.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="1")
    script = IMPORT_CHECK.replace("{model_id}", MODEL_ID)
    done = subprocess.run([sys.executable, "-c", script, str(tiny_models("remote_vlm"))], capture_output=True,
                          text=True, cwd=tree, env=env, check=False, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"REGISTERED mindspeed_mm.fsdp.models.{MODEL_ID}.modeling_{MODEL_ID} RemoteVlmForConditionalGeneration" \
        in done.stdout
    assert "DYNAMIC []" in done.stdout, "importing the plugin must not load code from the model folder"
    losses = [line for line in done.stdout.splitlines() if line.startswith("LOSS")]
    assert len(losses) == 2 and all(math.isfinite(float(line.split()[-1])) for line in losses)

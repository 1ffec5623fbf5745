"""Rendering through copier's real CLI: files, determinism, static checks, updates and bad input."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hooks.render.files import md_code, pyrepr, width
from tests.copier_run import commit_all, copier, copy, git_init, snapshot

GENERATED = {
    ".copier-answers/qwen2_5_vl.yml",
    "examples/qwen2_5_vl/qwen2_5_vl_config.yaml",
    "examples/qwen2_5_vl/finetune_qwen2_5_vl.sh",
    "examples/qwen2_5_vl/MIGRATION.md",
    "mindspeed_mm/fsdp/models/qwen2_5_vl/modeling_qwen2_5_vl.py",
    "tests/st/shell_scripts/finetune_qwen2_5_vl.sh",  # the run config and baseline come from the smoke (tasks)
}


@pytest.fixture(scope="module")
def rendered(tiny_models, tmp_path_factory, template_src) -> Path:
    dest = git_init(tmp_path_factory.mktemp("render") / "checkout")
    done = copy(dest, model_id="qwen2_5_vl", model_path=tiny_models("qwen2_5_vl"), template=template_src)
    assert done.returncode == 0, done.stderr
    return dest


def test_branch_a_files(rendered: Path) -> None:
    assert set(snapshot(rendered)) == GENERATED


def test_the_system_test_script_has_upstreams_shape(rendered: Path) -> None:
    """Issue 35: MindSpeed-MM's tests/st/shell_scripts shape (set -e, CANN env, torchrun on the trainer with the
    case's run config, tee'd log, the step-time lines), valid bash."""
    script = rendered / "tests/st/shell_scripts/finetune_qwen2_5_vl.sh"
    text = script.read_text()
    for piece in ("set -e\n", "BASEPATH=$(cd `dirname $0`; cd ../../../; pwd)", "export NON_MEGATRON=true",
                  "    source /usr/local/Ascend/ascend-toolkit/set_env.sh",
                  "torchrun $DISTRIBUTED_ARGS $BASEPATH/mindspeed_mm/fsdp/train/trainer.py \\\n"
                  "    $BASEPATH/tests/st/run_configs/finetune_qwen2_5_vl/qwen2_5_vl_config.yaml \\\n"
                  "    2>&1 | tee logs/train_${logfile}.log",
                  'echo "Elapsed Time Per iteration (ms): $STEP_TIME"'):
        assert piece in text, piece
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0


def test_yaml_carries_probe_plan(rendered: Path) -> None:
    cfg = yaml.safe_load((rendered / "examples/qwen2_5_vl/qwen2_5_vl_config.yaml").read_text())
    assert cfg["parallel"]["fsdp_plan"]["apply_modules"] == [
        "model.visual.blocks.{*}", "model.visual.merger", "model.visual", "model.language_model.embed_tokens",
        "model.language_model.layers.{*}", "model.language_model", "lm_head",
    ]
    assert cfg["features"]["recompute"] is True
    recompute = cfg["features"]["recompute_plan"]["apply_modules"]
    assert recompute == ["model.visual.blocks.{*}", "model.language_model.layers.{*}"]
    assert cfg["model"]["model_id"] == "qwen2_5_vl" and cfg["model"]["freeze"] == []
    collate = cfg["data"]["dataloader_param"]["collate_param"]
    assert collate == {"collator_id": "qwen3vl", "ignore_pad_token_for_loss": True}
    assert cfg["data"]["dataset_param"]["basic_parameters"]["template"] == "qwen2vl"
    plugins = cfg["training"]["plugin"]
    assert plugins == ["mindspeed_mm/fsdp/models/qwen2_5_vl", "mindspeed_mm/fsdp/data/datasets/huggingface"]
    assert "save" not in cfg["training"]
    # a tiny model: the memory plan builds it with from_pretrained on every rank, nothing through training.load
    assert cfg["training"]["init_model_with_meta_device"] is False and "load" not in cfg["training"]
    assert cfg["parallel"]["fully_shard_parallel_size"] == "auto" and cfg["training"]["micro_batch_size"] == 1
    _model_path_written_once(rendered / "examples/qwen2_5_vl/qwen2_5_vl_config.yaml", cfg)


def _model_path_written_once(path: Path, cfg: dict) -> None:
    """One anchor holds the model folder; every key that names it resolves to that one path."""
    model_path = cfg["model"]["model_name_or_path"]
    assert cfg["data"]["dataset_param"]["preprocess_parameters"]["model_name_or_path"] == model_path
    assert cfg["training"].get("load", model_path) == model_path
    assert path.read_text().count(model_path) == 1


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells (``\\|`` stays inside its cell, as GFM reads it)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def _report_is_readable(report: str) -> None:
    """No JSON escapes, every table row as wide as its header, no placeholder rows."""
    assert "\\u00" not in report
    width = None
    for line in report.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        cells = _cells(line)
        width = width or len(cells)
        assert len(cells) == width, line
        assert cells[-1] not in ("-", ""), line


def test_report_is_readable(rendered: Path) -> None:
    _report_is_readable((rendered / "examples/qwen2_5_vl/MIGRATION.md").read_text())


def test_long_literals_stay_under_ruffs_width() -> None:
    """A long string literal is cut into pieces that fit 120 columns as ruff counts them (a CJK character is two),
    and the pieces join back to the string (InternVL's Chinese system message in a generated dataset plugin)."""
    value = ("你是由上海人工智能实验室联合商汤科技开发的书生多模态大模型，"
             "英文名叫InternVL, 是一个有用无害的人工智能助手。") * 3
    literal = pyrepr(value, 4, 26)
    lines = f"    conv.system_message = {literal}".splitlines()
    assert len(lines) > 2 and max(width(line) for line in lines) <= 120
    assert ast.literal_eval(literal) == value


@pytest.mark.parametrize("value", ["<|im_start|>user\n{{content}}<|im_end|>\n", "", "a`b``c", "`x", "<start_of_turn>"])
def test_md_code_round_trips(value: str) -> None:
    """A table cell's code span reads back as the string (GFM: ``\\|`` is ``|``, the fence the longest run + 1)."""
    span = md_code(value, cell=True)
    assert len(_cells(f"| {span} |")) == 1 and "\n" not in span
    fence = re.match("`+", span).group()
    assert ast.literal_eval(span[len(fence):-len(fence)].strip().replace("\\|", "|")) == value


def test_answers_freeze_model_facts(rendered: Path) -> None:
    answers = yaml.safe_load((rendered / ".copier-answers/qwen2_5_vl.yml").read_text())
    assert answers["model_facts"]["architecture"] == "Qwen2_5_VLForConditionalGeneration"
    assert answers["model_facts"]["plan"]["problems"] == []
    assert answers["data_branch"] == "a"


def test_static_checks(rendered: Path) -> None:
    script = rendered / "examples/qwen2_5_vl/finetune_qwen2_5_vl.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    ruff = ruff_check(rendered / "mindspeed_mm")
    assert ruff.returncode == 0, ruff.stdout
    source = (rendered / "mindspeed_mm/fsdp/models/qwen2_5_vl/modeling_qwen2_5_vl.py").read_text()
    assert "sys.argv" not in source and "torch.distributed" not in source
    assert '@model_register.register("qwen2_5_vl")' in source


def test_render_is_deterministic(tiny_models, tmp_path: Path, rendered: Path, template_src: Path) -> None:
    again = git_init(tmp_path / "again")
    done = copy(again, model_id="qwen2_5_vl", model_path=tiny_models("qwen2_5_vl"), template=template_src)
    assert done.returncode == 0
    assert snapshot(again) == snapshot(rendered)


@pytest.mark.parametrize("branch", ["b", "c"])
def test_other_branches_render(tiny_models, tmp_path: Path, branch: str) -> None:
    dest = git_init(tmp_path / branch)
    done = copy(dest, model_id="tiny_vl", model_path=tiny_models("qwen2_5_vl"), data_branch=branch)
    assert done.returncode == 0, done.stderr
    files = set(snapshot(dest))
    assert "mindspeed_mm/fsdp/models/tiny_vl/modeling_tiny_vl.py" in files
    if branch == "c":
        assert "mindspeed_mm/fsdp/data/datasets/tiny_vl/dataset_tiny_vl.py" in files
    config = dest / "examples/tiny_vl/tiny_vl_config.yaml"
    cfg = yaml.safe_load(config.read_text())
    _model_path_written_once(config, cfg)
    dataset = cfg["data"]["dataset_param"]
    if branch == "c":  # only what the dataset plugin and the trainer read: no huggingface-path keys
        assert dataset["dataset_type"] == "tiny_vl" and "data_fields" in dataset
        assert "attr" not in dataset and "template" not in dataset["basic_parameters"]
        assert "collate_param" not in cfg["data"]["dataloader_param"]  # the plugin's collate_fn batches
        assert "huggingface" not in config.read_text()
    report = (dest / "examples/tiny_vl/MIGRATION.md").read_text()
    _report_is_readable(report)
    if branch == "b":  # the chat-template table shows each slot as a literal that reads back as the slot
        answers = yaml.safe_load((dest / ".copier-answers/tiny_vl.yml").read_text())
        chat = answers["model_facts"]["processor"]["data_format"]["chat"]
        row = next(line for line in report.splitlines() if line.startswith("| end of turn |"))
        span = _cells(row)[1]
        assert "<" in span and ast.literal_eval(span.strip("`").replace("\\|", "|")) == chat["end_of_turn"]
    ruff = ruff_check(dest / "mindspeed_mm")
    assert ruff.returncode == 0, ruff.stdout


def test_update_needs_no_model_dir(tiny_models, tmp_path: Path, template_src: Path) -> None:
    """Derived values are frozen in the answers file: re-rendering works after the model is gone."""
    model = tmp_path / "model"
    shutil.copytree(tiny_models("qwen2_5_vl"), model)
    dest = git_init(tmp_path / "checkout")
    assert copy(dest, model_id="qwen2_5_vl", model_path=model, template=template_src).returncode == 0
    commit_all(dest)
    before = snapshot(dest)
    shutil.rmtree(model)
    done = copier("update", "--trust", "--defaults", "--skip-tasks", "--quiet", "-a", ".copier-answers/qwen2_5_vl.yml",
                  cwd=dest)
    assert done.returncode == 0, done.stderr
    assert snapshot(dest) == before


def ruff_check(*paths: Path) -> subprocess.CompletedProcess[str]:
    """ruff as run in a MindSpeed-MM checkout (mindspeed_mm is first-party there)."""
    cmd = [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "E,F,W,I,B,UP",
           "--line-length", "120", "--config", "lint.isort.known-first-party=['mindspeed_mm']", *map(str, paths)]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _bad_copy(dest: Path, **answers: object) -> str:
    before = snapshot(dest)
    done = copy(dest, **answers)
    assert done.returncode != 0
    assert snapshot(dest) == before, "a rejected answer must leave the checkout unchanged"
    return done.stderr


def test_bad_model_dir(tmp_path: Path) -> None:
    dest = git_init(tmp_path / "c")
    err = _bad_copy(dest, model_id="m", model_path=tmp_path / "missing")
    assert "model_path" in err and "does not exist" in err
    (tmp_path / "noconfig").mkdir()
    err = _bad_copy(dest, model_id="m", model_path=tmp_path / "noconfig")
    assert "model_path" in err and "config.json" in err


def test_auto_map_needs_consent(tmp_path: Path) -> None:
    model = tmp_path / "remote"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "x", "auto_map": {"AutoConfig": "c.C"}}))
    err = _bad_copy(git_init(tmp_path / "c"), model_id="m", model_path=model)
    assert "trust_remote_code" in err and "auto_map" in err


def test_model_id_must_be_identifier(tiny_models, tmp_path: Path) -> None:
    err = _bad_copy(git_init(tmp_path / "c"), model_id="qwen-2.5", model_path=tiny_models("qwen2_5_vl"))
    assert "model_id" in err and "identifier" in err


def test_model_id_already_registered(tiny_models, tmp_path: Path) -> None:
    dest = git_init(tmp_path / "c")
    plugin = dest / "mindspeed_mm/fsdp/models/qwen3vl"
    plugin.mkdir(parents=True)
    (plugin / "modeling.py").write_text('@model_register.register("qwen3_vl_moe")\nclass X: ...\n')
    err = _bad_copy(dest, model_id="qwen3_vl_moe", model_path=tiny_models("qwen2_5_vl"))
    assert "model_id" in err and "already registered" in err and "qwen3vl/modeling.py" in err



def test_the_evidence_renders_the_data_plugin_as_the_copy_does(tiny_models, tmp_path: Path) -> None:
    """The copy-time evidence tries branch b's data plugin before copier renders anything, through
    ``hooks.render.files.template_environment`` (made as copier makes its own, configured by the same function as
    copier's extension): its files are byte for byte what the copy writes for the same answers."""
    from hooks.render.files import render_data_plugin

    dest = git_init(tmp_path / "copy")
    done = copy(dest, model_id="tiny_vl", model_path=tiny_models("gemma3"), data_branch="b")
    assert done.returncode == 0, done.stderr
    answers = yaml.safe_load((dest / ".copier-answers/tiny_vl.yml").read_text())
    package = render_data_plugin(tmp_path / "evidence", "tiny_vl", answers["model_facts"])
    copied = dest / "mindspeed_mm/fsdp/models/tiny_vl"
    for name in ("data_plugin_tiny_vl.py", "processor_media.py"):
        assert (package / name).read_bytes() == (copied / name).read_bytes(), name

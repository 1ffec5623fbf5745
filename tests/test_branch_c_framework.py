"""Tier 2, branch C: a dataset plugin over the user's records, trained through the real trainer.

- families without a chat template get branch C by default and train on their processor's own
  convention (PaliGemma's ``suffix=``; Chameleon and GOT-OCR2, whose processor writes its own
  OCR query, with --full-matrix);
- JSONL records that are not ShareGPT-shaped (``{"img", "q", "a"}`` per line, and a multi-turn
  ``turns`` list) train Qwen2.5-VL and Gemma 3 through ``data_fields``; the smoke reads the user's
  first records;
- a mapping that names a key the records do not have stops the copy at that question.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from hooks.scaffold import StPaths
from tests.copier_run import changed_paths as _changed
from tests.copier_run import copy, mm_checkout, snapshot
from tests.st_tools import comparator, run_script, st_tools

pytestmark = pytest.mark.tier2
FULL = pytest.mark.full_matrix
COLORS = [("red", (220, 30, 30)), ("green", (30, 200, 40)), ("blue", (30, 40, 220)), ("yellow", (230, 220, 30))]


@pytest.fixture(scope="module")
def checkout(mm_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mm_checkout(mm_home, tmp_path_factory.mktemp("mm"))


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``train.jsonl`` ({"img", "q", "a"} per line) and ``turns.jsonl`` (a multi-turn ``turns`` list), 8 each."""
    from PIL import Image

    root = tmp_path_factory.mktemp("records")
    with (root / "train.jsonl").open("w") as flat, (root / "turns.jsonl").open("w") as turns:
        for i in range(8):
            name, rgb = COLORS[i % 4]
            Image.new("RGB", (64 + 16 * (i % 3), 64), rgb).save(root / f"img{i}.png")
            flat.write(json.dumps({"img": f"img{i}.png", "q": "What color is this?", "a": f"It is {name}."}) + "\n")
            turns.write(json.dumps({"img": f"img{i}.png", "turns": [
                {"role": "user", "content": "<image>What color is this?"}, {"role": "assistant", "content": f"{name}."},
                {"role": "user", "content": "Are you sure?"}, {"role": "assistant", "content": "Yes."}]}) + "\n")
    return root


def _passes(done, checkout: Path, model_id: str) -> None:
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    # the report's first line (a remote-code model's own files were copied by the task before it)
    assert any(line.startswith("msmm-migrate: ") and "data branch c" in line for line in done.stdout.splitlines())
    summary = re.search(r"smoke\[framework\] PASS: (\d+)/(\d+) iterations", done.stdout)
    assert summary and int(summary.group(1)) >= 5, done.stdout[-2000:]
    assert "verified: loss equivalence: step-1 loss" in done.stdout, done.stdout[-3000:]  # the model's own objective
    assert "verified: image reached forward (" in done.stdout, done.stdout[-3000:]  # hooks.smoke.media_proof
    plugin = checkout / "mindspeed_mm" / "fsdp" / "data" / "datasets" / model_id
    assert (plugin / f"dataset_{model_id}.py").is_file() and (plugin / "processor_dataset.py").is_file()
    assert "## Dataset plugin" in (checkout / "examples" / model_id / "MIGRATION.md").read_text()
    assert "**PASS**" in (checkout / "examples" / model_id / "REPORT.md").read_text()


@pytest.mark.parametrize("arch", ["paligemma", pytest.param("chameleon", marks=FULL),
                                  pytest.param("got_ocr2", marks=FULL), pytest.param("fuyu", marks=FULL),
                                  pytest.param("kosmos2", marks=FULL)])
def test_no_chat_template_defaults_to_branch_c_and_trains(arch: str, checkout: Path, tiny_models,
                                                          template_src: Path) -> None:
    model_id = f"{arch}_c"
    before = _changed(checkout)
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch))
    _passes(done, checkout, model_id)
    allowed = (f"mindspeed_mm/fsdp/models/{model_id}/", f"examples/{model_id}/",
               f"mindspeed_mm/fsdp/data/datasets/{model_id}/", f".copier-answers/{model_id}.yml", "tests/st/")
    new = _changed(checkout) - before
    assert all(path.startswith(allowed) for path in new)
    assert {str(p) for p in StPaths(model_id).triple()} <= new  # issue 35: the system test, recorded by the smoke


def test_the_branch_c_system_test_passes_the_frameworks_comparator(checkout: Path, tiny_models, template_src: Path,
                                                                  tmp_path: Path) -> None:
    """Issue 35, branch c: the script re-runs the recorded config and MindSpeed-MM's test_ci_st.py passes it (the copy
    is the test above's when it ran)."""
    tools = st_tools()
    model_id = "paligemma_c"
    if not (checkout / ".copier-answers" / f"{model_id}.yml").is_file():
        done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id,
                    model_path=tiny_models("paligemma"))
        assert done.returncode == 0, done.stdout[-3000:]
    ran = run_script(checkout, model_id, tmp_path / "pass.log")
    assert ran.returncode == 0, ran.stdout[-3000:]
    passed = comparator(tools, checkout, model_id, tmp_path / "pass.log", only_loss=True)
    assert passed.returncode == 0 and "1 passed" in passed.stdout, passed.stdout[-3000:]


@pytest.mark.parametrize(("arch", "data", "fields"), [
    pytest.param("qwen2_5_vl", "train.jsonl", {"images": "img", "prompt": "q", "response": "a"}, marks=FULL),
    pytest.param("gemma3", "turns.jsonl", {"images": "img", "conversations": "turns"}, marks=FULL),
    ("remote_tiles", "turns.jsonl", {"images": "img", "conversations": "turns"}),
])
def test_jsonl_records_through_data_fields_train(arch: str, data: str, fields: dict, checkout: Path, tiny_models,
                                                 template_src: Path, records: Path) -> None:
    model_id = f"{arch}_jsonl"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch),
                data_branch="c", data_json=records / data, data_fields=json.dumps(fields),
                trust_remote_code=arch.startswith("remote_"))
    _passes(done, checkout, model_id)
    assert "data parity: MATCH (the dataset plugin" in done.stdout, done.stdout[-3000:]
    config = yaml.safe_load((checkout / "examples" / model_id / f"{model_id}_config.yaml").read_text())
    assert config["data"]["dataset_param"]["data_fields"] == fields
    smoke = yaml.safe_load((Path(os.environ["MSMM_CACHE"]) / "smoke" / model_id / "smoke_config.yaml").read_text())
    assert smoke["data"]["dataset_param"]["basic_parameters"]["dataset"] == str(records / data)  # the user's records


def test_remote_code_without_a_processor_trains_on_its_own_data_code(checkout: Path, tiny_models,
                                                                    template_src: Path) -> None:
    """InternVL-Chat-style remote code (no processor class): branch c recommended and generated, samples built by
    the model's own load_image and conversation, parity against its own chat(), the context-token attribute set
    by the model plugin and the per-tile flags fed, then the smoke."""
    model_id = "tiles"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id,
                model_path=tiny_models("remote_tiles"), trust_remote_code=True)
    _passes(done, checkout, model_id)
    assert "recommended data branch c: " in done.stdout and "no processor class" in done.stdout
    assert "data parity: MATCH (the dataset plugin (the model's own data code and chat()))" in done.stdout
    plugin = checkout / "mindspeed_mm" / "fsdp" / "models" / model_id
    assert "self.img_context_token_id = " in (plugin / f"modeling_{model_id}.py").read_text()
    assert {"conversation.py", "modeling_remote_tiles.py"} <= {p.name for p in (plugin / "remote_code").iterdir()}
    migration = (checkout / "examples" / model_id / "MIGRATION.md").read_text()
    assert "convention **code**" in migration and "`img_context_token_id = " in migration
    report = (checkout / "examples" / model_id / "REPORT.md").read_text()  # the parity check's details
    assert "same ids as the model's own chat() up to the answer" in report and "same image_flags" in report
    assert "the model plugin sets {'img_context_token_id'" in report


def test_a_config_autoconfig_cannot_load_trains_on_the_custom_model_path(checkout: Path, tiny_models,
                                                                         template_src: Path) -> None:
    """custom_tiles (no model_type, no auto_map): the plugin implements BaseModel and the trainer builds it on
    its custom-model path; the rest as remote_tiles."""
    model_id = "custom"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id,
                model_path=tiny_models("custom_tiles"), trust_remote_code=True)
    _passes(done, checkout, model_id)
    assert "data parity: MATCH" in done.stdout
    assert "BaseModel" in (checkout / "mindspeed_mm" / "fsdp" / "models" / model_id / f"modeling_{model_id}.py"
                           ).read_text()
    log = (Path(os.environ["MSMM_CACHE"]) / "smoke" / model_id / "smoke_trainer.log").read_text()
    assert "Building custom model" in log
    assert "custom-model path" in (checkout / "examples" / model_id / "MIGRATION.md").read_text()


@pytest.mark.parametrize("arch", ["glm4v_moe", pytest.param("llava", marks=FULL), pytest.param("mllama", marks=FULL)])
def test_chat_families_on_branch_c_match_their_own_format(arch: str, checkout: Path, tiny_models,
                                                           template_src: Path) -> None:
    """Branch c by choice on chat families: whole-batch parity against the model's own template and processor
    (GLM-4.5V's block before past answers stays untrained; its assistant text is a string), then the smoke."""
    model_id = f"{arch}_cc"
    done = copy(checkout, skip_tasks=False, template=template_src, model_id=model_id, model_path=tiny_models(arch),
                data_branch="c")
    _passes(done, checkout, model_id)
    assert "data parity: MATCH (the dataset plugin" in done.stdout, done.stdout[-3000:]


def test_a_mapping_the_records_do_not_fit_stops_the_copy(checkout: Path, tiny_models, template_src: Path,
                                                         records: Path) -> None:
    before = snapshot(checkout)
    done = copy(checkout, skip_tasks=False, template=template_src, model_id="bad_fields",
                model_path=tiny_models("qwen2_5_vl"), data_branch="c", data_json=records / "train.jsonl",
                data_fields=json.dumps({"images": "img", "prompt": "question", "response": "a"}))
    assert done.returncode != 0
    assert "data_fields:" in done.stderr and "'question'" in done.stderr
    assert snapshot(checkout) == before

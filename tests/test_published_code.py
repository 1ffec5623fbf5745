"""Remote code as it is really published (issue 11): the probe survives it, or says in one line why not.

``remote_tiles`` (``hooks/tiny/remote_vlm/modeling_remote_tiles.py``) carries each failure class:
``.item()`` in ``__init__`` (meta-hostile), a print on import, a ``torch.dtype`` in ``to_dict()``,
no SDPA/flash declaration while it picks SDPA for its language model itself, no processor class.
Variants of its folder whose code raises or hangs on import check the copy's error path: one line
naming the folder and the fix, the checkout unchanged, no process left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hooks.model.facts import ModelFacts
from tests.copier_run import copy, git_init, snapshot

ARCH = "remote_tiles"


@pytest.fixture(scope="module")
def facts(tiny_models) -> dict:
    from hooks.probe import probe

    return json.loads(probe(tiny_models(ARCH), trust_remote_code=True).to_json(with_timings=False))


def test_meta_hostile_init_builds_under_init_empty_weights(facts) -> None:
    """The meta build fails on ``.item()``; MindSpeed-MM's own way (init_empty_weights) is used next, and said."""
    assert facts["build"]["how"] == "accelerate.init_empty_weights()"
    assert "Tensor.item() cannot be called on meta tensors" in facts["build"]["failures"][0]
    assert "vision_tower.blocks.{*}" in facts["plan"]["apply_modules"]
    assert facts["num_parameters"] > 0


def test_attention_from_declarations_and_the_models_own_choice_reported(facts) -> None:
    """No ``_supports_sdpa``: the YAML gets eager (with its reason); the LM's own SDPA switch is reported."""
    from hooks.framework import checkout
    from hooks.render.files import render_template_file

    assert facts["attention"] == {"flash_attention_2": False, "sdpa": False}
    assert facts["build"]["attention_set_by_model"] == {"text_config": "sdpa"}
    config = render_template_file("partials/config.yaml.jinja", {
        "model_id": "tiles", "model_facts": facts, "data_branch": "a", "chat_template": "qwen2vl",
        "collator_id": "qwen3vl", "model_path": "/m", "trust_remote_code": True, "data_json": "", "media_root": "",
        "framework": checkout.facts("/nonexistent")})  # outside a checkout: the pinned framework's facts
    assert "attn_implementation: eager  # a sub-model declares neither" in config
    from hooks.model.facts_text import findings_text

    text = findings_text(ModelFacts.from_dict(facts), "/m", width=200)
    assert "sets text_config to 'sdpa' itself" in text and "accelerate.init_empty_weights()" in text


def test_missing_processor_class_recommends_branch_c(facts) -> None:
    assert facts["processor"]["missing"] and "no processor class" in facts["processor"]["error"]
    from hooks.data.candidates import recommend

    choice = recommend(ModelFacts.from_dict(facts), None)  # the data stage's choice, from the facts (no checkout here)
    assert choice.branch == "c" and "no processor class" in choice.reason


def test_import_time_print_does_not_reach_the_facts(tiny_models, tmp_path: Path) -> None:
    """The model prints on import; the facts travel in a file and stdout stays empty."""
    out = tmp_path / "facts.json"
    done = subprocess.run([sys.executable, "-m", "hooks.probe", str(tiny_models(ARCH)), "--out", str(out),
                           "--trust-remote-code", "--no-processor"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == ""
    assert json.loads(out.read_text())["architecture"] == "RemoteTilesForCausalLM"


def test_shrink_takes_a_config_with_dtype_objects(tiny_models) -> None:
    import torch
    from transformers import AutoConfig

    from hooks.model.shrink import shrink_config_dict
    from hooks.model.shrink_rules import Dims

    config = AutoConfig.from_pretrained(tiny_models(ARCH), trust_remote_code=True)
    assert config.to_dict()["vision_dtype"] is torch.float32  # what published code leaves there
    assert shrink_config_dict(config.to_dict(), Dims())["vision_dtype"] == "float32"


def _variant(tiny_models, tmp_path: Path, line: str) -> Path:
    """A copy of the fixture whose modeling file runs ``line`` on import."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_models(ARCH), folder)
    code = folder / "modeling_remote_tiles.py"
    code.write_text(code.read_text().replace('print("RemoteTiles: loading custom code")', line, 1))
    return folder


def test_code_that_raises_on_import_is_one_line(tiny_models, tmp_path: Path) -> None:
    folder = _variant(tiny_models, tmp_path, 'raise ImportError("needs flash_attn")')
    done = subprocess.run([sys.executable, "-m", "hooks.probe", str(folder), "--out", str(tmp_path / "f.json"),
                           "--trust-remote-code"], capture_output=True, text=True, check=False)
    assert done.returncode == 3
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: model_path: {folder}: the model's code failed") and "needs flash_attn" in last
    assert not (tmp_path / "f.json").exists()


@pytest.mark.parametrize("line", ['raise ImportError("needs flash_attn")', "import time; time.sleep(3600)"],
                         ids=["raises", "hangs"])
def test_copy_stops_in_one_line_and_leaves_nothing(tiny_models, tmp_path: Path, line: str) -> None:
    folder = _variant(tiny_models, tmp_path, line)
    dest = git_init(tmp_path / "checkout")
    before = snapshot(dest)
    env = {"MSMM_PROBE_TIMEOUT_S": "20"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        start = time.monotonic()
        done = copy(dest, model_id="tiles", model_path=folder, trust_remote_code=True)
    finally:
        for key, value in old.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    assert done.returncode != 0
    assert str(folder) in done.stderr and ("the model's code failed" in done.stderr or "did not finish" in done.stderr)
    assert "Traceback" not in done.stderr.split("model_path")[-1]
    assert snapshot(dest) == before, "a failed copy must leave the checkout unchanged"
    assert time.monotonic() - start < 120
    time.sleep(2)
    left = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True, check=False).stdout.split()
    assert not left, f"processes left behind: {left}"


# --- branch c without a processor class: the model's own data code (hooks.data.model_code) ------------


def test_code_format_is_measured_on_the_models_own_chat(facts) -> None:
    """No processor class: the sample format is read off ``chat()`` run with a recording forward."""
    fmt = facts["processor"]["sample_format"]
    assert fmt["kind"] == "code" and fmt["image_text"] == ["<img>", "<IMG_CONTEXT>", "</img>"]
    assert fmt["per_tile"] == 4 and fmt["tile_flags"] == ["image_flags"]  # remote_vlm merges 4x4 patches into 4
    assert fmt["image_function"] == "modeling_remote_tiles.load_image"
    assert fmt["conversation"] == "conversation.get_conv_template"
    assert fmt["system_message"] == "You are a helpful assistant."
    assert facts["processor"]["model_attribute_tokens"] == {"img_context_token_id": "<IMG_CONTEXT>"}
    assert facts["processor"]["problems"] == []  # the runtime rebuilt chat()'s prompt token for token


@pytest.fixture(scope="module")
def model_code(tiny_models, facts):
    """The runtime's ModelCode and SampleFormat for the fixture, as the generated plugin makes them."""
    import transformers

    from hooks.data.model_code import CONVERSATION_FUNCTION, IMAGE_FUNCTION, code_modules, find_function, runtime_code
    from hooks.model.build import resolve_model_class

    folder = tiny_models(ARCH)
    config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=True)
    modules = code_modules(resolve_model_class(config, folder, trust_remote_code=True))
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return runtime_code(facts["processor"]["sample_format"], tokenizer,
                        *(find_function(modules, n) for n in (IMAGE_FUNCTION, CONVERSATION_FUNCTION)))


def test_code_sample_tiles_flags_and_labels(model_code) -> None:
    """A wide image: tiles plus a thumbnail, 4 context tokens per tile, each tile flagged; two answers
    trained with their ``<|im_end|>``, the separator's newline and every prompt token not."""
    from PIL import Image

    from hooks.data.records import dataset_runtime

    code, fmt = model_code
    turns = [("system", "Be brief."), ("user", "What is it?"), ("assistant", "Red."), ("user", "Sure?"),
             ("assistant", "Yes.")]
    sample = dataset_runtime().build_sample(code, fmt, turns, [Image.new("RGB", (128, 64), "red")], 4096)
    tiles = sample["pixel_values"].shape[0]
    assert tiles == 3 and sample["image_flags"].tolist() == [[1]] * 3  # 2x1 grid + thumbnail
    ids = sample["input_ids"][0].tolist()
    assert ids.count(code.tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>")) == 4 * tiles
    trained = [t for t, lab in zip(ids, sample["labels"][0].tolist(), strict=True) if lab != -100]
    assert code.tokenizer.decode(trained) == "Red.<|im_end|>Yes.<|im_end|>"
    text = code.tokenizer.decode(ids)
    assert "<|im_start|>system\nBe brief.<|im_end|>" in text and "<img><IMG_CONTEXT>" in text
    assert text.index("<img>") < text.index("What is it?")  # unmarked: first in the first user turn, as chat()


def test_code_stand_in_adds_tiles_but_no_tokens(model_code) -> None:
    """A text-only batch still runs the vision tower: stand-in tiles flagged 0, no token added or trained."""
    from hooks.data.records import dataset_runtime

    code, fmt = model_code
    data = dataset_runtime()
    sample = data.build_sample(code, fmt, [("user", "Hi?"), ("assistant", "Hi.")], [], 4096)
    batch = data.collate([sample], 0, frozenset({"input_ids", "attention_mask", "pixel_values", "image_flags"}),
                         data.stand_ins(code, fmt))
    assert batch["input_ids"].shape == sample["input_ids"].shape
    assert batch["pixel_values"].shape[0] >= 1 and not batch["image_flags"].any()


# --- custom_tiles: a config.json AutoConfig cannot load (MindSpeed-MM's custom-model path) ------------


def test_custom_model_is_probed_through_the_class_architectures_names(tiny_models) -> None:
    from hooks.probe import probe

    facts = probe(tiny_models("custom_tiles"), trust_remote_code=True)
    assert facts.custom_model and facts.remote_code and facts.architecture == "RemoteTilesForCausalLM"
    from hooks.data.candidates import recommend

    assert facts.processor.form.kind == "code" and recommend(facts, None).branch == "c"


def test_custom_model_needs_consent_and_a_class_in_the_folder(tiny_models, tmp_path: Path) -> None:
    from hooks.model.build import ProbeError
    from hooks.model.facts import check_model_dir
    from hooks.probe import probe

    with pytest.raises(ProbeError, match="^trust_remote_code: config.json has neither model_type nor auto_map"):
        check_model_dir(tiny_models("custom_tiles"), trust_remote_code=False)
    folder = tmp_path / "model"
    shutil.copytree(tiny_models("custom_tiles"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["NoSuchModel"]}))
    with pytest.raises(ProbeError, match=r"^model_path: .* no \*\.py file in the folder defines a class named"):
        probe(folder, trust_remote_code=True)


def test_shrunk_custom_model_stays_custom(tiny_models, tmp_path: Path) -> None:
    """The smoke's shrunk copy must take the same framework path: no model_type appears in its config.json."""
    from hooks.model.shrink import shrink_model_dir

    out = shrink_model_dir(tiny_models("custom_tiles"), tmp_path / "small", trust_remote_code=True)
    config = json.loads((out / "config.json").read_text())
    assert "model_type" not in config and "auto_map" not in config
    assert config["architectures"] == ["RemoteTilesForCausalLM"]

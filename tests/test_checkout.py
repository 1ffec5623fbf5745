"""Choices from the checkout (issue 12, first part): templates and collators are what the destination
registers, and the answers file records the framework revision the scaffold was rendered against."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from hooks.framework import checkout
from tests.copier_run import commit_all, copy, git_init

TEMPLATES = '''from x import _register_template
_register_template(name="mine_vl", format_user=None)
def helper():
    _register_template(name="not_module_level")
_register_template(
    name="other_vl",
)
'''
COLLATORS = '''_register_data_collator("mine", object)
_register_data_collator(name_variable, object)
'''


def _fake_checkout(root: Path) -> Path:
    (root / checkout.TEMPLATE_FILE).parent.mkdir(parents=True)
    (root / checkout.TEMPLATE_FILE).write_text(TEMPLATES)
    (root / checkout.COLLATOR_FILE).parent.mkdir(parents=True)
    (root / checkout.COLLATOR_FILE).write_text(COLLATORS)
    return root


def test_registries_are_read_from_the_files_without_importing_them(tmp_path: Path) -> None:
    root = _fake_checkout(tmp_path)
    assert checkout.templates(root) == ["mine_vl", "other_vl"]
    assert checkout.collators(root) == ["mine"]
    assert checkout.revision(root).startswith("sha256:")


def test_outside_a_checkout_the_pinned_lists_stand_in(tmp_path: Path) -> None:
    assert checkout.templates(tmp_path) == list(checkout.KNOWN_TEMPLATES)
    assert checkout.collators(tmp_path) == list(checkout.KNOWN_COLLATORS)
    assert checkout.revision(tmp_path) == ""


def test_copy_offers_what_the_destination_registers(tiny_models, tmp_path: Path) -> None:
    """A template the destination registers is accepted, one it lacks is refused; the revision is recorded."""
    dest = _fake_checkout(git_init(tmp_path / "c"))
    commit_all(dest)
    done = copy(dest, model_id="m", model_path=tiny_models("qwen2_5_vl"), data_branch="a", chat_template="qwen2vl")
    assert done.returncode != 0 and "qwen2vl" in done.stderr
    done = copy(dest, model_id="m", model_path=tiny_models("qwen2_5_vl"), data_branch="a", chat_template="other_vl",
                collator_id="mine")
    assert done.returncode == 0, done.stderr[-2000:]
    answers = yaml.safe_load((dest / ".copier-answers" / "m.yml").read_text())
    assert answers["chat_template"] == "other_vl" and answers["framework"]["revision"] == checkout.revision(dest)


@pytest.mark.tier2
def test_the_pinned_checkout_registers_more_than_the_old_list(mm_home: Path) -> None:
    assert {"qwen3_6", "qwen3_asr"} <= set(checkout.templates(mm_home))
    assert {"llm_pretrain", "qwen3asr"} <= set(checkout.collators(mm_home))
    assert os.path.isdir(mm_home / "mindspeed_mm")

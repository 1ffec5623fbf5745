"""Our matcher must agree with MindSpeed's ``module_name_match`` (contract §6.1)."""

from __future__ import annotations

import os
import sys

import pytest

from hooks.model.matching import generalize, module_name_match

CASES = [
    ("model.layers.{*}", "model.layers.0", True),
    ("model.layers.{*}", "model.layers.0.mlp", False),
    ("model.layers.*", "model.layers.0.mlp", True),
    ("*.mlp", "model.layers.3.mlp", True),
    ("model.layers.{0-4}", "model.layers.5", False),
    ("model.layers.{0-4}", "model.layers.4", True),
    ("model.*layers.{*}", "model.language_model.layers.3", True),
    ("model.language_model", "model.language_model.layers", False),
    ("model.layers.[0-3]", "model.layers.1", False),
    ("lm_head", "lm_head", True),
    ("model.layers.{*}", "model.layers.", False),
    ("model.visua?", "model.visual", True),
]


@pytest.mark.parametrize(("pattern", "name", "expected"), CASES)
def test_matches_contract_table(pattern: str, name: str, expected: bool) -> None:
    assert module_name_match(pattern, name) is expected


def test_bad_range_raises() -> None:
    with pytest.raises(ValueError):
        module_name_match("layers.{5-1}", "layers.3")


def test_generalize() -> None:
    assert generalize("model.language_model.layers.12.mlp.experts") == "model.language_model.layers.{*}.mlp.experts"


@pytest.mark.skipif(not os.environ.get("MINDSPEED_HOME"), reason="needs MindSpeed core in MINDSPEED_HOME")
@pytest.mark.parametrize(("pattern", "name", "expected"), CASES)
def test_agrees_with_real_mindspeed(pattern: str, name: str, expected: bool) -> None:
    sys.path.insert(0, os.environ["MINDSPEED_HOME"])
    try:
        from mindspeed.fsdp.utils.str_match import module_name_match as real
    finally:
        sys.path.pop(0)
    assert real(pattern, name) is module_name_match(pattern, name)

"""Architectures the project does not cover stop before rendering (issue 22): one table, one line, exit 2.

Florence-2 used to render and then fail in the smoke with a dtype error; now the probe (and copier's model_path
validator, which runs the same cheap check) stops it naming why and what to do. The copy itself is exercised in
``tests/test_preflight.py`` ("florence2 not covered").
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hooks.model.coverage import NOT_COVERED, not_covered_error
from hooks.model.facts import check_model_dir
from hooks.model.loading import ProbeError

ROOT = Path(__file__).resolve().parent.parent


def test_every_not_covered_model_type_is_spelled_as_transformers_spells_it() -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    assert set(NOT_COVERED) <= set(CONFIG_MAPPING_NAMES)
    assert "kosmos-2" not in NOT_COVERED  # covered: built and trained as kosmos2


def test_support_page_not_covered_table_is_the_table() -> None:
    """The support page's "Not covered" rows name exactly the table's model types (and kosmos-2, which is covered)."""
    text = (ROOT / "docs" / "support.md").read_text(encoding="utf-8")
    section = text[text.index("Not covered"):]
    section = section[: section.index("\n\n", section.index("|---|"))]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])}
    assert named - {"kosmos-2"} == set(NOT_COVERED)


@pytest.mark.parametrize("model_type", sorted(NOT_COVERED))
def test_not_covered_config_stops_in_the_cheap_check(model_type: str, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, "auto_map": {"AutoConfig": "c.C"}}))
    with pytest.raises(ProbeError, match=rf"^model_path: model_type '{re.escape(model_type)}' is not covered: "):
        check_model_dir(tmp_path, trust_remote_code=False)  # before the consent question: it would not train anyway
    assert not_covered_error({"model_type": "qwen2_5_vl"}) == ""


def test_probe_cli_stops_florence2_in_one_line(tmp_path: Path) -> None:
    from transformers import Florence2Config

    (tmp_path / "config.json").write_text(Florence2Config().to_json_string())
    done = subprocess.run([sys.executable, "-m", "hooks.probe", str(tmp_path), "--json"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"error: {not_covered_error({'model_type': 'florence2'})}"]
    assert "encoder-decoder" in done.stderr and "write the MindSpeed-MM plugin by hand" in done.stderr

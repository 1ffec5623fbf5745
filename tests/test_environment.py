"""Errors are never evidence (issue 22): a candidate that raises is "could not evaluate", and an interpreter
that cannot run the framework stops the copy before anything is written, in one line naming ``python``.

Tier 1 checks the recommendation rules and the cause classification; tier 2 simulates the two refusals
users meet in a real checkout: the framework's own import refusing the interpreter (MindSpeed-MM's
``fully_shard`` gate, ``ValueError: The torch2.11.0+cu130 is not supported now.``) and a package missing
inside a candidate's data path.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from hooks.data.candidates import Candidate, recommend
from hooks.data.framework_batches import accepted_torch, environment_cause
from tests.copier_run import commit_all, copy, mm_checkout
from tests.model_facts import stand_in_facts

FACTS = stand_in_facts("qwen2_5_vl")
A, B = Candidate("a", "qwen2vl", "qwen3vl"), Candidate("b", "m", "qwen3vl")


@dataclass
class Result:
    """A named stand-in for ``hooks.data.parity.ParityResult`` (the Verdict protocol), for the rules alone."""

    verdict: str
    detail: str = ""
    environment: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == "match"

    def first_difference(self) -> str:
        return self.detail


def test_an_error_chooses_no_branch_and_says_so() -> None:
    rec = recommend(FACTS, [(A, Result("error", "one image: could not evaluate: TypeError: x")),
                            (B, Result("match"))])
    assert rec.branch == "b" and "could not evaluate: TypeError" in rec.reason
    rec = recommend(FACTS, [(A, Result("error", "could not evaluate: TypeError: x"))])
    assert rec.branch == "c" and "could not evaluate: TypeError: x" in rec.reason  # why: the error itself
    assert "reproduces" not in rec.reason and "does not" not in rec.reason


def test_a_mismatch_is_evidence() -> None:
    rec = recommend(FACTS, [(A, Result("mismatch", "one image: input_ids differ")),
                            (B, Result("error", "could not evaluate: KeyError: y"))])
    assert rec.branch == "c" and "no template reproduces" in rec.reason and "input_ids differ" in rec.reason
    assert "KeyError" in rec.reason


def test_the_interpreter_stops_the_choice() -> None:
    rec = recommend(FACTS, [(A, Result("error", "x", environment="python: /py has no package 'flash_attn'"))])
    assert rec.stop.startswith("python: ") and rec.branch == ""


def test_causes_of_the_environment(tmp_path: Path) -> None:
    assert "has no package 'flash_attn'" in environment_cause(ModuleNotFoundError("No module", name="flash_attn.x"))
    assert environment_cause(ImportError("cannot import name 'no_init_weights'")).startswith("python: ")
    assert environment_cause(TypeError("unexpected keyword argument")) == ""
    gate = tmp_path / "mindspeed_mm/fsdp/ops/fully_shard/fully_shard.py"
    gate.parent.mkdir(parents=True)
    gate.write_text('if "2.7.1" in torch.__version__:\n    a()\nelif "2.9.0" in torch.__version__:\n    b()\n')
    assert accepted_torch(tmp_path) == ["2.7.1", "2.9.0"]
    line = environment_cause(ValueError("The torch2.11.0+cu130 is not supported now."), tmp_path)
    assert line.startswith("python: MindSpeed-MM refuses torch") and "accepts torch 2.7.1, 2.9.0" in line


# --- tier 2: simulated refusals in a real checkout ------------------------------------------------------

def _status(dest: Path) -> str:
    return subprocess.run(["git", "-C", str(dest), "status", "--porcelain", "--ignored", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


def _refusing_checkout(mm_home: Path, parent: Path, relpath: str, line: str) -> Path:
    dest = mm_checkout(mm_home, parent)
    target = dest / relpath
    target.write_text(line + "\n" + target.read_text())
    commit_all(dest)
    return dest


SIMULATED = {
    "the framework refuses this torch": (
        "mindspeed_mm/fsdp/ops/__init__.py", 'raise ValueError("The torch2.11.0+cu130 is not supported now.")',
        "MindSpeed-MM refuses torch"),
    "a package missing inside a candidate": (
        "mindspeed_mm/fsdp/data/data_utils/func_utils/template.py", "import msmm_missing_package  # noqa",
        "has no package 'msmm_missing_package'"),
}


@pytest.mark.tier2
@pytest.mark.parametrize("case", sorted(SIMULATED))
def test_a_refused_interpreter_stops_before_rendering(case: str, mm_home: Path, tiny_models,
                                                       tmp_path: Path) -> None:
    relpath, line, words = SIMULATED[case]
    dest = _refusing_checkout(mm_home, tmp_path, relpath, line)
    before = _status(dest)
    done = copy(dest, skip_tasks=False, model_id="refused", model_path=tiny_models("qwen2_5_vl"), run_smoke=False)
    last = (done.stderr.strip().splitlines() or [""])[-1]
    assert done.returncode != 0, done.stdout[-2000:]
    assert last.startswith("error: python: ") and words in last, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert _status(dest) == before

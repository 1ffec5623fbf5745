"""Data parity (hooks/data/parity.py): the comparison on hand-made id lists, the CLI outside a checkout, the
result cache and the early run the probe forks, and (tier 2) MindSpeed-MM's qwen2vl template against a
tiny Qwen2.5-VL's own processor."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from hooks.data import parity
from hooks.data.parity import ParityResult, answer_start, compare_ids, diff_lines, judge_payload, main

# A toy vocabulary: enough to spell Qwen- and GLM-style samples.
VOCAB = {
    1: "<|im_start|>", 2: "<|im_end|>", 3: "\n", 4: "system", 5: "user", 6: "assistant", 7: "<|vision_start|>",
    8: "<|image_pad|>", 9: "<|vision_end|>", 10: "Hi", 11: "Red", 12: ".", 13: "<think>", 14: "</think>",
    15: "<|endoftext|>", 16: "Be nice",
}
IMG = 8
SYSTEM = [1, 4, 3, 16, 2, 3]
PROMPT = [1, 5, 3, 7, IMG, IMG, IMG, IMG, 9, 10, 2, 3, 1, 6, 3]
ANSWER = [11, 12, 2, 3]


def decode(ids: Sequence[int]) -> str:
    return "".join(VOCAB.get(i, f"<{i}>") for i in ids)


def judge(mm: list[int], ref: list[int], mm_start: int, ref_start: int, **kw):  # noqa: ANN003
    return compare_ids(mm, ref, image_token_id=IMG, mm_answer_start=mm_start, ref_answer_start=ref_start,
                       decode=decode, **kw)


def test_identical_sequences_match() -> None:
    ids = PROMPT + ANSWER
    result = judge(ids, list(ids), len(PROMPT), len(PROMPT))
    assert result.verdict == "match" and result.ok and not result.diff_lines


def test_default_system_prompt_is_compatible_and_listed() -> None:
    mm = SYSTEM + PROMPT + ANSWER
    result = judge(mm, PROMPT + ANSWER, len(SYSTEM + PROMPT), len(PROMPT))
    assert result.verdict == "compatible" and result.ok
    assert len(result.diff_lines) == 1 and "Be nice" in result.diff_lines[0]
    assert any("first divergence at token 1" in d for d in result.details)


def test_trailing_newline_after_eos_is_compatible() -> None:
    result = judge(PROMPT + ANSWER, PROMPT + ANSWER[:-1], len(PROMPT), len(PROMPT))
    assert result.verdict == "compatible"
    assert result.diff_lines and "'\\n'" in result.diff_lines[0]


def test_image_token_count_differs_is_mismatch() -> None:
    ref = [t for i, t in enumerate(PROMPT) if i != 4] + ANSWER
    result = judge(PROMPT + ANSWER, ref, len(PROMPT), len(PROMPT) - 1)
    assert result.verdict == "mismatch" and not result.ok
    assert any("image tokens: MindSpeed-MM 4, model 3" in d for d in result.details)
    assert any("image-token count differs" in d for d in result.details)


def test_media_wrapper_differs_is_mismatch() -> None:
    ref = [0 if t == 7 else t for t in PROMPT] + ANSWER  # same count, no <|vision_start|>
    result = judge(PROMPT + ANSWER, ref, len(PROMPT), len(PROMPT))
    assert result.verdict == "mismatch"
    assert any("media span differs" in d for d in result.details)


def test_answer_differs_is_mismatch_and_names_think_block() -> None:
    mm = PROMPT + [13, 3, 14, 3] + ANSWER
    result = judge(mm, PROMPT + ANSWER, len(PROMPT), len(PROMPT))
    assert result.verdict == "mismatch"
    assert any("answer tokens differ" in d and "<think>" in d for d in result.details)


def test_other_stop_token_is_mismatch() -> None:
    mm = PROMPT + [11, 12, 15, 3]  # <|endoftext|> where the model ends its turn with <|im_end|>
    result = judge(mm, PROMPT + ANSWER, len(PROMPT), len(PROMPT), terminator_ids={2, 15})
    assert result.verdict == "mismatch"


def test_stop_token_the_template_leaves_to_generation_is_compatible() -> None:
    ref = [0, 5, 3, 7, IMG, IMG, 9, 10, 6, 3, 11, 12]  # GLM style: no end-of-turn after the last answer
    mm = ref[:9] + [3, 11, 12, 15]  # answer starts before the "\n", eos appended (efficient_eos)
    result = judge(mm, ref, 9, 10, terminator_ids={15})
    assert result.verdict == "compatible"
    assert any("stop token the model's template leaves to generation" in d for d in result.details)


def test_diff_lines_are_capped() -> None:
    mm = [11, 12] * 40
    ref = [11, 10] * 40
    lines = diff_lines(mm, ref, decode)
    assert len(lines) == 13 and lines[-1].startswith("...")


def test_answer_start_is_common_prefix_with_generation_prompt() -> None:
    assert answer_start(PROMPT + ANSWER, PROMPT) == len(PROMPT)
    assert answer_start([1, 2, 3], [1, 9]) == 1


def test_judge_payload_decodes_with_pieces() -> None:
    payload = {
        "mm_ids": SYSTEM + PROMPT + ANSWER, "mm_answer_start": len(SYSTEM + PROMPT),
        "ref_ids": PROMPT + ANSWER, "ref_prompt_ids": PROMPT, "image_token_id": IMG,
        "terminator_ids": [2], "pieces": {str(k): v for k, v in VOCAB.items()},
        "mm_text": decode(SYSTEM + PROMPT + ANSWER), "ref_text": decode(PROMPT + ANSWER),
    }
    result = judge_payload(payload)
    assert result.verdict == "compatible"
    assert result.mm_text.startswith("<|im_start|>system")
    assert "COMPATIBLE" in result.summary()


def test_cli_outside_a_checkout_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answers = tmp_path / "a.yml"
    answers.write_text("model_id: x\nmodel_path: /nowhere\ndata_branch: a\nchat_template: qwen2vl\n")
    assert main([str(answers), "--dest", str(tmp_path)]) == 0
    assert "cannot run here: destination is not a MindSpeed-MM checkout" in capsys.readouterr().out


# --- cache and early run ----------------------------------------------------------------------------


@pytest.fixture
def checkout_and_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A model folder and a checkout's data code: the files a verdict depends on (nothing is run)."""
    monkeypatch.setenv("MSMM_CACHE", str(tmp_path / "cache"))
    model, data = tmp_path / "model", tmp_path / "co" / "mindspeed_mm" / "fsdp" / "data"
    model.mkdir()
    data.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"w")
    (data / "template.py").write_text("A = 1\n")
    return tmp_path / "co", model


def test_parity_key_follows_the_inputs_but_not_the_weights(checkout_and_model: tuple[Path, Path]) -> None:
    dest, model = checkout_and_model
    key = parity.parity_key(dest, model, "qwen2vl", "python3")
    assert parity.parity_key(dest, model, "qwen2vl", "python3") == key
    (model / "model.safetensors").write_bytes(b"other weights")
    assert parity.parity_key(dest, model, "qwen2vl", "python3") == key
    assert parity.parity_key(dest, model, "glm4.1v", "python3") != key
    assert parity.parity_key(dest, model, "qwen2vl", "/other/python") != key
    (dest / "mindspeed_mm" / "fsdp" / "data" / "template.py").write_text("A = 22\n")
    assert parity.parity_key(dest, model, "qwen2vl", "python3") != key


def test_cached_verdict_is_reused_and_errors_are_not(checkout_and_model: tuple[Path, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    dest, model = checkout_and_model
    runs: list[str] = []

    def fake_check(*_args: object, **_kwargs: object) -> ParityResult:  # test double for the subprocess
        runs.append("run")
        return ParityResult("error" if len(runs) == 1 else "match", ["details"])

    monkeypatch.setattr(parity, "check_parity", fake_check)
    assert parity.cached_parity(dest, model, "qwen2vl").verdict == "error"
    assert parity.cached_parity(dest, model, "qwen2vl").verdict == "match"  # the error was not stored
    again = parity.cached_parity(dest, model, "qwen2vl")
    assert again == ParityResult("match", ["details"]) and len(runs) == 2


def test_a_stored_result_from_other_package_versions_is_ignored(checkout_and_model: tuple[Path, Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    dest, model = checkout_and_model
    key = parity.parity_key(dest, model, "qwen2vl", sys.executable)
    parity._store(key, ParityResult("match"))
    assert parity._load_cached(key) is not None
    monkeypatch.setattr(parity, "_env_versions", lambda: {"transformers": "9.9.9"})
    assert parity._load_cached(key) is None


def test_waits_for_the_early_run_and_uses_its_result(checkout_and_model: tuple[Path, Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A real second process plays the early run: it holds the pid file, then stores its verdict."""
    dest, model = checkout_and_model
    key = parity.parity_key(dest, model, "qwen2vl", sys.executable)
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]); time.sleep(1.5)\n"
              "from hooks.data import parity; parity._store(sys.argv[2], parity.ParityResult('compatible', ['early']))")
    root = Path(parity.__file__).resolve().parents[1]
    early = subprocess.Popen([sys.executable, "-c", script, str(root), key])
    (parity._cache_dir() / f"{key}.pid").parent.mkdir(parents=True, exist_ok=True)
    (parity._cache_dir() / f"{key}.pid").write_text(str(early.pid))
    monkeypatch.setattr(parity, "check_parity", lambda *a, **k: pytest.fail("ran instead of waiting"))
    start = time.monotonic()
    result = parity.cached_parity(dest, model, "qwen2vl")
    assert result.verdict == "compatible" and result.details == ["early"]
    assert time.monotonic() - start >= 1.0
    early.wait()


def test_a_finished_unreaped_early_run_is_not_waited_for(checkout_and_model: tuple[Path, Path]) -> None:
    dest, model = checkout_and_model
    key = parity.parity_key(dest, model, "qwen2vl", sys.executable)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    (parity._cache_dir() / f"{key}.pid").parent.mkdir(parents=True, exist_ok=True)
    (parity._cache_dir() / f"{key}.pid").write_text(str(zombie.pid))
    time.sleep(0.5)  # exited, not yet reaped
    if sys.platform.startswith("linux"):
        assert parity._early_run_pid(key) is None
    zombie.wait()
    assert parity._early_run_pid(key) is None


def test_no_early_run_outside_a_checkout(tmp_path: Path, tiny_models) -> None:  # noqa: ANN001
    from hooks.render.copier_ext import early_parity_target

    assert early_parity_target(str(tiny_models("qwen2_5_vl")), sys.executable, str(tmp_path)) is None


_FORK_WITH_SLOW_CHECK = """
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from hooks.data import parity

def slow_check_test_double(*_args, **_kwargs):  # stands in for the real check (tier 2 runs that)
    time.sleep(2)
    return parity.ParityResult("compatible", ["forked"])

parity.check_parity_in_this_process = slow_check_test_double
import hooks.smoke.framework
hooks.smoke.framework.framework_unavailable = lambda dest: ("", None)
start = time.monotonic()
started = parity.fork_early_run(Path(sys.argv[2]), Path(sys.argv[3]), "qwen2vl", sys.executable)
print(started, round(time.monotonic() - start, 2))
"""


def test_fork_early_run_returns_at_once_and_leaves_its_verdict(checkout_and_model: tuple[Path, Path]) -> None:
    """The fork mechanics on their own: the parent goes on, the detached child stores and unpublishes."""
    dest, model = checkout_and_model
    root = Path(parity.__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _FORK_WITH_SLOW_CHECK, str(root), str(dest), str(model)],
                          capture_output=True, text=True, timeout=60, check=True)
    started, seconds = done.stdout.split()
    assert started == "True" and float(seconds) < 1.5  # returned before the 2 s check could end
    key = parity.parity_key(dest, model, "qwen2vl", sys.executable)
    pid_file = parity._cache_dir() / f"{key}.pid"
    deadline = time.monotonic() + 30
    while (pid_file.exists() or parity._load_cached(key) is None) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert parity._load_cached(key) == ParityResult("compatible", ["forked"])
    assert not pid_file.exists()


@pytest.mark.tier2
def test_early_run_result_is_what_postgen_reads(mm_home: Path, tiny_models, tmp_path: Path,  # noqa: ANN001
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe CLI forks the real check in a real checkout; postgen reads its verdict without a rerun."""
    from hooks import env_with_hooks
    from hooks.render.copier_ext import early_parity_target

    monkeypatch.setenv("MSMM_CACHE", str(tmp_path / "cache"))
    model = tiny_models("qwen2_5_vl")
    target = early_parity_target(str(model), sys.executable, str(mm_home))
    assert target == [str(mm_home.resolve()), "qwen2vl", sys.executable]
    probe = subprocess.run([sys.executable, "-m", "hooks.model.probe", str(model), "--json", "--no-timings",
                            "--early-parity", *target], capture_output=True, text=True, env=env_with_hooks(),
                           timeout=300, check=False)
    assert probe.returncode in (0, 1) and probe.stdout.strip().startswith("{"), probe.stderr[-2000:]
    monkeypatch.setattr(parity, "check_parity", lambda *a, **k: pytest.fail("ran instead of waiting"))
    answers = {"model_path": str(model), "python": sys.executable, "data_branch": "a", "chat_template": "qwen2vl"}
    result, why = parity.parity_for_answers(mm_home, answers)
    assert why == "" and result is not None and result.verdict in ("match", "compatible"), result
    key = parity.parity_key(mm_home.resolve(), model.resolve(), "qwen2vl", sys.executable)
    deadline = time.monotonic() + 10
    while (parity._cache_dir() / f"{key}.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (parity._cache_dir() / f"{key}.pid").exists()


@pytest.mark.tier2
def test_qwen2_5_vl_qwen2vl_template_is_not_mismatch(mm_home: Path, tiny_models) -> None:  # noqa: ANN001
    from hooks.data.parity import check_parity

    mindspeed_home = Path(os.environ["MINDSPEED_HOME"]) if os.environ.get("MINDSPEED_HOME") else None
    result = check_parity(mm_home, tiny_models("qwen2_5_vl"), "qwen2vl", mindspeed_home=mindspeed_home)
    assert result.verdict in ("match", "compatible"), result.summary()
    assert "<|image_pad|>" in result.mm_text and result.mm_text.count("<|image_pad|>") == \
        result.ref_text.count("<|image_pad|>")

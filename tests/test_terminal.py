"""An interactive copy as a person sees it: a real terminal (tmux), 80 columns, answers typed.

What is checked is the screen itself: every prompt fits (nothing cut at the right edge), the
consent question appears only for a folder whose config.json has ``auto_map``, the probe's findings
stand above the data-branch question, and a failing smoke ends with its verdict and the log's
path, without a traceback.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.copier_run import changed_paths, git_init, mm_checkout

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)")

COLUMNS = 80


class Terminal:
    """One tmux pane of ``COLUMNS`` columns running ``command``; its screen kept after the command exits."""

    def __init__(self, tmp_path: Path, command: list[str], cwd: Path) -> None:
        self.tmux, self.cwd = ["tmux", "-S", str(tmp_path / "tmux.sock")], cwd
        shell = f"cd {shlex.quote(str(cwd))} && {shlex.join(command)}; rc=$?; echo; echo COPY-EXITED-$rc; sleep 600"
        subprocess.run([*self.tmux, "new-session", "-d", "-x", str(COLUMNS), "-y", "50", "-s", "t", shell],
                       check=True)
        subprocess.run([*self.tmux, "set-option", "-g", "history-limit", "20000"], check=True)

    def screen(self, *, joined: bool = False) -> str:
        """Everything shown so far, line by line as on screen (``joined``: lines the terminal wrapped, rejoined)."""
        flags = ["-J"] if joined else []
        done = subprocess.run([*self.tmux, "capture-pane", "-p", *flags, "-S", "-", "-t", "t"], capture_output=True,
                              text=True, check=True)
        return done.stdout

    def wait_for(self, text: str, timeout_s: float = 300) -> str:
        """The screen (as shown, unjoined) once ``text`` is on it, even across a wrapped line."""
        deadline = time.monotonic() + timeout_s
        while text not in self.screen(joined=True):
            assert time.monotonic() < deadline, f"{text!r} never appeared:\n{self.screen()}"
            time.sleep(0.2)
        return self.screen()

    def type(self, text: str = "", *, clear: bool = False) -> None:
        if clear:
            subprocess.run([*self.tmux, "send-keys", "-t", "t", "C-u"], check=True)
        if text:
            subprocess.run([*self.tmux, "send-keys", "-t", "t", "-l", text], check=True)
        subprocess.run([*self.tmux, "send-keys", "-t", "t", "Enter"], check=True)
        time.sleep(0.3)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], check=False, capture_output=True)


def copier_command(template: Path) -> list[str]:
    return [sys.executable, "-m", "copier", "copy", "--trust", str(template), "."]


def answer_up_to_the_smoke(term: Terminal, model_id: str, model: Path) -> str:
    """Type the answers a person would (defaults where they are right); the screen up to the last question."""
    term.wait_for("Model id:")
    term.type(model_id)
    term.wait_for("Local model folder")
    term.type(str(model))
    term.wait_for("Python of the training environment")
    term.type(sys.executable, clear=True)  # the default "python3" may not be this environment's
    term.wait_for("Data branch.")
    assert not processes_of(term.cwd), processes_of(term.cwd)  # questions compute: nothing started is left running
    for question in ("Training data", "Folder that relative", "chat template", "data collator",
                     "NPUs (devices) per node", "Memory per device", "Nodes you plan", "How ranks get the weights"):
        term.type()
        term.wait_for(question)
    term.type()
    screen = term.wait_for("Run the smoke after rendering?")
    term.type()
    return screen


def processes_of(dest: Path) -> list[str]:
    """Live processes whose command line names the destination (a trainer launched for its checkout would)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and str(dest.resolve()) in cmdline and "copier" not in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def broken_weights(tiny: Path, dest: Path) -> Path:
    """A copy of a tiny model whose weights are a sound ``pytorch_model.bin`` (the copy's pre-flight reads its zip
    directory) holding its first tensor in another shape than the config's. The pre-flight compares names and
    shapes in safetensors headers only (a pickle is not read before training), so the probe passes and loading the
    weights fails: the smoke's failure to show."""
    import torch
    from safetensors.torch import load_file

    shutil.copytree(tiny, dest)
    weights = load_file(dest / "model.safetensors")
    first = sorted(weights)[0]
    weights[first] = weights[first].flatten()[:3].clone()
    torch.save(weights, dest / "pytorch_model.bin")
    (dest / "model.safetensors").unlink()
    return dest


def _prompt_lines(screen: str, *answers: str) -> list[str]:
    """The lines of the question part of the screen that we wrote (not the echo of a typed answer)."""
    lines = screen.split("Run the smoke after rendering?")[0].splitlines()
    return [line for line in lines if not any(answer in line for answer in answers)]


def check_failed_smoke_screen(screen: str, mode: str) -> None:
    tail = [line for line in screen.split(f"smoke[{mode}] FAIL")[1].splitlines() if line.strip()]
    assert "Traceback" not in screen and "ChildFailedError" not in screen, screen
    ours = [line for line in tail if not line.startswith(("Task ", "COPY-EXITED"))]  # copier's own last word
    assert ours[-1].startswith("full log: "), tail
    assert Path(ours[-1].removeprefix("full log: ")).is_file()
    assert any(line.startswith("hint: ") for line in ours), tail
    assert "COPY-EXITED-1" in screen


def test_interactive_copy_fits_80_columns_and_a_failed_smoke_ends_with_its_verdict(
        tmp_path: Path, tiny_models, template_src: Path) -> None:
    model = broken_weights(tiny_models("qwen2_5_vl"), tmp_path / "broken_qwen")
    term = Terminal(tmp_path, copier_command(template_src), git_init(tmp_path / "dest"))
    try:
        questions = answer_up_to_the_smoke(term, "tty_qwen", model)
        term.wait_for("COPY-EXITED-")
        screen = term.screen(joined=True)
    finally:
        term.close()
    print(screen)
    lines = _prompt_lines(questions, str(model), sys.executable)
    assert all(len(line) < COLUMNS for line in lines), "\n".join(line for line in lines if len(line) >= COLUMNS)
    assert "Allow it to run?" not in questions  # no auto_map: no consent question
    findings, branch = questions.index("Probe findings"), questions.index("Data branch. Recommended: a, because")
    assert findings < branch
    assert "model.model_id, mindspeed_mm/fsdp/models/<id>/ and examples/<id>/." in questions
    assert "iteration" not in screen.split("contract smoke")[1].split("smoke[contract]")[0]  # it never trained
    check_failed_smoke_screen(screen, "contract")


@pytest.mark.tier2
def test_interactive_copy_into_a_checkout_ends_with_the_verdict_not_torchrun(
        tmp_path: Path, tiny_models, template_src: Path, mm_home: Path) -> None:
    model = broken_weights(tiny_models("qwen2_5_vl"), tmp_path / "broken_qwen")
    term = Terminal(tmp_path, copier_command(template_src), mm_checkout(mm_home, tmp_path))
    try:
        answer_up_to_the_smoke(term, "tty_qwen", model)
        term.wait_for("COPY-EXITED-")
        screen = term.screen(joined=True)
    finally:
        term.close()
    check_failed_smoke_screen(screen, "framework")


def test_consent_is_asked_for_remote_code(tmp_path: Path, tiny_models, template_src: Path) -> None:
    """Asked for a folder with auto_map; "no" stops the copy at the next prompt, naming the field."""
    term = Terminal(tmp_path, copier_command(template_src), git_init(tmp_path / "dest"))
    try:
        term.wait_for("Model id:")
        term.type("tty_remote")
        term.wait_for("Local model folder")
        term.type(str(tiny_models("remote_vlm")))
        asked = term.wait_for("Allow it to run?")
        term.type("n")  # copier checks the next question's default at once: the probe would run the code
        term.wait_for("error: trust_remote_code: config.json has auto_map")
        refused = term.wait_for("COPY-EXITED-")
    finally:
        term.close()
    assert "The folder's own Python code defines the model (config.json: auto_map," in asked
    assert all(len(line) < COLUMNS for line in _prompt_lines(asked, str(tiny_models("remote_vlm"))))
    assert "Probe findings" not in refused and "Traceback" not in refused  # nothing ran
    assert not changed_paths(tmp_path / "dest")  # nothing written


def broken_inside_a_word(screen: str, *, skip: tuple[str, ...]) -> list[str]:
    """Rows the terminal wrapped in the middle of a word: a full row ending in a letter and a next row going on."""
    rows = screen.splitlines()
    return [f"{a!r} / {b!r}" for a, b in zip(rows, rows[1:], strict=False)
            if len(a) >= COLUMNS and a[-1] != " " and b[:1] not in ("", " ") and not any(s in a for s in skip)]


@pytest.mark.tier2
def test_interactive_copy_that_trains_ends_with_a_short_summary_no_word_broken(
        tmp_path: Path, tiny_models, template_src: Path, mm_home: Path) -> None:
    """Issue 34: the copy a person watches in an 80-column terminal ends with at most 15 lines (verdict, losses, one
    line per proof, report, log) and no line of ours is broken inside a word; the figures are REPORT.md's."""
    model = tiny_models("qwen2_5_vl")
    dest = mm_checkout(mm_home, tmp_path)
    term = Terminal(tmp_path, copier_command(template_src), dest)
    try:
        answer_up_to_the_smoke(term, "tty_ok", model)
        term.wait_for("COPY-EXITED-", timeout_s=900)
        screen = term.screen()
    finally:
        term.close()
    print(screen)
    assert "COPY-EXITED-0" in screen
    # copier's own echo of the task's command line (" > Running task 1 of 1: PYTHONPATH=...") is not ours to wrap
    assert not broken_inside_a_word(screen, skip=(" > Running task", str(model), sys.executable)), (
        broken_inside_a_word(screen, skip=(" > Running task", str(model), sys.executable)))
    rows = screen.splitlines()
    first = next(i for i, row in enumerate(rows) if row.startswith("smoke[framework] PASS: loss "))
    last = next(i for i, row in enumerate(rows) if row.startswith("full log: "))
    assert last - first + 1 <= 15, "\n".join(rows[first:last + 1])
    assert "report: examples/tty_ok/REPORT.md" in rows[first:last]
    assert "KiB" not in "\n".join(rows[first:last + 1])  # the memory table is the report's
    assert "- verified: loss equivalence: step-1 loss" in (dest / "examples/tty_ok/REPORT.md").read_text()

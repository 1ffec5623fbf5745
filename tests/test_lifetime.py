"""No process started by a copy outlives it (``hooks.lifetime``), however the copy ends.

Every process a copy starts carries ``MSMM_OWNER_PID=<copier's pid>`` in its environment, which is
how these tests find them: the probe (with the copy-time data evidence), the post-generation task,
the smoke's torchrun and trainer or contract ranks. Each case ends
a real ``copier copy`` at one stage (``kill -9`` of copier alone, which no child hears, or a
terminal's Ctrl-C) and checks that none of them is alive 10 s later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hooks.lifetime import OWNER_ENV, pid_alive
from tests.copier_run import mm_checkout

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

GRACE_S = 10


def copy_processes(owner: int) -> list[str]:
    """``pid: command`` of every live process whose environment names ``owner`` as its owner."""
    marker = f"{OWNER_ENV}={owner}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == owner:
            continue
        try:
            environ = (proc / "environ").read_bytes()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in environ.split(b"\0") and pid_alive(int(proc.name)):
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def start_copy(dest: Path, template: Path, model: Path, model_id: str, *extra: str) -> subprocess.Popen[str]:
    """``copier copy --defaults`` with tasks, in a session of its own (so a Ctrl-C reaches only it)."""
    cmd = [sys.executable, "-m", "copier", "copy", "--trust", "--defaults", "--quiet", "-d", f"model_id={model_id}",
           "-d", f"model_path={model}", "-d", f"python={sys.executable}", *extra, str(template), str(dest)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def wait_for(what: Callable[[], bool], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "the copy never reached the stage"
        time.sleep(0.05)


def running(owner: int, text: str) -> Callable[[], bool]:
    return lambda: any(text in line for line in copy_processes(owner))


def assert_nothing_left(owner: int) -> None:
    deadline = time.monotonic() + GRACE_S
    left = copy_processes(owner)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = copy_processes(owner)
    assert not left, "alive 10 s after the copy ended:\n" + "\n".join(left)


def end(copier: subprocess.Popen[str], how: str) -> None:
    if how == "kill":
        copier.kill()  # SIGKILL to copier alone: no child is told anything
    else:
        os.killpg(copier.pid, signal.SIGINT)  # Ctrl-C at a terminal: copier's foreground process group
    copier.communicate(timeout=60)


@pytest.fixture(scope="module")
def checkout(mm_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mm_checkout(mm_home, tmp_path_factory.mktemp("mm-lifetime"))


def _smoke_log(model_id: str) -> Path:
    return Path(os.environ["MSMM_CACHE"]) / "smoke" / model_id / "smoke_trainer.log"


STAGES: dict[str, Callable[[int, Path, str], Callable[[], bool]]] = {
    # the probe is running
    "probe": lambda owner, dest, model_id: running(owner, "hooks.probe"),
    # copier renders: the scaffold appears; postgen may not have started yet
    "render": lambda owner, dest, model_id: lambda: (dest / "examples" / model_id).is_dir(),
    # the trainer is training
    "smoke": lambda owner, dest, model_id: lambda: "iteration" in (
        _smoke_log(model_id).read_text(errors="replace") if _smoke_log(model_id).is_file() else ""),
}


FULL = pytest.mark.full_matrix  # CI: a kill at the probe and at the smoke


@pytest.mark.tier2
@pytest.mark.parametrize(("stage", "how"), [("probe", "kill"), pytest.param("render", "kill", marks=FULL),
                                            ("smoke", "kill"), pytest.param("smoke", "ctrl-c", marks=FULL)])
def test_a_copy_ended_at_a_stage_leaves_no_process(stage: str, how: str, checkout: Path, tiny_models,
                                                   template_src: Path) -> None:
    model_id = f"life_{stage}_{how.replace('-', '')}"
    copier = start_copy(checkout, template_src, tiny_models("qwen2_5_vl"), model_id)
    try:
        wait_for(STAGES[stage](copier.pid, checkout, model_id))
    finally:
        end(copier, how)
    assert_nothing_left(copier.pid)


@pytest.mark.tier2
def test_a_copy_stopped_by_a_later_answer_leaves_no_process(checkout: Path, tiny_models, template_src: Path,
                                                            tmp_path: Path) -> None:
    """The probe ran; then a bad data_json answer ends copier before rendering."""
    copier = start_copy(checkout, template_src, tiny_models("qwen2_5_vl"), "life_bad_answer",
                        "-d", f"data_json={tmp_path / 'missing.json'}")
    out, _ = copier.communicate(timeout=300)
    assert copier.returncode != 0 and "data_json" in out, out[-2000:]
    assert_nothing_left(copier.pid)


@pytest.mark.tier2
def test_a_failed_probe_leaves_no_process(checkout: Path, tmp_path: Path, template_src: Path) -> None:
    model = tmp_path / "unknown_model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "no_such_vlm", "architectures": ["NoSuchVLM"]}')
    copier = start_copy(checkout, template_src, model, "life_probe_error")
    out, _ = copier.communicate(timeout=300)
    assert copier.returncode != 0, out[-2000:]
    assert_nothing_left(copier.pid)


def test_contract_smoke_ended_by_ctrl_c_leaves_no_process(tmp_path: Path, tiny_models, template_src: Path) -> None:
    """Outside a checkout the smoke is the contract smoke: its ranks go with the copy too."""
    from tests.copier_run import git_init

    dest = git_init(tmp_path / "dest")
    copier = start_copy(dest, template_src, tiny_models("qwen2_5_vl"), "life_contract")
    try:
        wait_for(running(copier.pid, "hooks.smoke.contract --worker"))
    finally:
        end(copier, "ctrl-c")
    assert_nothing_left(copier.pid)

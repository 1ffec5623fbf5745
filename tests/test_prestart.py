"""Prestarted trainer ranks (hooks/smoke/prestart.py): a rank runs the trainer it was given with the go
file's argv and environment, a release ends it, a claim takes only a launch that fits, and (with a
real torchrun on a stand-in trainer) a smoke adopts the launch and reads its log and exit code.
The real trainer is adopted in tier 2 (tests/test_framework.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hooks import env_with_hooks
from hooks.smoke import prestart

# Test double for mindspeed_mm/fsdp/train/trainer.py: an import header, then a main that reports.
STAND_IN_TRAINER = textwrap.dedent("""
    import os
    os.environ["HEADER_RAN_IN"] = str(os.getpid())
    import json
    import sys
    import time


    def main():
        rank = os.environ.get("RANK", "0")
        print(f"stand-in trainer rank {rank} args {sys.argv[1:]}", flush=True)
        with open(f"ran.{rank}.json", "w") as out:
            json.dump({"argv": sys.argv, "header_pid": os.environ["HEADER_RAN_IN"], "pid": str(os.getpid()),
                       "from_go": os.environ.get("FROM_GO"), "path0": sys.path[0]}, out)
        world = int(os.environ.get("WORLD_SIZE", "1"))
        for _ in range(200):  # fail only once every rank has reported: torchrun stops the others on a failure
            if all(os.path.exists(f"ran.{r}.json") for r in range(world)):
                break
            time.sleep(0.05)
        sys.exit(int(os.environ.get("STAND_IN_EXIT", "0")))


    if __name__ == "__main__":
        main()
""")


@pytest.fixture
def stand_in_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder that passes for a MindSpeed-MM checkout (with MindSpeed core) around the stand-in trainer."""
    monkeypatch.setenv("MSMM_CACHE", str(tmp_path / "cache"))
    dest = tmp_path / "co"
    trainer = dest / "mindspeed_mm" / "fsdp" / "train" / "trainer.py"
    trainer.parent.mkdir(parents=True)
    trainer.write_text(STAND_IN_TRAINER)
    (tmp_path / "core" / "mindspeed").mkdir(parents=True)
    monkeypatch.setenv("MINDSPEED_HOME", str(tmp_path / "core"))
    return dest


def _rank(trainer: Path, state: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(Path(prestart.__file__)), str(trainer), str(state)],
                            env=env_with_hooks(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_rank_runs_the_trainer_with_the_go_args_in_its_warm_process(stand_in_checkout: Path) -> None:
    trainer = stand_in_checkout / "mindspeed_mm" / "fsdp" / "train" / "trainer.py"
    state = prestart.state_dir_for(stand_in_checkout)
    state.mkdir(parents=True)
    rank = _rank(trainer, state)
    time.sleep(0.5)
    assert rank.poll() is None  # waiting for the go
    prestart.go({"state": str(state)}, ["smoke.yaml"], {"FROM_GO": "yes"}, stand_in_checkout)
    out, _ = rank.communicate(timeout=60)
    assert rank.returncode == 0, out
    ran = json.loads((stand_in_checkout / "ran.0.json").read_text())
    assert ran["argv"] == [str(trainer), "smoke.yaml"] and ran["from_go"] == "yes"
    assert ran["header_pid"] == ran["pid"]  # the header ran in the process that then trained
    assert ran["path0"] == str(trainer.parent)


def test_a_released_rank_exits_without_training(stand_in_checkout: Path) -> None:
    trainer = stand_in_checkout / "mindspeed_mm" / "fsdp" / "train" / "trainer.py"
    state = prestart.state_dir_for(stand_in_checkout)
    state.mkdir(parents=True)
    rank = _rank(trainer, state)
    (state / "launch.json").write_text("{}")
    prestart.release(stand_in_checkout)
    rank.communicate(timeout=60)
    assert rank.returncode == 0 and not list(stand_in_checkout.glob("ran.*.json"))


def _fake_launch(dest: Path, pid: int, *, nproc: int = 2, started: float | None = None) -> Path:
    state = prestart.state_dir_for(dest)
    state.mkdir(parents=True, exist_ok=True)
    launch = {"pid": pid, "fit": prestart._fit_key(dest, None, "cpu", nproc), "cmd": ["torchrun"],
              "started": time.time() if started is None else started}
    (state / "launch.json").write_text(json.dumps(launch))
    return state


def test_claim_takes_a_fitting_launch_once(stand_in_checkout: Path) -> None:
    waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # stands in for the sh
    try:
        _fake_launch(stand_in_checkout, waiting.pid)
        assert prestart.claim(stand_in_checkout, None, "cpu", 2) is not None
        assert prestart.claim(stand_in_checkout, None, "cpu", 2) is None  # already taken
    finally:
        waiting.kill()
        waiting.wait()


@pytest.mark.parametrize("misfit", ["nproc", "late"])
def test_claim_releases_a_launch_that_does_not_fit(stand_in_checkout: Path, misfit: str) -> None:
    waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = time.time() - prestart.WAIT_S if misfit == "late" else None  # ranks about to give up
        state = _fake_launch(stand_in_checkout, waiting.pid, nproc=4 if misfit == "nproc" else 2, started=started)
        assert prestart.claim(stand_in_checkout, None, "cpu", 2) is None
        assert json.loads((state / "go.json").read_text()) == {"release": True}
    finally:
        waiting.kill()
        waiting.wait()


def test_no_claim_when_nothing_was_prestarted(stand_in_checkout: Path) -> None:
    assert prestart.claim(stand_in_checkout, None, "cpu", 2) is None


@pytest.mark.parametrize("exit_code", [0, 3])
def test_a_smoke_adopts_a_real_torchrun_launch(stand_in_checkout: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, exit_code: int) -> None:
    """start -> claim -> adopt_trainer, with the real torchrun and its two ranks around the stand-in trainer."""
    from hooks.framework.environment import framework_env
    from hooks.smoke.trainer_run import adopt_trainer

    monkeypatch.setattr("hooks.framework.environment.detect_device", lambda: "cpu")
    assert prestart.start(stand_in_checkout) is True
    assert prestart.start(stand_in_checkout) is False  # one launch per checkout at a time
    launch = prestart.claim(stand_in_checkout, tmp_path / "core", "cpu", 2)
    assert launch is not None
    env = framework_env(stand_in_checkout, tmp_path / "core", cpu_bridges=True)
    env.update(FROM_GO="yes", STAND_IN_EXIT=str(exit_code))
    run = adopt_trainer(launch, stand_in_checkout, tmp_path / "smoke.yaml", log_path=tmp_path / "log" / "smoke.log",
                        env=env, timeout_s=120)
    assert run.returncode == (0 if exit_code == 0 else 1) and not run.timed_out, run.log_text
    assert "stand-in trainer rank 0" in run.log_text and "stand-in trainer rank 1" in run.log_text
    log = (tmp_path / "log" / "smoke.log").read_text()
    assert "prestarted" in log.splitlines()[0] and "stand-in trainer rank 1" in log
    for rank in (0, 1):
        ran = json.loads((stand_in_checkout / f"ran.{rank}.json").read_text())
        assert ran["argv"][1:] == [str((tmp_path / "smoke.yaml").resolve())] and ran["from_go"] == "yes"


def test_a_failed_probe_releases_the_ranks_it_prestarted(stand_in_checkout: Path, tmp_path: Path) -> None:
    """copier stops on a probe failure (here: a model_type transformers does not know): nobody will adopt."""
    model = tmp_path / "unknown_model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "no_such_vlm", "architectures": ["NoSuchVLM"]}')
    done = subprocess.run([sys.executable, "-m", "hooks.probe", str(model), "--json",
                           "--prestart-trainer", str(stand_in_checkout)],
                          env=env_with_hooks(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0
    state = prestart.state_dir_for(stand_in_checkout)
    assert json.loads((state / "go.json").read_text()) == {"release": True}
    deadline = time.monotonic() + 60
    while not (state / "rc").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (state / "rc").read_text().strip() == "0"  # the ranks left without training
    assert not list(stand_in_checkout.glob("ran.*.json"))

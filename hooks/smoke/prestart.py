"""Prestarted trainer ranks: the smoke's ``torchrun`` launched while copier is still probing.

Both smoke ranks spend ~7 s (2-core VM) importing the trainer's modules before they read the
config, and nothing in that depends on the generated files. So the probe starts the documented
launch early (``torchrun --nproc_per_node N <this file> <trainer.py>``): each rank runs the
trainer's import header, then waits for a go file. The smoke, when it would launch the trainer,
*adopts* the prestarted launch instead: it writes the go file (the smoke config and its
environment), and each rank runs the unmodified ``trainer.py`` with ``runpy`` exactly as torchrun
would have, in the process that already holds the imports.

Best effort in both directions: a launch that is not adopted before its deadline (a copy without
smoke, ``--skip-tasks``, a long interactive session) exits quietly; a launch that cannot be
adopted (gone, or started for another interpreter, device or rank count) is released and the
smoke launches cold. The ranks follow the copier process that started them (``hooks.lifetime``):
a copy that ends early, however, takes them with it.
Nothing is written into the checkout: state lives under ``$MSMM_CACHE/prestart/``.

A speed aid for CPU hosts, where the smoke's imports are most of its time: on a host with an
NPU or GPU driver it stays off unless asked for (ranks must not take an accelerator on a shared
node while a person answers questions). ``MSMM_PRESTART=0`` turns it off everywhere, ``=1`` on
everywhere (``wanted``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import runpy
import sys
import time
from pathlib import Path

WAIT_S = 240  # how long ranks wait for the go file once their imports are done
ADOPT_MARGIN_S = 30  # adopt only a launch that will still be waiting this much longer
_POLL_S = 0.05
NICE = 10  # the launch yields to the probe, which copier waits on (it cannot lower it again after the go)


# --- the rank side (stdlib only: this file runs as torchrun's script) ----------------------------


def _import_header(trainer: Path) -> None:
    """Run the trainer's top-level statements up to its first definition: its imports and their setup."""
    source = trainer.read_text(encoding="utf-8")
    header = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If)):
            break
        header.append(node)
    code = compile(ast.Module(body=header, type_ignores=[]), str(trainer), "exec")
    exec(code, {"__name__": "__msmm_prestart__", "__file__": str(trainer)})  # noqa: S102 - the trainer's own lines


def _wait_for_go(go_file: Path, deadline: float) -> dict | None:
    while time.time() < deadline:
        if go_file.is_file():
            return json.loads(go_file.read_text(encoding="utf-8"))
        time.sleep(_POLL_S)
    return json.loads(go_file.read_text(encoding="utf-8")) if go_file.is_file() else None


def _follow_owner() -> None:
    """``hooks.lifetime.follow_owner``, loaded by path: this script runs before ``hooks`` is importable."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("msmm_lifetime", Path(__file__).resolve().parents[1] / "lifetime.py")
    if spec is not None and spec.loader is not None:
        lifetime = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(lifetime)
        lifetime.follow_owner()


def _install_observer() -> None:
    """``hooks/smoke/observer``'s hooks, in a rank whose interpreter started before the smoke asked for them."""
    import importlib.util

    path = Path(__file__).resolve().parent / "observer" / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("msmm_observer", path)
    module = importlib.util.module_from_spec(spec)
    os.environ["MSMM_OBSERVE_NO_CHAIN"] = "1"  # the path's sitecustomize ran at start already
    spec.loader.exec_module(module)


def rank_main(trainer: Path, state_dir: Path) -> int:
    """One torchrun worker: import, wait, then run ``trainer.py`` as ``__main__`` with the smoke's argv."""
    _follow_owner()  # first: a copy that ends while the ranks import must not wait for them
    sys.path[0] = str(trainer.parent)  # what torchrun gives the trainer script, instead of hooks/
    try:
        _import_header(trainer)
    except Exception:  # noqa: BLE001 - the real run below raises it again, in the log, if it matters
        pass
    go = _wait_for_go(state_dir / "go.json", time.time() + WAIT_S)
    if go is None or go.get("release"):
        return 0
    os.environ.update(go["env"])
    if os.environ.get("MSMM_OBSERVE"):  # started without the observer on its path: install it now
        _install_observer()
    os.chdir(go["cwd"])
    sys.argv = [str(trainer), *go["args"]]
    runpy.run_path(str(trainer), run_name="__main__")
    return 0


# --- the launching side ---------------------------------------------------------------------------


def state_dir_for(dest: Path) -> Path:
    """One prestarted launch per checkout, outside it."""
    from hooks import cache_root

    digest = hashlib.sha256(str(Path(dest).resolve()).encode()).hexdigest()[:12]
    return cache_root() / "prestart" / digest


def _fit_key(dest: Path, mindspeed_home: Path | None, device: str, nproc: int) -> list[str]:
    """What a launch's interpreters were started with: a smoke may adopt it only when all of it agrees."""
    home = str(Path(mindspeed_home).resolve()) if mindspeed_home else ""
    return [sys.executable, str(Path(dest).resolve()), home, device, str(nproc)]


def wanted() -> bool:
    """``MSMM_PRESTART``: "0" never, "1" always, unset or "auto" on hosts without an NPU/GPU driver only."""
    setting = os.environ.get("MSMM_PRESTART", "auto").strip().lower()
    if setting in ("0", "off", "false", "no"):
        return False
    if setting in ("1", "on", "true", "yes"):
        return True
    from hooks.framework.environment import no_accelerator_installed

    return no_accelerator_installed()


def start(dest: Path, *, nproc: int | None = None) -> bool:
    """Launch the prestarted ranks for a smoke at ``dest``; False when the framework cannot run there.

    Cheap for the caller (one ``sh`` started, nothing imported): the probe calls it before its own
    imports, so both use the machine's cores at once. The ranks use this interpreter, as the smoke does.
    """
    import shlex
    import subprocess

    from hooks.framework.environment import (
        TRAINER_ENTRY,
        detect_device,
        framework_env,
        framework_unavailable,
        free_port,
    )
    from hooks.lifetime import pid_alive

    dest = Path(dest).resolve()
    why, mindspeed_home = framework_unavailable(dest)
    if why or os.name != "posix" or not wanted():
        return False

    state = state_dir_for(dest)
    if (state / "launch.json").is_file():
        launch = json.loads((state / "launch.json").read_text(encoding="utf-8"))
        if pid_alive(launch["pid"]) and not (state / "rc").exists():
            return False  # one is waiting already
    for name in ("go.json", "rc", "trainer.log", "launch.json", "claimed.json"):
        (state / name).unlink(missing_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    device = detect_device()
    if nproc is None:  # as the smoke will ask (hooks.framework.environment.smoke_ranks)
        from hooks.framework.environment import smoke_ranks, visible_devices

        nproc = smoke_ranks(device, visible_devices(device))
    env = framework_env(dest, mindspeed_home, cpu_bridges=device == "cpu")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
           "--master_port", str(free_port()), str(Path(__file__).resolve()), str(dest / TRAINER_ENTRY), str(state)]
    # sh keeps the exit code for the adopter, which is not the launcher's parent.
    (state / "trainer.log").touch()  # an adopter may open it before sh appends to it
    script = f"nice -n {NICE} {shlex.join(cmd)} >> trainer.log 2>&1; echo $? > rc.tmp && mv rc.tmp rc"
    proc = subprocess.Popen(["sh", "-c", script], cwd=str(state), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    launch = {"pid": proc.pid, "fit": _fit_key(dest, mindspeed_home, device, nproc), "cmd": cmd,
              "started": time.time()}
    (state / "launch.json").write_text(json.dumps(launch), encoding="utf-8")
    return True


def _write_go(state: Path, payload: dict) -> None:
    tmp = state / "go.json.tmp"
    tmp.write_text(json.dumps(payload), encoding="utf-8")
    tmp.replace(state / "go.json")  # atomic: a rank never reads half a file


def claim(dest: Path, mindspeed_home: Path | None, device: str, nproc: int) -> dict | None:
    """The prestarted launch for this smoke, taken for adoption; None (after releasing a misfit) otherwise."""
    from hooks.lifetime import pid_alive

    state = state_dir_for(dest)
    try:
        launch = json.loads((state / "launch.json").read_text(encoding="utf-8"))
        (state / "launch.json").replace(state / "claimed.json")  # no second adopter
    except (OSError, ValueError):
        return None
    waiting_until = launch["started"] + WAIT_S  # ranks wait at least this long (more after slow imports)
    usable = pid_alive(launch["pid"]) and not (state / "rc").exists()
    fits = launch["fit"] == _fit_key(dest, mindspeed_home, device, nproc)
    if fits and usable and time.time() < waiting_until - ADOPT_MARGIN_S:
        return {**launch, "state": str(state)}
    if usable:
        _write_go(state, {"release": True})
    return None


def release(dest: Path) -> None:
    """Let a waiting launch for ``dest`` exit now (no smoke will come)."""
    state = state_dir_for(dest)
    if (state / "launch.json").is_file() and not (state / "rc").exists():
        _write_go(state, {"release": True})


def go(launch: dict, args: list[str], env: dict[str, str], cwd: Path) -> None:
    """Let the claimed ranks run the trainer with ``args`` in ``env`` (torchrun's per-rank variables stay)."""
    _write_go(Path(launch["state"]), {"args": args, "env": env, "cwd": str(cwd)})


if __name__ == "__main__":  # torchrun's worker: <this file> TRAINER_PY STATE_DIR
    raise SystemExit(rank_main(Path(sys.argv[1]), Path(sys.argv[2])))

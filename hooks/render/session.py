"""The probe session: every run of the training interpreter that a copier question needs, each waited for.

The interpreter the user named (question ``python``) has torch and transformers; copier's need not. So
the probe runs there, ``python -m hooks.probe``, the only command a question starts: the model facts, the
default cluster's memory plan and, in a checkout, the data evidence, in one process; then, only for answers
other than the defaults, its ``cluster`` mode (another cluster's memory plan) and its ``lengths`` mode (the
first records' lengths against cutoff_len). Each is a short-lived process this module starts and waits for
(a timeout kills it; ``die_with_parent`` ends it with copier). Results are cached per answers, so a question
asked again never runs one twice. Nothing started here outlives its question.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from hooks import env_with_hooks
from hooks.lifetime import die_with_parent

if TYPE_CHECKING:
    from hooks.model.facts import ModelFacts

PROBE_RUNS: dict[tuple[str, str, bool, str], tuple[int, str, str]] = {}  # (model, python, consent, builder)


MEMORY_DEFAULTS: dict[tuple[str, str, bool], str] = {}  # the probe's memory plan for the default cluster


EVIDENCE: dict[tuple[str, str, bool], str] = {}  # the data evidence the probe gathered in the destination checkout


PROBE_TIMEOUT_S = float(os.environ.get("MSMM_PROBE_TIMEOUT_S", "600"))  # model code that hangs on import/build



def run_probe(model_path: str, python: str, trust: bool, extra: tuple[str, ...] = (),
               builder: str = "") -> tuple[int, str, str]:
    """The probe CLI in the hooks interpreter, run once per (model, interpreter, consent): exit code,
    the facts' JSON (from a file: the model's own code may print on stdout), stderr.

    ``extra``: ``(CHECKOUT, MODEL_ID, PYTHON)``, with which the same process then gathers the data evidence
    for the data-branch question (``hooks.probe --data-evidence``). A probe past ``MSMM_PROBE_TIMEOUT_S`` is
    killed; it starts nothing that outlives it. ``builder``: the sample builder answer (``hooks.data.builder``);
    the memory plan and evidence of the latest run stand.
    """
    key = (model_path, python, trust, builder)
    if key not in PROBE_RUNS:
        folder = Path(os.path.expanduser(model_path)).resolve()
        with tempfile.TemporaryDirectory(prefix="msmm-probe-") as tmp:
            out, memory, evidence = (Path(tmp) / name for name in ("facts.json", "memory.json", "evidence.json"))
            cmd = [python, "-m", "hooks.probe", str(folder), "--out", str(out), "--no-timings",
                   "--memory-out", str(memory), *(("--data-evidence", *extra, str(evidence)) if extra else ())]
            if trust:
                cmd.append("--trust-remote-code")
            if builder:
                cmd += ["--sample-builder", builder]  # the probe resolves it (hooks.data.builder.resolve)
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, env=env_with_hooks(), check=False,
                                      preexec_fn=die_with_parent, timeout=PROBE_TIMEOUT_S)
            except OSError as err:
                return 127, "", str(err)
            except subprocess.TimeoutExpired:
                return 124, "", (f"error: model_path: {folder}: the probe did not finish in {PROBE_TIMEOUT_S:.0f} s "
                                 "(the model's code hangs on import or build?); fix the folder's code, or raise "
                                 "MSMM_PROBE_TIMEOUT_S for a model this large")
            facts = out.read_text(encoding="utf-8") if out.is_file() else ""
            PROBE_RUNS[key] = done.returncode, facts, done.stderr
            if memory.is_file():
                MEMORY_DEFAULTS[key[:3]] = memory.read_text(encoding="utf-8")
            if evidence.is_file():
                EVIDENCE[key[:3]] = evidence.read_text(encoding="utf-8")
    return PROBE_RUNS[key]



def probe_extras(model_id: str, python: str, dst_path: str) -> tuple[str, ...]:
    """The destination checkout, model id and interpreter the data evidence is gathered for (the probe checks
    that the destination is a checkout the framework runs in)."""
    if not (dst_path and model_id):
        return ()
    return str(Path(os.path.expanduser(dst_path)).resolve()), str(model_id), os.path.expanduser(str(python))



def facts_of(model_path: str, python: str, trust_remote_code: bool, builder: str = "") -> ModelFacts | None:
    """The facts of a probe already run (cached), None when it failed."""
    from hooks.model.facts import ModelFacts

    code, out, _ = run_probe(str(model_path), str(python), bool(trust_remote_code), builder=str(builder or ""))
    return ModelFacts.from_dict(json.loads(out)) if code in (0, 1) and out.strip() else None



@functools.cache
def memory_plan(model_path: str, python: str, trust_remote_code: bool, devices_per_node: int,
                device_memory_gb: float, nodes: int, cutoff_len: int = 0, trained_submodule: str = "") -> str:
    """The memory plan for the answered cluster and samples of ``cutoff_len`` tokens (the probe's ``cluster``
    mode, ``hooks.model.cluster``, in the training interpreter, the model built on the meta device), frozen
    into the answers file; ``trained_submodule``: the sub-model the probe planned (its facts' name, which a
    checkout's plugin may have chosen), planned here too; "{}" when it cannot run
    (an update whose model folder is gone keeps the plan it recorded, or renders without one)."""
    from hooks.model.memory import CUTOFF_LEN, DEFAULT_CLUSTER, SUMMARY_KEYS

    cluster = {"devices_per_node": int(devices_per_node), "device_memory_gb": float(device_memory_gb),
               "nodes": int(nodes)}
    default = MEMORY_DEFAULTS.get((str(model_path), str(python), bool(trust_remote_code)), "{}")
    if cluster == DEFAULT_CLUSTER and default != "{}":  # the probe planned it while it had the model built
        return default
    folder = Path(os.path.expanduser(str(model_path))).resolve()
    if not (folder / "config.json").is_file():
        return "{}"
    cmd = [str(python), "-m", "hooks.probe", "cluster", str(folder), "--json",
           "--devices-per-node", str(devices_per_node), "--device-memory-gb", str(device_memory_gb),
           "--nodes", str(nodes), "--cutoff-len", str(int(cutoff_len) or CUTOFF_LEN),
           *(["--trained-submodule", str(trained_submodule)] if trained_submodule else [])]
    try:
        done = subprocess.run([*cmd, *(["--trust-remote-code"] if trust_remote_code else [])], capture_output=True,
                              text=True, env=env_with_hooks(), check=False, preexec_fn=die_with_parent,
                              timeout=PROBE_TIMEOUT_S)
        plan = json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        plan = {}
    return json.dumps({k: plan[k] for k in SUMMARY_KEYS if k in plan}, sort_keys=True)



LENGTHS: dict[tuple[str, ...], str] = {}



def cutoff_error(data_json: str, media_root: str, data_fields: str, model_path: str, python: str,
                  trust_remote_code: bool, model_facts: object = None) -> str:
    """The first records' lengths with the model's processor against the YAML's cutoff_len, in the training
    interpreter (cached per answers)."""
    if not str(data_json or "").strip() or not model_path:
        return ""
    from hooks.render.files import cutoff_len

    cutoff = cutoff_len(model_facts)  # type: ignore[arg-type] - an answer: the mapping copier holds
    key = (str(data_json), str(media_root), str(data_fields), str(model_path), str(python), str(trust_remote_code),
           cutoff)
    if key not in LENGTHS:
        cmd = [os.path.expanduser(str(python)), "-m", "hooks.probe", "lengths",
               str(Path(os.path.expanduser(str(model_path))).resolve()),
               str(Path(os.path.expanduser(str(data_json))).resolve()), "--fields", str(data_fields or "")]
        cmd += ["--media-root", os.path.expanduser(str(media_root))] if str(media_root or "").strip() else []
        cmd += ["--trust-remote-code"] if trust_remote_code else []
        cmd += ["--cutoff", str(cutoff)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env_with_hooks(), check=False,
                                  preexec_fn=die_with_parent, timeout=PROBE_TIMEOUT_S)
            tail = (done.stderr.strip().splitlines() or [""])[-1]
            LENGTHS[key] = tail[len("error: "):] if done.returncode == 1 and tail.startswith("error: ") else ""
        except (OSError, subprocess.TimeoutExpired):
            LENGTHS[key] = ""  # the probe has checked the interpreter; the smoke reports what is left
    return LENGTHS[key]


"""The data evidence at copy time: each candidate data path rendered as the copy would write it, and checked.

The data-branch question's default is the first candidate whose batches equal the model's own
(``hooks.data.parity``): MindSpeed-MM's in-repo templates for the family (branch a), then the template
derived from the model's own chat template (branch b). A candidate is rendered here, with the same
partial and the destination checkout's framework facts the copy itself would use, so the evidence is
about the YAML and plugins the copy would write. None matching recommends branch c, with each
candidate's first difference.

In a MindSpeed-MM checkout the probe hands its process over once its facts are written
(``fork_evidence``); copier waits for that evidence before it asks for the data branch.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hooks.data.candidates import Candidate, candidates, recommend
from hooks.data.parity import (
    CHECK_CODE,
    WEIGHT_SUFFIXES,
    ParityResult,
    _cache_dir,
    _enter_framework,
    _load_cached,
    _result,
    _stamp,
    _store,
    data_plugin_files,
    parity_key,
    run_check,
    spec_for,
)

EARLY_TIMEOUT_S = 300  # the forked evidence run's deadline (copier waits at most that long)


def candidate_config(scratch: Path, candidate: Candidate, answers: dict[str, Any], dest: Path) -> dict[str, Any]:
    """The YAML the copy would write for ``candidate`` into checkout ``dest`` (same partial, that checkout's
    framework facts), its data plugins in ``scratch``."""
    import yaml

    from hooks.framework.checkout import facts
    from hooks.render.files import render_data_plugin, render_template_file

    context = {"model_id": answers["model_id"], "model_facts": answers["model_facts"],
               "model_path": answers["model_path"], "trust_remote_code": bool(answers.get("trust_remote_code")),
               "data_branch": candidate.branch, "chat_template": candidate.template,
               "collator_id": candidate.collator_id, "data_json": "", "media_root": "",
               "framework": facts(dest)}
    config = yaml.safe_load(render_template_file("partials/config.yaml.jinja", context))
    plugins = [p for p in config["training"]["plugin"] if "/fsdp/models/" not in p]  # the model plugin is not data
    if candidate.branch == "b":
        plugins.insert(0, render_data_plugin(scratch, answers["model_id"], answers["model_facts"]).name)
    config["training"]["plugin"] = plugins
    return config


def evidence_key(dest: Path, model_dir: Path, model_id: str, python: str, trust: bool) -> str:
    """The copy-time evidence file's name: computable in copier's process (no torch) and in the probe."""
    model_dir = Path(model_dir).resolve()
    model_files = sorted(p for p in model_dir.iterdir() if p.is_file() and not p.name.endswith(WEIGHT_SUFFIXES))
    parts = [str(Path(dest).resolve()), str(model_dir), model_id, python, str(trust),
             *(_stamp(p) for p in model_files), *(hashlib.sha256(p.read_bytes()).hexdigest() for p in CHECK_CODE)]
    return "evidence-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def gather_evidence(dest: Path, answers: dict[str, Any], mindspeed_home: Path | None,
                    in_process: bool = False) -> dict[str, Any]:
    """Try the candidates in order until one matches; the verdicts and the recommendation."""
    facts, model_dir = answers["model_facts"], Path(answers["model_path"]).resolve()
    spec = spec_for(facts, bool(answers.get("trust_remote_code")))
    tried: list[tuple[Candidate, ParityResult]] = []
    with tempfile.TemporaryDirectory(prefix="msmm-candidates-") as tmp:  # candidate YAMLs and plugins
        scratch = Path(tmp)
        if in_process:
            _enter_framework(dest, mindspeed_home, scratch)
        for candidate in candidates(facts, answers["model_id"]):
            config = candidate_config(scratch, candidate, answers, dest)
            key = parity_key(dest, model_dir, config, data_plugin_files(config, dest, scratch), spec,
                             answers["python"])
            result = _load_cached(key)
            if result is None:
                result = (_result(_check_here(config, model_dir, spec)) if in_process else
                          run_check(dest, model_dir, config, spec, python=answers["python"],
                                    mindspeed_home=mindspeed_home, scratch=scratch))
                _store(key, result)
            result.candidate = candidate.label()
            tried.append((candidate, result))
            if result.ok or result.environment:  # an interpreter that cannot run the framework fails every one
                break
    return {"candidates": [{**asdict(c), "label": c.label(), "verdict": r.verdict, "evidence": r.headline()}
                           for c, r in tried],
            "recommended": recommend(facts, tried)}


def _check_here(config: dict[str, Any], model_dir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    try:
        from hooks.data.batch import check

        return check(config, model_dir, spec)
    except Exception as err:  # noqa: BLE001 - an error verdict with its cause (not cached)
        from hooks.data.batch import environment_cause

        return {"verdict": "error", "details": [f"could not evaluate: {type(err).__name__}: {err}"],
                "environment": environment_cause(err)}


def _detach() -> None:
    """Own session, no inherited pipes (copier stops waiting when the probe exits), low priority, a deadline."""
    import signal

    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.nice(10)
    signal.alarm(EARLY_TIMEOUT_S)  # a hung run dies: copier stops waiting and recommends without evidence


def _one_thread() -> None:
    """A forked child must not enter torch's OpenMP pool: the parent's threads are not there (it hangs)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def fork_evidence(dest: Path, answers: dict[str, Any]) -> bool:
    """Gather the evidence in a fork of this process (the probe's) and return at once; False when not started.

    The probe has just imported torch and transformers: the child reuses them. It writes the
    evidence under ``evidence_key`` and exits; it follows copier's process (``hooks.lifetime``).
    """
    from hooks.framework.environment import framework_unavailable

    dest = Path(dest).resolve()
    why, mindspeed_home = framework_unavailable(dest)
    if why or not hasattr(os, "fork"):
        return False
    target = _cache_dir() / (evidence_key(dest, Path(answers["model_path"]), answers["model_id"], answers["python"],
                                          bool(answers.get("trust_remote_code"))) + ".json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    pid_file = target.with_suffix(".pid")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        pid_file.write_text(str(pid))
        return True
    try:
        from hooks.lifetime import follow_owner

        _detach()
        follow_owner()  # copier's process: a copy that ends early takes this run with it
        _one_thread()
        evidence = gather_evidence(dest, answers, mindspeed_home, in_process=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(evidence))
        partial.replace(target)
    finally:
        pid_file.unlink(missing_ok=True)
        os._exit(0)


def wait_for_evidence(dest: Path, model_path: str, model_id: str, python: str, trust: bool,
                      timeout_s: float = EARLY_TIMEOUT_S) -> dict[str, Any] | None:
    """The evidence the probe's fork writes, once it is there (None when no run is on or it gave up)."""
    from hooks.lifetime import pid_alive

    target = _cache_dir() / (evidence_key(dest, Path(model_path), model_id, python, trust) + ".json")
    deadline = time.monotonic() + timeout_s
    while not target.is_file() and time.monotonic() < deadline:
        try:
            running = pid_alive(int(target.with_suffix(".pid").read_text()))
        except (OSError, ValueError):
            running = False
        if not running and not target.is_file():
            return None
        time.sleep(0.1)
    try:
        return json.loads(target.read_text())
    except (OSError, ValueError):
        return None


# --- after rendering: the generated scaffold -----------------------------------------------------------

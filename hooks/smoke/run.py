"""Smoke-test a generated scaffold: the real trainer when we can, the contract smoke otherwise.

In a MindSpeed-MM checkout (with MindSpeed core reachable) the generated YAML is
run through ``mindspeed_mm/fsdp/train/trainer.py`` on 2 ranks, natively on NPU/GPU
or on CPU through the run-time bridges. Anywhere else the *contract smoke* runs
the same plan with torch's ``fully_shard`` on 2 gloo ranks, and says so.

``python -m hooks.smoke .copier-answers/<model_id>.yml [--dest CHECKOUT]`` (with its report: ``hooks.report.smoke``)
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hooks import cache_root, scaffold
from hooks.framework.environment import (
    detect_device,
    framework_unavailable,
    smoke_ranks,
    visible_devices,
    world_size_one_note,
)
from hooks.model.facts import ModelFacts
from hooks.model.plan import Plan
from hooks.smoke.training_yaml import TrainingYaml
from hooks.smoke.verdict import Progress, SmokeResult
from hooks.terminal import echo

SHRINK_ABOVE_PARAMS = 20_000_000  # smaller models already fit a CPU smoke: used as they are


@dataclass
class SmokeInputs:
    """Where the smoke's model and data come from, for the report."""

    model_dir: Path
    model_note: str
    data_json: Path
    media_root: Path
    data_note: str
    work_dir: Path


def _model_key(model_dir: Path) -> str:
    from hooks.model.shrink import SHRINK_VERSION

    config = model_dir / "config.json"
    stamp = f"{model_dir.resolve()}:{config.stat().st_mtime_ns}:{SHRINK_VERSION}"
    return hashlib.sha256(stamp.encode()).hexdigest()[:12]


def work_dir(model_id: str) -> Path:
    """The smoke's folder for a model, outside the checkout: its config, log and ``smoke_result.json``."""
    return cache_root() / "smoke" / model_id


def prepare_inputs(answers: dict[str, Any], model_id: str) -> SmokeInputs:
    """Shrink the model (when large) and pick the data: the user's JSON or a generated sample."""
    work = work_dir(model_id)
    work.mkdir(parents=True, exist_ok=True)
    model_dir = Path(os.path.expanduser(answers["model_path"])).resolve()
    facts = ModelFacts.of(answers.get("model_facts"))
    params = facts.num_parameters if facts else 0
    if params > SHRINK_ABOVE_PARAMS:
        from hooks.model.shrink import shrink_model_dir

        shrunk = cache_root() / "shrunk" / _model_key(model_dir)
        if not (shrunk / "config.json").is_file():
            shrink_model_dir(model_dir, shrunk, trust_remote_code=bool(answers.get("trust_remote_code")))
        model_note = f"shrunk copy of {model_dir} ({params:,} parameters at full size)"
        model_dir = shrunk
    else:
        model_note = f"{model_dir} as is ({params:,} parameters: small enough, not shrunk)"
    if answers.get("data_json"):
        data_json = Path(os.path.expanduser(answers["data_json"])).resolve()
        media_root = Path(os.path.expanduser(answers.get("media_root") or str(data_json.parent))).resolve()
        data_note = f"{data_json} (media root {media_root})"
    else:
        from hooks.data.audio import media_taken
        from hooks.data.sample import build_demo_dataset, demo_media

        media = media_taken(facts, str(answers.get("data_branch") or "")) if facts else ["image"]
        data_json = build_demo_dataset(work / "data", media=media)
        media_root = data_json.parent
        data_note = f"generated sample: {demo_media(media)}"
    return SmokeInputs(model_dir, model_note, data_json, media_root, data_note, work)


def run_smoke(
    dest: Path, answers: dict[str, Any], *, iters: int = 5, nproc: int | None = None,
    progress: Progress | None = None
) -> tuple[SmokeResult, SmokeInputs, str]:
    """Run the best smoke available at ``dest``; returns the result, its inputs and the mode note.

    ``nproc`` None: ``smoke_ranks`` for the devices present (2 on CPU, one per CUDA/NPU device up to 2).

    With ``progress`` (a terminal) the mode note is printed before the run and each iteration as
    it is logged; the full output of the ranks goes to the log file only (``result.log_path``).
    """
    model_id = answers["model_id"]
    inputs = prepare_inputs(answers, model_id)
    facts = ModelFacts.from_dict(answers["model_facts"])
    config_yaml = dest / scaffold.config_yaml(model_id)
    why, mindspeed_home = framework_unavailable(dest)
    if not why:
        from hooks.smoke.trainer_run import run_framework_smoke

        device = detect_device()
        nproc = nproc or smoke_ranks(device, visible_devices(device))
        one = world_size_one_note(nproc)
        note = (f"framework smoke: real MindSpeed-MM trainer (mindspeed_mm/fsdp/train/trainer.py), {nproc} "
                f"rank{'s' if nproc > 1 else ''} on {device}"
                f"{' through the CPU run-time bridges in hooks/smoke/bridges' if device == 'cpu' else ''}"
                f"{f'; {one}' if one else ''}")
        if progress is not None:
            echo(note)
        result = run_framework_smoke(
            dest, config_yaml,
            model_dir=inputs.model_dir, data_json=inputs.data_json, media_root=inputs.media_root,
            work_dir=inputs.work_dir, iters=iters, nproc=nproc, mindspeed_home=mindspeed_home, device=device,
            progress=progress, sdpa=facts.attention.get("sdpa", True),
            ignored_settings=str(answers.get("ignored_settings") or "stop"),
            attributes=facts.processor.model_attributes or {}, stage=facts.trained_submodule,
        )
        result.device, result.ranks = device, nproc
        return result, inputs, note
    from hooks.smoke.contract import run_contract_smoke

    plans = contract_plans(config_yaml, facts.plan)
    nproc = nproc or 2  # the contract smoke runs gloo ranks on the host
    note = (f"contract smoke ({why}): torch fully_shard and recompute per the generated YAML on {nproc} gloo "
            "ranks, real HF model")
    if progress is not None:
        echo(note)
    result = run_contract_smoke(
        inputs.model_dir, plans["apply_modules"], freeze=plans["freeze"], recompute=plans["recompute"],
        data_json=inputs.data_json, media_root=inputs.media_root, steps=iters, nproc=nproc,
        trust_remote_code=bool(answers.get("trust_remote_code")), progress=progress,
        log_path=inputs.work_dir / "contract_smoke.log", stage=facts.trained_submodule,
        experts=plans["experts"],
    )
    result.device, result.ranks = "cpu", nproc
    return result, inputs, note


def contract_plans(config_yaml: Path, plan: Plan) -> dict[str, list[str]]:
    """FSDP units, freeze and recompute targets and the expert modules as the generated YAML states them (the
    probe's plan without one).

    Reading the YAML means the contract smoke checks what the user will train, edits included.
    """
    if not config_yaml.is_file():
        return {"apply_modules": plan.apply_modules, "freeze": [], "recompute": plan.recompute_modules,
                "experts": plan.ep_modules}
    cfg = TrainingYaml.read(config_yaml)
    return {"apply_modules": cfg.fsdp_units, "freeze": cfg.freeze, "recompute": cfg.recomputed,
            "experts": cfg.expert_units}

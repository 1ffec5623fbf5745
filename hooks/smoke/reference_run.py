"""The loss reference's process beside the trainer, and the files it shares with the smoke.

``hooks.smoke.reference`` computes the model's own objective; this module runs it where the smoke needs it: started
niced while the trainer runs (it imports and builds the model's own class meanwhile), it replays as soon as every
rank has recorded its batches, and it writes what the smoke's own process would otherwise import torch for (the
model's shapes, whether experts no token reaches get a gradient).

``python -m hooks.smoke.reference_run --spec SPEC.json --out RESULT.json`` (started by ``hooks.smoke.trainer_run``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hooks.model.stages import TrainedStage
from hooks.smoke.reference import (
    Equivalence,
    ReferenceSpec,
    build_reference,
    compare,
    param_findings,
    replay,
    trainer_figures,
    training_defaults,
)
from hooks.smoke.training_yaml import TrainingYaml

GO, STOP = "go", "stop"  # what the smoke writes into the reference's ``--after`` file once the trainer exited


def recorded_mark(observed: Path, rank: int) -> Path:
    """The file the observer touches once ``rank`` wrote all its recorded batches: the reference may replay."""
    return observed / f"batches_recorded_rank{rank}"


def start_reference(config: Path, model_dir: Path, observed: Path, *, mm_home: Path, python: str, ranks: int,
                    attributes: dict[str, Any] | None = None, stage: TrainedStage | None = None) -> Any:
    """Start the reference beside the trainer (niced): it imports and builds the model's own class while the
    trainer runs, then replays as soon as each of the ``ranks`` has recorded its batches (the trainer's last
    steps and its exit then overlap the replay), or once ``observed/reference_after`` says ``GO`` (the trainer
    exited: a run shorter than the recorded steps)."""
    import subprocess

    from hooks import env_with_hooks
    from hooks.lifetime import die_with_parent

    observed.mkdir(parents=True, exist_ok=True)
    spec, out, after = (observed / name for name in ("reference_spec.json", "reference.json", "reference_after"))
    ReferenceSpec(str(config), str(model_dir), str(observed), attributes or {}, training_defaults(mm_home), ranks,
                  stage).write(spec)
    out.unlink(missing_ok=True)
    after.unlink(missing_ok=True)

    def niced() -> None:
        os.nice(10)  # the trainer's ranks come first
        die_with_parent()

    with (observed / "reference.log").open("w") as log:  # a file, not a pipe nobody reads while the trainer runs
        return subprocess.Popen([python, "-m", "hooks.smoke.reference_run", "--spec", str(spec), "--out", str(out),
                                 "--after", str(after)], env=env_with_hooks(), stdout=log, stderr=log,
                                preexec_fn=niced)


SHAPES = "model_shapes.pkl"


def write_shapes(model_dir: Path, cfg: dict[str, Any], observed: Path, stage: str = "") -> None:
    """The trained model's shapes for the smoke's shard and memory checks, read here, beside the trainer, where
    torch and transformers are imported anyway: the smoke's own process then never imports them (~4 s on a
    2-core host, issue 25's bench). Pickled: the same dataclasses, read back by the same code."""
    import pickle

    partial = observed / f"{SHAPES}.tmp"
    partial.write_bytes(pickle.dumps(_build_shapes(model_dir, cfg, stage), protocol=4))
    partial.replace(observed / SHAPES)


def smoke_shapes(observed: Path | None, model_dir: Path, cfg: dict[str, Any]) -> Any:
    """The ``ModelShapes`` the reference wrote (``write_shapes``), else built here."""
    import pickle

    path = observed / SHAPES if observed else None
    if path is not None and path.is_file():
        return pickle.loads(path.read_bytes())
    spec = observed / "reference_spec.json" if observed else None  # the trained sub-model, as the smoke said
    stage = ReferenceSpec.read(spec).stage if spec and spec.is_file() else None
    return _build_shapes(model_dir, cfg, stage.name if stage else "")


def _build_shapes(model_dir: Path, cfg: dict[str, Any], stage: str = "") -> Any:
    """The trained model's ``ModelShapes``, built on the meta device (``hooks.model.cluster``): the sub-model
    ``stage`` where the smoke trains one stage of the folder's model."""
    from hooks.model.cluster import model_shapes

    return model_shapes(model_dir, trust_remote_code=TrainingYaml.of(cfg).trust_remote_code,
                        trained_submodule=stage)


EXPERTS = "experts.json"


def write_experts(model: Any, cfg: dict[str, Any], observed: Path) -> None:
    """Whether experts no token reaches get a gradient in the trained model (``hooks.smoke.experts``), for the
    smoke's finding; written before the replay waits for the trainer, so a trainer that stopped on it still gets
    its cause. Nothing where the YAML plans no experts (``parallel.ep_plan.apply_modules``)."""
    from hooks.smoke.experts import unrouted_experts

    patterns = TrainingYaml.of(cfg).expert_units
    if patterns:
        partial = observed / f"{EXPERTS}.tmp"
        partial.write_text(json.dumps(unrouted_experts(model, patterns).to_dict()))
        partial.replace(observed / EXPERTS)


def read_experts(observed: Path, process: Any, cfg: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
    """What ``write_experts`` found ({} where the YAML plans no experts, or the reference ended without it),
    waiting for it while the reference still builds the model."""
    import time

    if not TrainingYaml.of(cfg).expert_units:
        return {}
    path, deadline = observed / EXPERTS, time.monotonic() + timeout_s
    while not path.is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return json.loads(path.read_text()) if path.is_file() else {}


def go_reference(observed: Path) -> None:
    """The trainer exited with its steps recorded: the reference may replay them."""
    (observed / "reference_after").write_text(GO)


def stop_reference(process: Any, observed: Path) -> None:
    """Nothing to compare (the trainer failed, or the smoke fails before comparing): the reference ends."""
    if process.poll() is None:
        (observed / "reference_after").write_text(STOP)
        try:
            process.wait(timeout=5)
        except Exception:  # noqa: BLE001 - it is ours to end
            process.kill()
            process.wait()


def loss_equivalence(process: Any, observed: Path, records: list[dict[str, Any]],
                     timeout_s: float = 600) -> tuple[list[str], list[str], list[str]]:
    """Let the reference started by ``start_reference`` replay the recorded steps (its own process: the
    trainer's imports and patches never reach it), and compare; its cost is the wait after the trainer."""
    import subprocess
    import time

    start = time.perf_counter()
    out = observed / "reference.json"
    go_reference(observed)
    try:
        process.wait(timeout=timeout_s)
        log = (observed / "reference.log").read_text(errors="replace").strip().splitlines()
        eq = Equivalence(**json.loads(out.read_text())) if out.is_file() else Equivalence(
            error=f"the reference exited {process.returncode} without a result ({(log or [''])[-1][-300:]})")
    except subprocess.TimeoutExpired:
        process.kill()
        eq = Equivalence(error=f"the reference ran past {timeout_s:.0f} s")
    path = observed / "observe_rank0.json"
    rank0 = json.loads(path.read_text()) if path.is_file() else {}
    losses, norms, lrs, exact = trainer_figures(rank0, records)
    problems, verified, unknown = compare(eq, losses, norms, lrs, exact=exact)
    more = param_findings(eq, rank0.get("step1_grads") or {}, norms[0] if exact and norms else None)
    problems, verified, unknown = problems + more[0], (verified + more[1]) if not more[0] else [], unknown + more[2]
    cost = f" (reference: {time.perf_counter() - start:.1f} s after the trainer)"  # its price (the benchmark reads it)
    lines = verified or unknown
    if lines:
        lines[0] += cost
    return problems, verified, unknown


def _wait_for(after: Path, timeout_s: float, ranks: int = 0) -> str:
    """``GO`` once each of the ``ranks`` marked its batches recorded, else what the smoke wrote into ``after``
    (``GO``/``STOP``), or STOP when nothing came."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if after.is_file():
            text = after.read_text().strip()
            if text in (GO, STOP):
                return text
        if ranks and all(recorded_mark(after.parent, rank).is_file() for rank in range(ranks)):
            return GO
        time.sleep(0.05)
    return STOP


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.smoke.reference_run", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, required=True, help="JSON: config, model_dir, observed, attributes")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--after", type=Path, help="build the model first, then replay once this file says go")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for --after")
    args = parser.parse_args(argv)
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    try:
        spec, built = ReferenceSpec.read(args.spec), None
        if args.after:  # build while the trainer runs, then wait for its batches
            import torch
            import yaml

            torch.manual_seed(0)
            cfg = yaml.safe_load(Path(spec.config).read_text())
            stage = spec.stage
            try:
                write_shapes(Path(spec.model_dir), cfg, Path(spec.observed), stage.name if stage else "")
            except Exception:  # noqa: BLE001 - the smoke then builds them itself
                traceback.print_exc(file=sys.stderr)
            built = build_reference(Path(spec.model_dir), cfg, spec.attributes, stage)
            write_experts(built[1], cfg, Path(spec.observed))
            if _wait_for(args.after, args.timeout, spec.ranks) != GO:
                return 0
        result = replay(spec, built)
    except Exception as err:  # noqa: BLE001 - never evidence: reported as "could not evaluate" with its cause
        cause = (str(err).strip().splitlines() or [""])[-1][:300]
        result = Equivalence(error=f"the reference failed ({type(err).__name__}: {cause})")
        traceback.print_exc(file=sys.stderr)
    args.out.write_text(json.dumps(asdict(result)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    from hooks import exit_now

    exit_now(main())

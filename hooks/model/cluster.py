"""``python -m hooks.model.cluster MODEL_DIR [--devices-per-node 8 --device-memory-gb 64 --nodes 1] [--json]``:
the memory plan of ``hooks.model.memory_plan`` for a model folder and a cluster.

A module of its own because it builds the model (on the meta device, through the probe's loader and module
table): ``hooks.model.memory`` and ``hooks.model.memory_plan`` stay pure arithmetic that the probe itself uses,
without an import circle.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from hooks.model.memory import CUTOFF_LEN, ModelShapes, shapes_of
from hooks.model.memory_plan import plan_memory
from hooks.model.memory_text import markdown


def model_shapes(model_dir: Path, *, trust_remote_code: bool = False, trained_submodule: str = "") -> ModelShapes:
    """Build ``model_dir``'s model on the meta device (config.json alone suffices) and read the shapes of the model
    the trainer trains: the sub-model the frozen facts name (``trained_submodule``, ``ModelFacts.trained_submodule``),
    else the one ``MSMM_TRAINED_SUBMODULE`` names, else the one the classes show (``stages.understanding_stage``:
    Qwen-Omni's thinker), as the probe chose it."""
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from hooks.model.build import META, build_structure, gc_paused
    from hooks.model.facts import check_model_dir, module_table
    from hooks.model.loading import load_config_and_class
    from hooks.model.plan import derive_plan
    from hooks.model.stages import select as select_stage

    check_model_dir(model_dir, trust_remote_code=trust_remote_code)
    config, cls, _ = load_config_and_class(model_dir, trust_remote_code=trust_remote_code)
    with gc_paused():
        model, how, _ = build_structure(cls, config, model_dir)
        # The probe's plugin-read choice needs a checkout: the copy hands it over as the frozen facts' name.
        named = trained_submodule or os.environ.get("MSMM_TRAINED_SUBMODULE") or None
        model, config, _ = select_stage(model, config, trained_submodule=named)
        table = module_table(model)
        notes = [] if how == META else [f"built with {how}: shapes may not be the published model's"]
        return shapes_of(model, table, derive_plan(table), config, model_dir.name, notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hooks.model.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--devices-per-node", type=int, default=8)
    parser.add_argument("--device-memory-gb", type=float, default=64)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--host-memory-gb", type=float, default=1024)
    parser.add_argument("--cutoff-len", type=int, default=CUTOFF_LEN)
    parser.add_argument("--micro-batch-size", type=int, default=1)
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--trained-submodule", default="", metavar="NAME",
                        help="the sub-model the trainer builds (the copy's frozen facts; default: "
                             "$MSMM_TRAINED_SUBMODULE, else the one the classes show, as the probe picks it)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    args = parser.parse_args(argv)
    from hooks.model.build import ProbeError

    try:
        shapes = model_shapes(args.model_dir.resolve(), trust_remote_code=args.trust_remote_code,
                              trained_submodule=args.trained_submodule)
    except ProbeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    plan = plan_memory(shapes, devices_per_node=args.devices_per_node, device_memory_gb=args.device_memory_gb,
                       nodes=args.nodes, host_memory_gb=args.host_memory_gb, cutoff_len=args.cutoff_len,
                       micro_batch_size=args.micro_batch_size)
    print(json.dumps({**plan.to_dict(), "markdown": markdown(plan)}, indent=1, sort_keys=True) if args.json
          else markdown(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())

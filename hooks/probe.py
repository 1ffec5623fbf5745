"""The probe a copy runs: model facts, then the data path's facts, in one short-lived process.

``python -m hooks.probe MODEL_DIR [--json] [--trust-remote-code]`` prints what a copy would freeze into its
answers file: the model facts and plans (``hooks.model.facts``), the processor, chat format and the model's
own data code (``hooks.data.facts``); without a checkout, the data branch to recommend follows from them
(``hooks.data.candidates.recommend``). copier's ``python`` question runs it once
per model and interpreter (``hooks.render.session``); in a MindSpeed-MM checkout the same process then
tries the candidate data paths (``hooks.render.evidence``, the data-branch question's default) with the
torch and transformers it has imported, and exits: nothing it starts outlives the question.

A command over the whole pipeline, as ``hooks.update`` and ``hooks.check`` are: it is the one place that
puts the stages together, so none of them imports a later one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

from hooks import run_one_shot
from hooks.data.facts import add_data_facts
from hooks.model.facts import ModelFacts, default_memory_plan, probe_model
from hooks.model.facts_text import render_table
from hooks.model.loading import ProbeError


def probe(model_dir: Path, *, trust_remote_code: bool = False, with_processor: bool = True,
          with_memory: bool = False, checkout: Path | None = None, trained_submodule: str | None = None,
          sample_builder: str = "") -> ModelFacts:
    """Probe ``model_dir``: model facts, the data path's facts, the branch; ``ProbeError`` on bad input.

    ``checkout``/``trained_submodule``: where the framework trains a sub-model of the published class (its
    in-repo plugin's choice, or the user's), everything from the module table on describes that sub-model.
    ``sample_builder``: the user's image function for a release that ships none (``hooks.data.builder``).
    """
    t0 = time.perf_counter()
    probed = probe_model(model_dir, trust_remote_code=trust_remote_code, checkout=checkout,
                         trained_submodule=trained_submodule, with_tokenizer=with_processor)
    facts = probed.facts
    if with_processor:
        add_data_facts(probed, model_dir, trust_remote_code=trust_remote_code, sample_builder=sample_builder)
    if with_memory:  # after the processor facts: one image's length sizes the samples
        facts.memory_default = default_memory_plan(probed, model_dir)
    probed.model = None
    facts.timings = {**probed.timings, "total_s": time.perf_counter() - t0}
    return facts


EXIT_OK, EXIT_PLAN_PROBLEMS, EXIT_BAD_INPUT, EXIT_MODEL_CODE = 0, 1, 2, 3


def write_evidence(model_dir: Path, facts: ModelFacts, trust: bool, checkout: str, model_id: str, python: str,
                   out: str) -> None:
    """The candidates' verdicts in ``checkout`` into ``out``, in this process (it ends right after: the check
    takes it over). Nothing is written where the framework cannot run or the check fails: copier then keeps
    the probe's recommendation, which says it was not checked, and postgen checks the scaffold."""
    from hooks.framework.environment import framework_unavailable
    from hooks.render.evidence import gather_evidence

    why, mindspeed_home = framework_unavailable(Path(checkout))
    if why:
        return
    answers = {"model_id": model_id, "model_path": str(model_dir), "python": python, "trust_remote_code": trust,
               "model_facts": json.loads(facts.to_json(with_timings=False))}
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the framework's data code prints progress
            evidence = gather_evidence(Path(checkout).resolve(), answers, mindspeed_home, in_process=True)
    except Exception:  # noqa: BLE001 - could not evaluate: no evidence, never a verdict
        traceback.print_exc()
        return
    Path(out).write_text(json.dumps(evidence.to_dict()), encoding="utf-8")


def _model_code_error(model_dir: Path, err: BaseException) -> str:
    """One line for a crash in the model's own code (or ours on it): the folder, the cause, the fix."""
    cause = (str(err).strip().splitlines() or [""])[-1]
    return (f"model_path: {model_dir}: the model's code failed during the probe ({type(err).__name__}: {cause}); "
            "make the folder's code run with this interpreter's transformers 4.57.x and torch (the traceback: "
            f"python -m hooks.probe {model_dir} --trust-remote-code)")


def _builder(spec: str) -> str:
    """The sample builder answer with its file made absolute; ``ProbeError`` naming the field when it is wrong."""
    if not spec.strip():
        return ""
    from hooks.data.builder import resolve

    try:
        return resolve(spec)
    except ValueError as err:
        raise ProbeError(f"sample_builder: {err}; answer path/to/builder.py:function") from err


# What later questions compute in the training interpreter, as modes of this one command (copier's questions
# start nothing else): a cluster's memory plan (``cluster MODEL_DIR ...``, ``hooks.model.cluster``) and the first
# records' lengths against cutoff_len (``lengths MODEL_DIR DATA_JSON ...``, ``hooks.data.preflight``).
MODES = {"cluster": "hooks.model.cluster", "lengths": "hooks.data.preflight"}


def main(argv: list[str] | None = None) -> int:
    """Exit 0 facts written, 1 facts written with plan problems, 2 bad input, 3 the model's code failed.

    With ``--out``, the facts go to that file: published model code prints on import and would
    corrupt JSON on stdout. Whatever the model prints goes to stderr either way. A first argument
    ``cluster``/``lengths`` runs that mode instead (``MODES``; a model folder is given by path after it).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in MODES:
        import importlib

        return importlib.import_module(MODES[argv[0]]).main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m hooks.probe", description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="print ModelFacts as JSON")
    parser.add_argument("--out", type=Path, help="write ModelFacts as JSON to this file (nothing on stdout)")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--no-processor", action="store_true", help="skip loading the processor")
    parser.add_argument("--no-timings", action="store_true", help="omit timings (deterministic JSON)")
    parser.add_argument("--memory-out", type=Path, help="also write the memory plan for copier's default cluster here")
    parser.add_argument("--checkout", type=Path, help="MindSpeed-MM checkout whose in-repo plugin for the family may "
                        "train a sub-model of the published class (default: the one the hidden options name)")
    parser.add_argument("--trained-submodule", default=os.environ.get("MSMM_TRAINED_SUBMODULE") or None,
                        help="the sub-model of the published class your trainer builds, e.g. thinker "
                             "(default: $MSMM_TRAINED_SUBMODULE, else the checkout's in-repo plugin decides, else "
                             "the classes show it: hooks.model.stages)")
    parser.add_argument("--sample-builder", default="", metavar="PATH.py:FUNCTION",
                        help="your image function, for a release that ships no image preprocessing "
                             "(python -m hooks.data.builder MODEL_DIR --skeleton FILE writes one to fill in)")
    parser.add_argument("--data-evidence", nargs=4, metavar=("CHECKOUT", "MODEL_ID", "PYTHON", "OUT"),
                        help="then try the candidate data paths in that checkout; their verdicts go to OUT")
    args = parser.parse_args(argv)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the model's own prints never reach our output
            checkout = args.checkout or (Path(args.data_evidence[0]) if args.data_evidence else None)
            facts = probe(args.model_dir.resolve(), trust_remote_code=args.trust_remote_code,
                          with_processor=not args.no_processor, with_memory=args.memory_out is not None,
                          checkout=checkout, trained_submodule=args.trained_submodule,
                          sample_builder=_builder(args.sample_builder))
    except BaseException as err:
        if isinstance(err, ProbeError):
            print(f"error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if not isinstance(err, Exception):
            raise
        traceback.print_exc()
        print(f"error: {_model_code_error(args.model_dir.resolve(), err)}", file=sys.stderr)
        return EXIT_MODEL_CODE
    text = facts.to_json(with_timings=not args.no_timings) if args.json or args.out else render_table(facts)
    if args.memory_out:
        args.memory_out.write_text(json.dumps(facts.memory_default, sort_keys=True), encoding="utf-8")
    if args.out:
        tmp = args.out.with_name(args.out.name + ".part")
        tmp.write_text(text + "\n", encoding="utf-8")
        tmp.replace(args.out)
    else:
        print(text)
    if args.data_evidence:
        write_evidence(args.model_dir.resolve(), facts, args.trust_remote_code, *args.data_evidence)
    return EXIT_PLAN_PROBLEMS if facts.plan.problems else EXIT_OK


if __name__ == "__main__":
    run_one_shot(main)

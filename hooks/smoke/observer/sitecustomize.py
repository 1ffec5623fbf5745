"""What the smoke observes inside the real trainer's ranks: FSDP units, weights, shard sizes.

The settings check (``hooks.smoke.settings``) proves each planned setting from the trainer's own
evidence, not from the YAML. Three pieces of evidence are not in its INFO log, so this module,
put on ``PYTHONPATH`` by ``hooks.framework.environment.framework_env`` when ``MSMM_OBSERVE`` names a JSON
spec, collects them without editing a framework file (a ``sys.meta_path`` finder wraps
``TrainEngine.train_step`` right after ``train_engine`` is imported, as the CPU bridges do):

- the framework's own ``[FSDP2]: Apply fsdp2 to module <name>`` and ``[Expert Parallel]: Apply ep
  to module <name>`` lines, which it logs at DEBUG: a DEBUG handler on the distributed loggers
  shows those lines only (the trainer's INFO logging stays as it is);
- before the first step, a few named parameters of the built model (gathered whole) against the
  same tensors in the model folder's safetensors files: that the weights came from the files and
  not from a random init (``training.load`` pointing elsewhere, keys that did not match); and,
  with tied word embeddings, that the output head still shares the input embedding's weight;
- at the first optimizer step, each parameter's gradient norm (before it) and, after it (gradients still
  there, AdamW states created), what this rank holds: ``hooks.model.memory_measure.measure_rank``, compared with
  the memory plan's arithmetic;
- at the first step and at each step where a medium's first real item is trained (the spec's ``media_steps``),
  which inputs the batch holds (``step<s>_batch``), each parameter's gradient norm (``step<s>_grads``) and which
  parameters got none (``step<s>_no_grad``), and whether each connector's weights are all zero
  (``connector_zero``): ``hooks.smoke.media_proof`` proves each medium reached ``forward`` and changed the loss;
- the batches of the first ``RECORDED_STEPS`` steps as ``forward`` got them (``batch_rank<r>_step<s>.pt``,
  then ``batches_recorded_rank<r>``: the reference replays them while the trainer runs on)
  and, from ``training_log``, those steps' loss, grad norm and learning rate unrounded (the log prints
  the grad norm with 3 decimals): ``hooks.smoke.reference`` replays the batches through the model's own
  class and compares.

Each rank writes ``observe_rank<r>.json`` into the spec's ``out`` folder. It has to be
``sitecustomize`` for the same reason as the bridges: torchrun starts fresh interpreters. It chains
to the next ``sitecustomize`` on the path, so a system one (or the bridges, listed first) still runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

ENV_SPEC = "MSMM_OBSERVE"
_ENGINE_MODULE = "mindspeed_mm.fsdp.train.train_engine"
_LOGGERS = ("mindspeed_mm.fsdp.distributed", "mindspeed.fsdp.distributed")
_SHOWN = re.compile(r"^\[(FSDP2|Expert Parallel)\]: Apply ")
WEIGHTS_CHECKED = 4  # first, two middle and last parameter found in the files
RECORDED_STEPS = 3  # batches kept for the loss-equivalence reference (hooks.smoke.reference)


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _show_apply_lines() -> None:
    """A DEBUG handler for the framework's ``Apply fsdp2/ep to module`` lines (its INFO lines pass as before)."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setLevel(logging.DEBUG)
    handler.addFilter(lambda r: r.levelno == logging.DEBUG and bool(_SHOWN.match(str(r.getMessage()))))
    handler.setFormatter(logging.Formatter("DEBUG [%(name)s] => %(message)s"))
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)


def _file_tensors(model_dir: Path, model: Any, prefix: str = "") -> dict[str, tuple[Path, str]]:
    """Model parameter name -> (file, key), through the model's own checkpoint key mapping.

    ``prefix``: the trained sub-model's tensors in a bundle's folder (``thinker.``; the smoke's spec says it): the
    trained model's names lack it, and the other stages' tensors (``talker.*``) are none of its parameters.
    """
    from safetensors import safe_open

    mapping = getattr(model, "_checkpoint_conversion_mapping", None) or {}
    found = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(path), "pt") as handle:
            for key in handle.keys():
                if prefix and not key.startswith(prefix):
                    continue
                name = key[len(prefix):]
                for pattern, repl in mapping.items():
                    name, hits = re.subn(pattern, repl, name)
                    if hits:
                        break
                found[name] = (path, key)
    return found


def check_weights(model: Any, model_dir: Path, prefix: str = "") -> dict[str, Any]:
    """A few parameters, gathered whole on every rank (a collective), equal to the files' tensors (those under
    ``prefix`` where the trainer trains one stage of the folder's model)?"""
    import torch
    from safetensors import safe_open

    model = model.module if type(model).__name__ == "DistributedDataParallel" else model  # one rank: DDP
    files = _file_tensors(model_dir, model, prefix)
    named = [(n, p) for n, p in model.named_parameters() if n in files]
    if not named:
        return {"folder": str(model_dir), "checked": [], "mismatch": [],
                "error": "no parameter of the model is named in the folder's safetensors files"}
    picks = sorted({0, len(named) // 3, 2 * len(named) // 3, len(named) - 1})[:WEIGHTS_CHECKED]
    checked, mismatch = [], []
    for i in picks:
        name, param = named[i]
        whole = param.full_tensor() if hasattr(param, "full_tensor") else param
        path, key = files[name]
        with safe_open(str(path), "pt") as handle:
            expected = handle.get_tensor(key)
        same = tuple(whole.shape) == tuple(expected.shape) and torch.equal(whole.detach().float().cpu(),
                                                                           expected.float())
        (checked if same else mismatch).append(name)
    return {"folder": str(model_dir), "checked": checked, "mismatch": mismatch, "error": "", "tied": _still_tied(model)}


def _still_tied(model: Any) -> bool | None:
    """With tied word embeddings, does the output head still share the input embedding's weight (None: not tied)?

    Reported, not judged: the config flag alone does not say that transformers tied them (Janus, Mllama set it
    and keep two weights), so only a shared weight is stated (Gemma 3 after meta init + load)."""
    config = getattr(model, "config", None)
    text = getattr(config, "get_text_config", lambda: config)()
    if not (getattr(config, "tie_word_embeddings", False) or getattr(text, "tie_word_embeddings", False)):
        return None
    try:
        out, inp = model.get_output_embeddings(), model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    if out is None or inp is None or tuple(out.weight.shape) != tuple(inp.weight.shape):
        return None  # the flag is set, but these weights cannot be one tensor (Mllama's extra embedding rows)
    return out.weight is inp.weight


def _write(out: Path, record: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"observe_rank{_rank()}.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**old, **record}, indent=1, sort_keys=True))


def _observing(spec_path: Path):  # noqa: ANN202 - returns the train_step wrapper factory
    """The spec is read at the first step (what to check and where to write)."""

    def wrap(train_step: Any) -> Any:
        def observed_train_step(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not getattr(self, "_msmm_observed", False):
                self._msmm_observed = True
                spec = json.loads(spec_path.read_text())
                out = Path(spec["out"])
                self._msmm_media_steps = list(spec.get("media_steps") or [])
                try:
                    _write(out, {"weights": check_weights(self.model, Path(spec["model_dir"]),
                                                          spec.get("prefix") or "")})
                except Exception as err:  # noqa: BLE001 - reported, judged by the settings check
                    _write(out, {"weights": {"error": f"{type(err).__name__}: {err}", "checked": [], "mismatch": []}})
                _dropout_off(self, out)
                _measure_after_first_step(self, out)
                _observe_memory(self, out)  # issue 23: hooks.smoke.memory_check
            return train_step(self, *args, **kwargs)

        return observed_train_step

    return wrap


def gradient_norms(model: Any) -> dict[str, float]:
    """Each parameter's step-1 gradient norm (as clipped), whole and summed in float64.

    A single total norm hides a wrong gradient in a few parameters (positions reach only the attention
    projections); per parameter, ``hooks.smoke.reference`` compares each with the model's own. Sharded
    gradients are gathered (every rank takes part, in the same order); the tiny smoke model makes that cheap.
    """
    norms = {}
    for name, param in model.named_parameters():
        grad = param.grad
        if grad is None:
            continue
        whole = grad.full_tensor() if hasattr(grad, "full_tensor") else grad
        norms[name] = float(whole.detach().double().square().sum().sqrt())
    return norms


def without_gradient(model: Any) -> dict[str, bool]:
    """The parameters without a step-1 gradient, each with whether it requires one: a frozen tower's
    (False) against one that ``forward`` never used (True) (``hooks.smoke.media_proof``)."""
    return {name: bool(param.requires_grad) for name, param in model.named_parameters() if param.grad is None}


def _media_steps(engine: Any) -> set[int]:
    """The steps besides the first whose batches and gradients the media proof reads (the spec's ``media_steps``:
    where a medium's first real item is trained, ``hooks.smoke.media_proof.media_steps``)."""
    return {int(s) for s in getattr(engine, "_msmm_media_steps", ()) if int(s) > 1}


def connector_zero(model: Any) -> dict[str, bool]:
    """Each weight matrix of a connector beside the towers (``hooks.model.modality.connector_module``), gathered
    whole: all zeros? A zero connector (a fresh one, as ``from_config`` leaves Gemma 3's projection) passes no
    gradient back into its tower, which the media proof then notes instead of failing."""
    _hooks_importable()
    from hooks.model.modality import connector_module
    from hooks.smoke.media_proof import plain_name

    found = {}
    for name, param in model.named_parameters():
        if param.ndim < 2 or not param.requires_grad or connector_module(plain_name(name)) is None:
            continue
        whole = param.full_tensor() if hasattr(param, "full_tensor") else param
        found[name] = not bool(whole.detach().count_nonzero())
    return found


def _measure_after_first_step(engine: Any, out: Path) -> None:
    """Wrap this engine's ``optimizer.step`` until the last step the media proof reads: before the first, the
    connectors' zero weights; at the first and at each media step, the gradients (still there before it); after the
    first, gradients still there and states created, what this rank holds."""
    optimizer = engine.optimizer
    step = optimizer.step
    media = _media_steps(engine)
    count = [0]

    def measured_step(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        now = count[0]
        if now == 1:
            try:
                _write(out, {"connector_zero": connector_zero(engine.model)})
            except Exception as err:  # noqa: BLE001 - the media proof then says the zero check was not recorded
                _write(out, {"connector_zero_error": f"{type(err).__name__}: {err}"})
        if now == 1 or now in media:
            try:
                _write(out, {f"step{now}_grads": gradient_norms(engine.model),
                             f"step{now}_no_grad": without_gradient(engine.model)})
            except Exception as err:  # noqa: BLE001 - reported by hooks.smoke.reference as "could not evaluate"
                _write(out, {f"step{now}_grads": {"error": f"{type(err).__name__}: {err}"}})
        result = step(*args, **kwargs)
        if now >= max(media | {1}):
            optimizer.step = step
        if now == 1:
            try:
                _hooks_importable()
                from hooks.model.memory_measure import measure_rank

                _write(out, {"shards": measure_rank(engine.model, optimizer)})
            except Exception as err:  # noqa: BLE001
                _write(out, {"shards": {"error": f"{type(err).__name__}: {err}"}})
        return result

    optimizer.step = measured_step


def _hooks_importable() -> None:
    root = str(Path(__file__).resolve().parents[3])  # this repository
    if root not in sys.path:
        sys.path.append(root)


def _dropout_off(engine: Any, out: Path) -> None:
    """The smoke trains without dropout, as the loss reference computes (``hooks.smoke.reference.dropout_off``:
    random drops differ between processes); what was set to 0 is recorded."""
    try:
        _hooks_importable()
        from hooks.smoke.reference import dropout_off

        _write(out, {"dropout_off": dropout_off(engine.model)})
    except Exception as err:  # noqa: BLE001 - the loss comparison then says why it differs
        _write(out, {"dropout_off": {"error": f"{type(err).__name__}: {err}"}})


def _observe_memory(engine: Any, out: Path) -> None:
    """Activations saved per layer in the first forward and the peak device memory per step
    (``hooks.smoke.memory_check.observe``); a failure is recorded, never raised."""
    try:
        from hooks.smoke.memory_check import observe

        observe(engine, lambda record: _write(out, record))
    except Exception as err:  # noqa: BLE001 - reported beside the plan by the smoke
        _write(out, {"activations": {"error": f"{type(err).__name__}: {err}"}})


def _recording(spec_path: Path):  # noqa: ANN202 - returns the get_batch wrapper factory
    """Keep the first steps' batches, after the trainer moved and cast them, before ``forward`` sees them."""

    def wrap(get_batch: Any) -> Any:
        def recorded_get_batch(self: Any, *args: Any, **kwargs: Any) -> Any:
            batch = get_batch(self, *args, **kwargs)
            count = getattr(self, "_msmm_batches", 0) + 1
            self._msmm_batches = count
            if count == 1 or count in _media_steps(self):
                _describe(Path(json.loads(spec_path.read_text())["out"]), batch, count)
            if count <= RECORDED_STEPS:
                import torch

                out = Path(json.loads(spec_path.read_text())["out"])
                out.mkdir(parents=True, exist_ok=True)
                kept = {k: v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
                path = out / f"batch_rank{_rank()}_step{count}.pt"
                partial = path.with_suffix(".part")
                torch.save(kept, partial)
                partial.replace(path)  # whole or absent: the reference reads them while we train
                if count == RECORDED_STEPS:
                    _hooks_importable()
                    from hooks.smoke.reference_run import recorded_mark

                    recorded_mark(out, _rank()).touch()
            return batch

        return recorded_get_batch

    return wrap


def _describe(out: Path, batch: dict[str, Any], step: int) -> None:
    """A step's batch inputs, described for ``hooks.smoke.media_proof`` (which media reached ``forward``)."""
    try:
        _hooks_importable()
        from hooks.smoke.media_proof import describe_batch

        _write(out, {f"step{step}_batch": describe_batch(batch)})
    except Exception as err:  # noqa: BLE001 - the media proof then says it could not evaluate
        _write(out, {f"step{step}_batch": {"error": f"{type(err).__name__}: {err}"}})


def _exact_figures(spec_path: Path):  # noqa: ANN202 - returns the training_log wrapper factory
    """Each logged step's figures as the trainer computed them, before ``training_log`` rounds them."""

    def wrap(training_log: Any) -> Any:
        def recorded_training_log(self: Any, iteration: int, elapsed: Any, lr: Any, consumed: Any, loss_dict: Any,
                                  grad_norm: Any, *args: Any, **kwargs: Any) -> Any:
            try:  # never in the trainer's way: older checkouts pass the loss as a tensor, not a dict
                if iteration <= RECORDED_STEPS:
                    out = Path(json.loads(spec_path.read_text())["out"])
                    path = out / f"observe_rank{_rank()}.json"
                    steps = json.loads(path.read_text()).get("exact", []) if path.is_file() else []
                    loss = loss_dict.get("loss", float("nan")) if isinstance(loss_dict, dict) else loss_dict
                    steps.append({"step": int(iteration), "loss": float(loss),
                                  "grad_norm": None if grad_norm is None else float(grad_norm), "lr": float(lr)})
                    _write(out, {"exact": steps})
            except Exception:  # noqa: BLE001, S110 - the reference then compares the log's rounded figures
                pass
            return training_log(self, iteration, elapsed, lr, consumed, loss_dict, grad_norm, *args, **kwargs)

        return recorded_training_log

    return wrap


def _patch(module: Any, spec_path: Path) -> None:
    engine = getattr(module, "TrainEngine", None)
    if engine is not None and hasattr(engine, "train_step") and not getattr(engine, "_msmm_patched", False):
        engine.train_step = _observing(spec_path)(engine.train_step)
        if hasattr(engine, "get_batch"):
            engine.get_batch = _recording(spec_path)(engine.get_batch)
        if hasattr(engine, "training_log"):
            engine.training_log = _exact_figures(spec_path)(engine.training_log)
        engine._msmm_patched = True


class _Loader(importlib.abc.Loader):
    def __init__(self, real: importlib.abc.Loader, spec: Path):
        self._real, self._spec = real, spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._real.exec_module(module)
        _patch(module, self._spec)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, spec: Path):
        self._spec = spec

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _ENGINE_MODULE:
            return None
        real = importlib.machinery.PathFinder.find_spec(fullname, path)
        if real is None or real.loader is None:
            return None
        real.loader = _Loader(real.loader, self._spec)
        return real


def install() -> bool:
    """Observe when ``MSMM_OBSERVE`` names the spec file (JSON: model_dir, out; it may be written later).

    Idempotent; a ``train_engine`` imported already is patched in place. True if installed.
    """
    if not os.environ.get(ENV_SPEC):
        return False
    spec = Path(os.environ[ENV_SPEC])
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(spec))
        _show_apply_lines()
    if _ENGINE_MODULE in sys.modules:
        _patch(sys.modules[_ENGINE_MODULE], spec)
    return True


def _chain_next_sitecustomize() -> None:
    """Run the ``sitecustomize`` this file shadows, if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    entries = [os.path.abspath(p or os.curdir) for p in sys.path]
    rest = sys.path[entries.index(here) + 1:] if here in entries else sys.path  # only what comes after this one
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


install()
if not os.environ.get("MSMM_OBSERVE_NO_CHAIN"):
    _chain_next_sitecustomize()

"""Measured memory beside the memory plan, for every smoke (issue 23).

The observer (``hooks/smoke/observer``) calls ``observe`` in each rank at the first step. It records the bytes
the first forward saved for backward in each decoder layer and vision block (``hooks.model.saved``) and,
after each optimizer step, the peak device memory (``max_memory_allocated``; none on CPU). After the run they
are set beside the plan's arithmetic (``hooks.model.memory``) for the same shrunk model and the smoke's
settings: the activation estimate for the tokens and patches each layer really saw, with recompute as the
YAML has it, and the predicted per-device total. The verdict does not depend on it; REPORT.md shows the
table and the notes say how far off it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hooks import dig
from hooks.model.memory import size_text
from hooks.smoke.training_yaml import TrainingYaml

ACTIVATION_TOLERANCE = 0.15  # a layer kind's estimate further off than this is a WARNING naming its worst layer

# --------------------------------------------------------------------------- inside the trainer's ranks

def unwrapped(model: Any) -> Any:
    """The model under MindSpeed-MM's DDP wrapper (one shard rank), else the model itself."""
    return model.module if type(model).__name__ == "DistributedDataParallel" else model


def _trainer_config() -> dict[str, Any]:
    """The YAML the trainer was started with (``trainer.py <yaml>``), or {} when it cannot be read."""
    import sys

    try:
        import yaml

        return yaml.safe_load(Path(sys.argv[1]).read_text()) or {}
    except Exception:  # noqa: BLE001 - observing must never stop training
        return {}


def layer_patterns(cfg: dict[str, Any]) -> tuple[list[str], bool]:
    """(the decoder-layer / vision-block patterns, recompute on): recompute targets, else the FSDP units."""
    view = TrainingYaml.of(cfg)
    return (view.recompute_units, view.recompute) if view.recompute_units else (view.fsdp_units, False)


def peak_memory() -> dict[str, Any]:
    """This rank's peak device memory so far (``max_memory_allocated``); CPU has no device allocator."""
    import torch

    for name in ("npu", "cuda"):
        backend = getattr(torch, name, None)
        if backend is not None and backend.is_available() and backend.is_initialized():
            return {"device": name, "peak_allocated": int(backend.max_memory_allocated()),
                    "peak_reserved": int(backend.max_memory_reserved())}
    return {"device": "cpu", "peak_allocated": None, "peak_reserved": None}


def observe(engine: Any, write: Any) -> None:
    """At the first step: meter the first forward's saved tensors per layer (written as ``activations`` when the
    forward ends) and, after every optimizer step, write this rank's ``memory`` peak. ``write(record)`` merges
    into the rank's observer record."""
    import torch

    from hooks.model.saved import SavedTensorMeter, layer_names

    model = unwrapped(engine.model)
    patterns, recompute = layer_patterns(_trainer_config())
    meter = SavedTensorMeter(model, layer_names(model, patterns)).__enter__()
    handles = []

    def done(_module: Any, _args: Any, _output: Any) -> None:
        meter.__exit__(None, None, None)
        for handle in handles:
            handle.remove()
        write({"activations": {**meter.result.to_dict(), "recompute": recompute}})

    handles.append(model.register_forward_hook(done))
    torch.optim.optimizer.register_optimizer_step_post_hook(lambda *_: write({"memory": peak_memory()}))


# --------------------------------------------------------------------------- in the smoke, after the run


def _size(n: float | None) -> str:
    return "n/a" if n is None else size_text(n, 2)


def _records(observed: Path | None) -> dict[int, dict[str, Any]]:
    if observed is None or not observed.is_dir():
        return {}
    return {int(p.stem.removeprefix("observe_rank")): json.loads(p.read_text())
            for p in sorted(observed.glob("observe_rank*.json"))}


def memory_rows(observed: Path | None, cfg: dict[str, Any], model_dir: Path, nproc: int) -> list[dict[str, Any]]:
    """One row per rank and quantity: ``rank``, ``what``, ``predicted``, ``measured`` (bytes or None), ``note``."""
    from hooks.model.memory_activations import LOGIT_BYTES, layer_row_bytes
    from hooks.model.memory_plan import Settings, breakdown
    from hooks.model.saved import SavedBytes, layer_kind, predicted

    records = {r: rec for r, rec in _records(observed).items() if isinstance(rec.get("activations"), dict)
               and "error" not in rec["activations"]}
    if not records:
        return []
    from hooks.smoke.reference_run import smoke_shapes

    shapes = smoke_shapes(observed, model_dir, cfg)
    meta = bool(dig(cfg, "training", "init_model_with_meta_device"))
    freeze = tuple(dig(cfg, "model", "freeze") or ())
    ep = int(dig(cfg, "parallel", "expert_parallel_size") or 1)
    dtype = str(dig(cfg, "parallel", "fsdp_plan", "param_dtype") or "fp32").lower()
    width = 2 if dtype in ("bf16", "bfloat16", "fp16", "float16") else 4  # what the layers compute in
    rows: list[dict[str, Any]] = []
    for rank, rec in sorted(records.items()):
        act = rec["activations"]
        recompute = bool(act.get("recompute"))
        saved = SavedBytes(layers=act["layers"], rows=act["rows"], shared=act["shared"], other=act["other"],
                           tensors=act.get("tensors") or {})
        want = predicted(saved, shapes.profiles, shapes.towers, recompute=recompute, act_bytes=width)
        for kind in ("text", "vision"):
            names = [n for n in saved.layers if layer_kind(n, shapes.towers) == kind and n in want]
            if not names:
                continue
            off = {n: abs(want[n] - saved.layers[n]) / max(saved.layers[n], want[n], 1) for n in names}
            name = max(names, key=off.__getitem__)
            total_want, total_saved = sum(want[n] for n in names), sum(saved.layers[n] for n in names)
            # What the plan sizes memory by is the kind's total; a layer the estimate misses while its kind's total
            # holds (Idefics2's perceiver: its first layer's latents are a parameter's view, no activation) is noted
            total_off = abs(total_want - total_saved) / max(total_want, total_saved, 1)
            label = "decoder layers" if kind == "text" else "vision blocks"
            tokens = sorted({saved.rows.get(n, 0) for n in names})
            rows.append({"rank": rank, "what": f"activations saved for backward, {len(names)} {label} "
                                               f"({'/'.join(map(str, tokens))} rows each"
                                               f"{', recompute' if recompute else ''}, {dtype})",
                         "predicted": total_want, "measured": total_saved,
                         "note": f"{total_off:.1%} off, worst layer {off[name]:.1%}" + (
                             "" if total_off <= ACTIVATION_TOLERANCE else
                             _off_note(name, want[name], saved, recompute))})
        text = [n for n in saved.layers if layer_kind(n, shapes.towers) == "text"]
        tokens = max((saved.rows.get(n, 0) for n in text), default=0)
        b = breakdown(shapes, Settings(1, nproc, ep, freeze), nproc, max(tokens, 1), meta_init=meta)
        activations = sum(want.values()) + tokens * shapes.dims.vocab * LOGIT_BYTES
        if recompute and "text" in shapes.profiles:
            activations += layer_row_bytes(shapes.profiles["text"], tokens)  # one layer recomputed in backward
        states = b.device_total(0) - b.after_backward
        memory = rec.get("memory") or {}
        rows.append({"rank": rank, "what": f"peak device memory ({b.mode.upper()}: states, gathers, activations)",
                     "predicted": states + max(activations, b.after_backward), "measured": memory.get("peak_allocated"),
                     "note": "max_memory_allocated" if memory.get("peak_allocated") is not None
                     else "n/a on CPU (no device allocator)"})
    return rows


def _off_note(name: str, predicted: int, saved: Any, recompute: bool) -> str:
    """Which layer the estimate missed by more than the tolerance, what it saved, and what the estimate counted."""
    counted = ("only its input (rows x hidden x dtype), as non-reentrant recompute keeps" if recompute
               else "the per-row formula of hooks.model.memory_activations.layer_row_bytes")
    what = "; ".join(saved.tensors.get(name, [])) or "not recorded"
    return (f": {name}, {size_text(predicted, 2)} predicted for its {saved.rows.get(name, 0)} rows, "
            f"{size_text(saved.layers[name], 2)} saved (storages: {what}); the estimate counts {counted}")


def memory_table(rows: list[dict[str, Any]]) -> str:
    """The rows as REPORT.md's predicted-vs-measured table."""
    if not rows:
        return ""
    lines = ["| rank | quantity | predicted (memory plan) | measured | |", "|---:|---|---:|---:|---|"]
    lines += [f"| {r['rank']} | {r['what']} | {_size(r['predicted'])} | {_size(r['measured'])} | {r['note']} |"
              for r in rows]
    return "\n".join(lines)


def memory_notes(rows: list[dict[str, Any]]) -> list[str]:
    """One line per row for the verdict's notes; a WARNING where a layer kind is off by more than the tolerance."""
    return [f"{'WARNING: ' if ': ' in r['note'] else ''}memory, rank {r['rank']}: {r['what']}: "
            f"{_size(r['predicted'])} predicted, {_size(r['measured'])} measured ({r['note']})" for r in rows]


def measure_in_process(model_dir: Any, *, recompute: bool, trust_remote_code: bool = False) -> dict[str, Any]:
    """One bf16 forward of ``model_dir`` on a built-in image/chat sample, measured per layer beside the plan.

    What the tier-1 check and ``tests/benchmarks/device_check.py --cpu`` run: the model's own class (as the
    contract smoke loads it), the plan's recompute targets wrapped in non-reentrant checkpointing when
    ``recompute`` (as MindSpeed-MM's ``recompute_modules`` does), bf16 compute as FSDP2's ``param_dtype``.
    """
    import torch
    from torch.utils.checkpoint import checkpoint
    from transformers import AutoProcessor

    from hooks.data.encoders import builtin_samples, encode, media_of
    from hooks.model.facts import module_table
    from hooks.model.memory_activations import model_profiles
    from hooks.model.memory_config import dims_from_config
    from hooks.model.plan import derive_plan
    from hooks.model.saved import SavedTensorMeter, layer_names, predicted
    from hooks.smoke.batches import accepted_kwargs, prepare_batch
    from hooks.smoke.contract_worker import load_model

    model = load_model(model_dir, trust_remote_code).to(torch.bfloat16).train()
    plan = derive_plan(module_table(model))
    profiles = model_profiles(model, plan, dims_from_config(model.config), model.config)
    names = layer_names(model, plan.recompute_modules)
    if recompute:
        for name in names:
            module = model.get_submodule(name)
            module.forward = _checkpointed(module.forward, checkpoint)
    processor = AutoProcessor.from_pretrained(model_dir, trust_remote_code=trust_remote_code)
    batch = encode(processor, builtin_samples(media_of(processor))[0], Path(model_dir))
    batch = prepare_batch(batch, accepted_kwargs(model), torch.bfloat16)
    with SavedTensorMeter(model, names) as meter:
        loss = model(**batch, use_cache=False).loss
    loss.backward()
    result = meter.result
    return {"measured": result, "predicted": predicted(result, profiles, list(plan.towers), recompute=recompute),
            "towers": list(plan.towers)}


def _checkpointed(forward: Any, checkpoint: Any) -> Any:
    def run(*args: Any, **kwargs: Any) -> Any:
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    return run

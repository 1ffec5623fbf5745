"""Proof that the YAML's settings took effect, read off the trainer's own log after a smoke.

MindSpeed-MM accepts keys it does not know (``[INFO] Automatically registered YAML field: ...``,
``Field '...' is not defined in ...``) and goes on without them, so a moved or renamed key trains
with a healthy loss and the setting silently off: a smoke that passes then proves nothing about it.
After the run, against the config the smoke trained with:

- a key under ``model``/``parallel``/``training``/``features``/``tools`` (the settings classes;
  ``data.dataset_param`` is a dict the dataset itself reads) that the checkout registered
  automatically or did not define was ignored, unless the checkout's code reads an extra of that
  name (``getattr(args, "recompute", ...)``: ``features.recompute`` is such an extra, read by
  ``FeaturesApplier``, not a schema field);
- with recompute on where this checkout reads it (``features`` since 2026-04-27, ``parallel`` before;
  ``hooks.framework.checkout.facts``), every ``recompute_plan.apply_modules`` pattern matched a module
  the trainer logged as recomputed (``Applying recompute to module: <name>``), and only those were;
  recompute written in the other place (still a schema field at 57069cd5, but never read) fails;
- every ``model.freeze`` pattern matched a module the trainer logged as frozen;
- ``loss_cfg`` sits where the checkout reads it and its ``loss_type`` is one the trainer's code compares
  against (``hooks.framework.checkout.loss_types``; the loss type is not logged, so this is read off the code).

Each finding is one line naming the key or pattern; ``verified`` says what was checked, for the report.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hooks import dig
from hooks.framework.checkout import facts, loss_types
from hooks.model.matching import module_name_match

SETTINGS_SECTIONS = ("model", "parallel", "training", "features", "tools")
_REGISTERED = re.compile(r"Automatically registered YAML field: ([\w.]+)")
_UNDEFINED = re.compile(r"Field '(\w+)' is not defined in (\w+)")
_RECOMPUTED = re.compile(r"Applying recompute to module: (\S+)")
_FROZEN = re.compile(r"freezing module (\S+?)\.\.\.")
# Logged at DEBUG by the framework; shown by the smoke's observer (hooks/smoke/observer).
_FSDP_APPLIED = re.compile(r"\[FSDP2\]: Apply fsdp2 to module <([^>]*)>")
_EP_APPLIED = re.compile(r"\[Expert Parallel\]: Apply ep to module <([^>]*)>")
_DDP_MODE = "DDP mode is enabled (fully_shard_parallel_size=1)"  # the framework's one-shard-rank path
_PARAM_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}


_READ_EXTRA = re.compile(r"""getattr\(\s*[\w.\[\]()]+\s*,\s*["'](\w+)["']""")


FSDP_CODE = Path("mindspeed_mm/fsdp")  # the plugin trainer, its features and model plugins (not the Megatron path)


def extras_read(checkout: Path | None) -> set[str]:
    """Names the plugin trainer's code reads as extras (``getattr(x, "name", ...)`` in ``mindspeed_mm/fsdp/``)."""
    if checkout is None or not (checkout / FSDP_CODE).is_dir():
        return set()
    names: set[str] = set()
    for path in (checkout / FSDP_CODE).rglob("*.py"):
        try:
            names.update(_READ_EXTRA.findall(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return names


def ignored_keys(log_text: str, read: set[str] = frozenset()) -> list[str]:
    """Settings keys the trainer did not know (registered on the fly or undefined) and no code reads, in log order."""
    found = [key for key in _REGISTERED.findall(log_text)
             if key.split(".")[0] in SETTINGS_SECTIONS and key.rpartition(".")[2] not in read]
    found += [f"{key} ({cls})" for key, cls in _UNDEFINED.findall(log_text) if key not in read]
    return list(dict.fromkeys(found))


def _patterns_reached(patterns: list[str], applied: list[str], what: str, key: str) -> tuple[list[str], str]:
    """Problems for patterns no applied module matches and modules no pattern names; else the verified line."""
    missing = [p for p in patterns if not any(module_name_match(p, n) for n in applied)]
    stray = [n for n in applied if not any(module_name_match(p, n) for p in patterns)]
    problems = [f"{key} pattern {p!r} reached no module in the trainer ({what})" for p in missing]
    problems += [f"the trainer applied {what} to {n}, which no {key} pattern names" for n in stray]
    return problems, "" if problems else f"{what} applied to {len(applied)} modules, every {key} pattern matched"


def loss_findings(cfg: dict[str, Any], checkout: Path | None) -> tuple[list[str], list[str]]:
    """``loss_cfg`` where this checkout reads it, with a ``loss_type`` its trainer implements."""
    loss_in = facts(checkout)["loss_in"] if checkout else "features"
    problems = [f"YAML key {place}.loss_cfg is not where this MindSpeed-MM reads the loss: move it under {loss_in}:"
                for place in {"features", "model"} - {loss_in} if dig(cfg, place, "loss_cfg")]
    loss_type = dig(cfg, loss_in, "loss_cfg", "loss_type")
    known = loss_types(checkout) if checkout else []
    if loss_type is not None and known and loss_type not in known:
        problems.append(f"{loss_in}.loss_cfg.loss_type {loss_type!r} is not one this trainer implements ({known})")
    if problems or loss_type is None:
        return problems, []
    return [], [f"loss type {loss_type!r} at {loss_in}.loss_cfg, one the trainer implements"
                + (f" ({', '.join(known)})" if known else "")]


def unit_findings(log_text: str, cfg: dict[str, Any]) -> tuple[list[str], list[str]]:
    """FSDP2 units and expert parallel as the trainer applied them (its ``Apply ... to module`` lines)."""
    problems, verified = [], []
    units = dig(cfg, "parallel", "fsdp_plan", "apply_modules") or []
    if units and _DDP_MODE in log_text:
        verified.append("world size 1: the trainer ran DDP (fully_shard_parallel_size=1), as MindSpeed-MM does with "
                        "one shard rank and no meta init; the FSDP2 units are not applied on one rank")
    elif units:
        found, line = _patterns_reached(units, list(dict.fromkeys(_FSDP_APPLIED.findall(log_text))), "FSDP2",
                                        "parallel.fsdp_plan.apply_modules")
        problems += found
        verified += [line] if line else []
    experts = dig(cfg, "parallel", "ep_plan", "apply_modules") or []
    if experts and int(dig(cfg, "parallel", "expert_parallel_size") or 1) > 1:
        found, line = _patterns_reached(experts, list(dict.fromkeys(_EP_APPLIED.findall(log_text))),
                                        "expert parallel", "parallel.ep_plan.apply_modules")
        problems += found
        verified += [line] if line else []
    elif experts:
        verified.append("expert parallel planned, inactive at expert_parallel_size 1 (as the YAML says)")
    return problems, verified


def _observations(observed: Path | None) -> dict[int, dict[str, Any]]:
    """The observer's per-rank records (``observe_rank<r>.json``)."""
    if observed is None or not observed.is_dir():
        return {}
    return {int(p.stem.removeprefix("observe_rank")): json.loads(p.read_text())
            for p in observed.glob("observe_rank*.json")}


def _weights_source(cfg: dict[str, Any]) -> str:
    """The YAML key (and value) the trainer reads the weights from: ``training.load`` under meta init."""
    if dig(cfg, "training", "init_model_with_meta_device"):
        return f"training.load ({dig(cfg, 'training', 'load')})"
    return f"model.model_name_or_path ({dig(cfg, 'model', 'model_name_or_path')})"


def weight_findings(records: dict[int, dict[str, Any]], cfg: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Did the built model's weights come from the model folder's files (rank 0's check before step 1)?"""
    weights = records.get(0, {}).get("weights")
    if weights is None:
        return [], []
    source = _weights_source(cfg)
    if weights.get("error") or weights.get("mismatch"):
        what = weights.get("error") or f"{', '.join(weights['mismatch'])} differ from the files"
        return [f"the trained weights are not the model's: {what} in {weights.get('folder')}; the trainer loaded "
                f"them through {source}: point it at the model folder"], []
    tied = "; tied embeddings still shared" if weights.get("tied") else ""
    return [], [f"weights: {len(weights['checked'])} tensors equal the model folder's files "
                f"({', '.join(weights['checked'])}), loaded through {source.split(' ')[0]}{tied}"]


_LOAD_ERROR = re.compile(r"checkpoint|load_strict|safetensors|state_dict|size mismatch", re.IGNORECASE)


def load_error(error: str, cfg: dict[str, Any], model_dir: Path) -> str:
    """``error`` naming ``training.load`` when the trainer died loading the weights it names (keys that do not
    match under ``load_strict``), so the user edits the key rather than reading a traceback."""
    source = _weights_source(cfg)
    meta_load = source.startswith("training.load") and dig(cfg, "training", "load")
    if not (error and meta_load and _LOAD_ERROR.search(error)):
        return error
    return f"{error} -- the trainer loads the weights through {source}: point it at the model folder ({model_dir})"


def shard_findings(records: dict[int, dict[str, Any]], cfg: dict[str, Any], model_dir: Path | None,
                   nproc: int, observed: Path | None = None) -> tuple[list[str], list[str]]:
    """Each rank's parameter, gradient and AdamW bytes after step 1 against the memory plan's arithmetic."""
    measured = {r: rec["shards"] for r, rec in records.items() if isinstance(rec.get("shards"), dict)}
    if not measured or model_dir is None:
        return [], []
    if any("error" in m for m in measured.values()):
        return [f"shard sizes not measured: {next(m['error'] for m in measured.values() if 'error' in m)}"], []
    from hooks.model.memory import Layout, rank_bytes, unused_note
    from hooks.smoke.reference_run import smoke_shapes

    shapes = smoke_shapes(observed, model_dir, cfg).shapes
    layout = Layout(world=nproc, ep=int(dig(cfg, "parallel", "expert_parallel_size") or 1))
    freeze = dig(cfg, "model", "freeze") or []
    ddp = nproc == 1 and not dig(cfg, "training", "init_model_with_meta_device")
    width = _PARAM_BYTES.get(str(dig(cfg, "parallel", "fsdp_plan", "param_dtype")).lower(), 4) if ddp else 4
    problems, lines = [], []
    for rank, got in sorted(measured.items()):
        unused = [n.removeprefix("module.") for n in got.get("no_grad", [])]  # DDP's wrapper names
        want = rank_bytes(shapes, layout, rank, freeze=freeze, no_grad=unused, param_bytes=width, state_bytes=width)
        pairs = [("params", want.params_local, got["params_local"]), ("grads", want.grads_local, got["grads_local"]),
                 ("optimizer", want.optimizer, got["optimizer"])]
        problems += [f"rank {rank} holds {g:,} bytes of {what}, the memory plan's arithmetic says {w:,}"
                     for what, w, g in pairs if w != g]
        lines.append(f"rank {rank} " + ", ".join(f"{what} {g:,}" for what, _, g in pairs))

    first = next((m.get("no_grad") for m in measured.values() if m.get("no_grad")), [])
    unused = [n.removeprefix("module.") for n in first]
    what = "unsharded sizes (world size 1, DDP)" if ddp else "shard sizes"
    verified = [] if problems else [f"{what} equal the memory plan's arithmetic to the byte ({'; '.join(lines)})"
                                    + unused_note(unused)]
    return problems, verified


def settings_findings(log_text: str, cfg: dict[str, Any], checkout: Path | None = None, *,
                      observed: Path | None = None, model_dir: Path | None = None,
                      nproc: int = 2) -> tuple[list[str], list[str]]:
    """(problems, verified) for the smoke's config ``cfg``, the trainer's log in ``checkout`` and the observer's
    records in ``observed``."""
    problems = [f"YAML key {key} is not a setting of this MindSpeed-MM: the trainer ignored it (move or rename it "
                "as the checkout's mindspeed_mm/fsdp/params/ define)" for key in ignored_keys(log_text,
                                                                                              extras_read(checkout))]
    verified = []
    recompute_in = facts(checkout)["recompute_in"] if checkout else "features"
    for place in {"features", "parallel"} - {recompute_in}:  # the other place: a schema field the trainer ignores
        if dig(cfg, place, "recompute") or dig(cfg, place, "recompute_plan", "apply_modules"):
            problems.append(f"YAML key {place}.recompute / {place}.recompute_plan is not where this MindSpeed-MM "
                            f"reads recompute: move them under {recompute_in}:")
    recomputed = list(dict.fromkeys(_RECOMPUTED.findall(log_text)))
    patterns = dig(cfg, recompute_in, "recompute_plan", "apply_modules") or []
    if dig(cfg, recompute_in, "recompute") and patterns:
        key = f"{recompute_in}.recompute_plan.apply_modules"
        found, line = _patterns_reached(patterns, recomputed, "recompute", key)
        problems += found
        verified += [line] if line else []
    found, lines = loss_findings(cfg, checkout)
    problems += found
    verified += lines
    freeze = dig(cfg, "model", "freeze") or []
    frozen = _FROZEN.findall(log_text)
    problems += [f"freeze pattern {p!r} froze no module in the trainer (model.freeze)" for p in freeze
                 if not any(module_name_match(p, name) for name in frozen)]
    if freeze and all(any(module_name_match(p, n) for n in frozen) for p in freeze):
        verified.append(f"freeze applied to {len(set(frozen))} modules")
    records = _observations(observed)
    for found, lines in (unit_findings(log_text, cfg) if observed else ([], []), weight_findings(records, cfg),
                         shard_findings(records, cfg, model_dir, nproc, observed)):
        problems += found
        verified += lines
    if not problems:
        verified.append("no YAML setting ignored by the trainer")
    return problems, verified

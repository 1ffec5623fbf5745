"""Proof that every medium in the smoke's data reached ``forward`` on a real item and changed the loss.

A finite, changing loss says nothing about the media: a batch that lost its ``pixel_values`` trains the
language model on the ``<image>`` placeholder's text just as well, and a vision tower whose features are
multiplied away still runs. So, per medium the smoke's training data holds (image, video, audio: files named
under the records' media key or placeholders in their text), the smoke proves from the real trainer's ranks:

- **where a real item is trained**: the smoke trains the records in file order (no shuffle, one sample per rank
  and step), so MindSpeed-MM's sampler (``BaseRandomBatchSampler``) hands record ``i`` to rank ``i % R`` at step
  ``i // R + 1`` of the first epoch (R data-parallel ranks; with ``data_sharding`` each rank reads its own
  contiguous bucket): ``real_items`` finds each medium's first record within the smoke's steps, and the
  observer (``hooks/smoke/observer``) records the batches and gradients of that step, not only of step 1. A
  batch drawn from records without the medium carries the collator's masked stand-in (a white image whose
  tokens nothing attends to, so that every rank runs the tower and FSDP does not hang): it gets no gradient,
  so a proof at a step holding only stand-ins would say nothing of the data;
- **it reached forward**: at that step, that rank's batch, as ``forward`` got it (``describe_batch``), holds a
  non-empty floating-point tensor under a key whose medium is that one (``hooks.model.modality.input_medium``:
  ``pixel_values``, ``pixel_values_videos``, ``input_features`` ...). Integer inputs of the medium (grids,
  sizes, masks, flags) describe the media but carry none of it: they alone are not an arrival;
- **it changed the loss**: the first trainable parameters downstream of the medium have, at that step, a
  finite non-zero gradient norm (each parameter's norm gathered whole): the tower's (``tower_for``: videos go
  through the vision tower), or, where the tower is frozen or gets none, the connector's beside it
  (``hooks.model.modality.connector_module``: ``multi_modal_projector`` ...). A connector whose weights are all
  zero (a fresh one, as ``from_config`` leaves Gemma 3's projection) passes no gradient back into the tower,
  though the medium changes the loss through the connector's own gradient: a note, never a failure. A tower
  frozen by the YAML's ``model.freeze`` is reported as frozen; a model without a separate tower for the
  medium is said to have none; a tower that is a VQ tokenizer (Chameleon's and Emu3's ``vqmodel``: a
  ``quantize`` module turns the image into discrete tokens through an ``argmin``) gets no gradient by design,
  and is said to be one. None of these is a failure; the last rests on the module's name.

A medium whose first record lies past the smoke's steps is "not verified", with the record to move.

``prove_media`` reads the run's files; the rest are pure functions over what it read (tier-1 tested).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hooks.data.columns import RECORD_KEYS
from hooks.model.modality import MEDIA, connector_kind, connector_module, input_medium, tower_for, tower_medium
from hooks.smoke.reference import WRAPPERS
from hooks.smoke.training_yaml import TrainingYaml

PLACEHOLDERS = {"image": "<image>", "video": "<video>", "audio": "<audio>"}
TOWER_WORDS = {"vision": "vision tower", "audio": "audio tower"}
QUANTIZER = re.compile(r"\.(quantize|quantizer|codebook)s?\.")  # a VQ tokenizer's module, inside a tower


@dataclass(frozen=True)
class DataMedium:
    """What the smoke's training records hold of one medium."""

    medium: str
    files: int  # entries under the records' key for it (``images``/``videos``/``audios`` or data_fields' key)
    placeholders: int  # ``<image>``/``<video>``/``<audio>`` marks in the records' text
    records: int  # records with at least one file or mark
    total: int  # records the smoke trains on

    @property
    def present(self) -> bool:
        return self.files > 0 or self.placeholders > 0

    def named(self) -> str:
        """What the data says of the medium, in words ("the data names 8 image files")."""
        if self.files:
            return f"the data names {self.files} {self.medium} file{'s' if self.files != 1 else ''}"
        return (f"the data's text has {self.placeholders} {PLACEHOLDERS[self.medium]} placeholder"
                f"{'s' if self.placeholders != 1 else ''}")


@dataclass(frozen=True)
class BatchInput:
    """One ``forward`` input of a recorded batch, described without its values (the observer writes these as
    JSON: the smoke's own process then needs no torch)."""

    key: str
    shape: list[int] | None  # a tensor's shape; None for a list of tensors of differing shapes
    items: int  # tensors under the key (1 for a tensor, the list's length for a list)
    numel: int  # elements in all of them
    floating: bool  # floating-point values: the medium's content (pixels, features), not its grids or masks

    def text(self) -> str:
        shape = f"[{', '.join(str(n) for n in self.shape)}]" if self.shape is not None else f"{self.items} tensors"
        return f"{self.key} {shape}"


@dataclass(frozen=True)
class Tower:
    """The parameters of one tower kind (``vision``/``audio``) at step 1."""

    kind: str
    roots: list[str]  # the outermost modules named as that tower (``model.visual``, ``audio_tower``)
    trained: list[str]  # those of them with a non-zero step-1 gradient
    discrete: list[str]  # those that hold a vector quantizer (a ``quantize``/``codebook`` module: VQ tokenizers)
    trainable: int  # parameters that require a gradient
    frozen: int  # parameters that do not
    with_grad: int  # trainable parameters with a step-1 gradient
    norm: float  # the step-1 gradient norm over them (sqrt of the sum of squares)

    def name(self, roots: list[str] | None = None) -> str:
        roots = self.roots if roots is None else roots
        return " and ".join(roots) if roots else f"the {TOWER_WORDS[self.kind]}"

    @property
    def tokenizes(self) -> bool:
        """Every trainable root is a VQ tokenizer (Chameleon's, Emu3's ``vqmodel``): the medium becomes discrete
        tokens through an ``argmin``, so no gradient reaches the tower by design."""
        return bool(self.discrete) and not self.trained and set(self.discrete) >= set(self.roots)


# --- the data ------------------------------------------------------------------------------------------


def data_media(records: list[dict[str, Any]], files_of: dict[str, Any]) -> dict[str, DataMedium]:
    """Each medium's files, placeholders and records in ``records``; ``files_of[medium](record)`` lists a
    record's files of it (``FieldMap.images_of`` for branch c). Placeholders are counted in the whole record's
    text, whatever its shape (``messages``, ``conversations``, prompt/response keys)."""
    found = {}
    for medium in MEDIA:
        files = placeholders = holding = 0
        for record in records:
            mine, marks = _held(record, medium, files_of)
            files, placeholders, holding = files + mine, placeholders + marks, holding + bool(mine or marks)
        found[medium] = DataMedium(medium, files, placeholders, holding, len(records))
    return found


def _held(record: dict[str, Any], medium: str, files_of: dict[str, Any]) -> tuple[int, int]:
    """(files, placeholders) of ``medium`` in one record."""
    mine = len(files_of[medium](record)) if medium in files_of else 0
    return mine, json.dumps(record, ensure_ascii=False).count(PLACEHOLDERS[medium])


@dataclass(frozen=True)
class RealItem:
    """Where the smoke trains a medium's first real item: record ``record`` (0-based, in file order) on ``rank`` at
    ``step`` (1-based); ``step`` 0: no record holding it is trained within the smoke's steps; ``shared``: every step
    that trains one also trains a real item of another medium through the same tower (``image`` beside ``video``),
    whose gradient the tower's sums with this one's."""

    medium: str
    record: int
    step: int
    rank: int
    shared: str = ""

    def text(self) -> str:
        return f"a real {self.medium}: record {self.record + 1}'s, on rank {self.rank} at step {self.step}"


def trained_at(index: int, total: int, ranks: int, sharding: bool = False) -> tuple[int, int] | None:
    """(step, rank) at which MindSpeed-MM's ``BaseRandomBatchSampler`` (micro-batch 1, no shuffle, drop_last) hands
    record ``index`` of ``total`` to a data-parallel rank in the first epoch; None for a record it drops (the tail
    that does not fill every rank)."""
    if ranks < 1 or total < ranks:
        return None
    if sharding:  # each rank reads its own contiguous bucket of total // ranks records
        bucket = total // ranks
        return (index % bucket + 1, index // bucket) if index < bucket * ranks else None
    return (index // ranks + 1, index % ranks) if index < total - total % ranks else None


def real_items(records: list[dict[str, Any]], files_of: dict[str, Any], ranks: int, steps: int,
               sharding: bool = False) -> dict[str, RealItem]:
    """Each medium the records hold -> where its first real item is trained alone among the media of its tower
    (``RealItem.step`` 0: none within ``steps``; ``shared``: none alone, the first with another medium)."""
    held = {medium: {i for i, record in enumerate(records) if any(_held(record, medium, files_of))} for medium in MEDIA}
    at: dict[int, list[tuple[int, int]]] = {}  # step -> (rank, record) trained then
    for i in range(len(records)):
        if (place := trained_at(i, len(records), ranks, sharding)) and place[0] <= steps:
            at.setdefault(place[0], []).append((place[1], i))
    found: dict[str, RealItem] = {}
    for medium in MEDIA:
        if not held[medium]:
            continue
        others = [m for m in MEDIA if m != medium and tower_for(m) == tower_for(medium)]
        first: RealItem | None = None
        for step in sorted(at):
            mine = sorted((rank, i) for rank, i in at[step] if i in held[medium])
            if not mine:
                continue
            beside = [m for m in others if any(i in held[m] for _, i in at[step])]
            item = RealItem(medium, mine[0][1], step, mine[0][0], ", ".join(beside))
            first = first or item
            if not beside:
                first = item
                break
        found[medium] = first or RealItem(medium, min(held[medium]), 0, 0)
    return found


def _listed(key: str):  # noqa: ANN202 - a record -> its files under key, as FieldMap.images_of reads them
    def files(record: dict[str, Any]) -> list[Any]:
        value = record.get(key) or []
        return [value] if isinstance(value, str) else list(value)

    return files


def record_files(cfg: dict[str, Any]) -> dict[str, Any]:
    """How the smoke's config reads a record's media files, per medium: branch c through the ``FieldMap`` of
    ``data_fields`` (the dataset plugin's own, ``partials/processor_dataset.py``), the ``huggingface`` dataset
    through ``attr`` (``images: images``; ``videos``/``audios`` by their default names)."""
    param = TrainingYaml.of(cfg).dataset_param
    if "data_fields" in param:
        from hooks.data.records import dataset_runtime

        fields = dataset_runtime().FieldMap(**(param.get("data_fields") or {}))
        return {"image": fields.images_of, "audio": getattr(fields, "audios_of", _listed("audios")),
                "video": _listed(RECORD_KEYS["video"])}
    attr = param.get("attr") or {}
    return {medium: _listed(str(attr.get(key) or key)) for medium, key in RECORD_KEYS.items()}


# --- the batch -----------------------------------------------------------------------------------------


def _tensors(value: Any) -> list[Any]:
    """The tensors in ``value``: itself, or those in a (nested) list or tuple (per-sample media lists)."""
    if hasattr(value, "shape") and hasattr(value, "numel"):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def describe_batch(batch: dict[str, Any]) -> list[dict[str, Any]]:
    """Each tensor input of ``batch`` as ``BatchInput`` fields (JSON-ready); other values are left out."""
    described = []
    for key in sorted(batch):
        tensors = _tensors(batch[key])
        if not tensors:
            continue
        shapes = {tuple(t.shape) for t in tensors}
        single = hasattr(batch[key], "shape") or len(shapes) == 1 and len(tensors) == 1
        described.append(asdict(BatchInput(
            key=str(key), shape=list(tensors[0].shape) if single else None, items=len(tensors),
            numel=sum(int(t.numel()) for t in tensors), floating=any(t.is_floating_point() for t in tensors))))
    return described


def arrivals(batches: dict[int, list[BatchInput]], medium: str) -> list[tuple[int, BatchInput]]:
    """(rank, input) for each non-empty floating-point input of ``medium`` in the ranks' step-1 batches."""
    return [(rank, item) for rank in sorted(batches) for item in batches[rank]
            if input_medium(item.key) == medium and item.floating and item.numel > 0]


# --- the tower -----------------------------------------------------------------------------------------


def plain_name(name: str) -> str:
    """A parameter's name without what wrappers insert (``_checkpoint_wrapped_module.``), as the model names it."""
    for wrapper in WRAPPERS:
        name = name.replace(wrapper, "")
    return name


def _root(name: str, kind: str) -> str | None:
    """The outermost module of parameter ``name`` named as a ``kind`` tower (None: not in one). The parameter's
    own name is not a module: a learned ``image_newline`` on the model is no tower."""
    parts = name.split(".")[:-1]
    for end in range(1, len(parts) + 1):
        if tower_medium(".".join(parts[:end])) == kind:
            return ".".join(parts[:end])
    return None


def tower(kind: str, grads: dict[str, float], no_grad: dict[str, bool]) -> Tower:
    """The ``kind`` tower at a step, from each parameter's gradient norm (``grads``) and the parameters that have
    none (``no_grad``: name -> whether it requires one)."""
    return _modules(kind, grads, no_grad, lambda name: _root(name, kind))


def connector(kind: str, grads: dict[str, float], no_grad: dict[str, bool]) -> Tower:
    """The connectors beside the towers that carry the ``kind`` tower's features into the language model
    (``hooks.model.modality.connector_module``; one whose name names no medium belongs to every tower kind the
    model has), as a ``Tower`` of them."""
    names = [plain_name(n) for n in [*grads, *no_grad]]
    kinds = {k for k in ("vision", "audio") if any(_root(n, k) for n in names)}
    return _modules(kind, grads, no_grad, lambda name: (module if (module := connector_module(name)) and kind in
                                                        connector_kind(module, kinds) else None))


def _modules(kind: str, grads: dict[str, float], no_grad: dict[str, bool], root_of: Any) -> Tower:
    """The parameters whose ``root_of(plain name)`` is a module (not None), summed per module."""
    roots: dict[str, float] = {}  # root -> its sum of squared gradient norms
    discrete: dict[str, None] = {}
    trainable = frozen = with_grad = 0
    for name, requires, norm in [*((n, True, g) for n, g in grads.items()), *((n, r, None) for n, r in
                                                                                 no_grad.items())]:
        plain = plain_name(name)
        root = root_of(plain)
        if root is None:
            continue
        roots[root] = roots.get(root, 0.0) + (float(norm) ** 2 if norm is not None else 0.0)
        if QUANTIZER.search(plain[len(root):]):
            discrete[root] = None
        trainable, frozen, with_grad = trainable + requires, frozen + (not requires), with_grad + (norm is not None)
    return Tower(kind, list(roots), [r for r, sq in roots.items() if sq != 0.0], list(discrete), trainable, frozen,
                 with_grad, math.sqrt(sum(roots.values())))


def _frozen_by(freeze: list[str], kind: str) -> list[str]:
    """The ``model.freeze`` patterns that name a ``kind`` tower."""
    return [pattern for pattern in freeze if tower_medium(pattern) == kind]


# --- the verdict ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """What the observer recorded at one step: each rank's batch, each parameter's gradient norm (rank 0's,
    gathered whole) and the parameters without one (name -> whether it requires one; None: not recorded, then a
    tower with no gradient at all cannot be told from no tower)."""

    batches: dict[int, list[BatchInput]]
    grads: dict[str, float]
    no_grad: dict[str, bool] | None


def _good(part: Tower) -> bool:
    return bool(part.trainable) and part.norm > 0 and math.isfinite(part.norm)


def _zero_note(medium: str, part: Tower, found: Tower, zero: dict[str, bool] | None) -> str | None:
    """The note for a connector that trained while the tower got no gradient, where every weight matrix of the
    connector is all zeros (``zero``: the observer's connector weights -> all zero at step 1); None otherwise."""
    mine = {name: flag for name, flag in (zero or {}).items() if any(plain_name(name).startswith(f"{root}.")
                                                                     for root in part.roots)}
    if not mine or not all(mine.values()):
        return None
    return (f"note: {part.name()}'s weights are all zero (a fresh connector, as from_config leaves it), so no "
            f"gradient flows back past it into {found.name()} until it has trained; the {medium} changed the loss "
            f"through {part.name()}'s own gradient")


def _judge(medium: str, where: str, key: str, step: int, found: Tower, joined: Tower, patterns: list[str],
           no_grad: dict[str, bool] | None, zero: dict[str, bool] | None) -> tuple[str, str, str]:
    """(problem, verified, unknown) for one medium that reached forward at ``step``: did the first trainable
    parameters downstream of it (the tower ``found``, the connector ``joined``) get a gradient?"""
    at = f"at step {step}"
    if _good(found):
        part = f"; {found.frozen} of its parameters frozen" if found.frozen else ""
        return "", (f"{medium} reached forward ({where}) and {found.name(found.trained)} got a gradient (norm "
                    f"{found.norm:.1e}{part}) {at}"), ""
    for part in (found, joined):
        if part.trainable and part.with_grad and not math.isfinite(part.norm):
            return (f"{medium}: {key} reached forward but {part.name()}'s step-{step} gradient is not finite (norm "
                    f"{part.norm})"), "", ""
    if found.trainable and found.tokenizes:
        return "", (f"{medium} reached forward ({where}); {found.name()} turns it into discrete tokens (a vector "
                    "quantizer: no gradient flows into it, by design), which the language model trains on: no "
                    "tower gradient to check"), ""
    if _good(joined):
        through = f"{joined.name(joined.trained)} got a gradient (norm {joined.norm:.1e}) {at}"
        if not found.trainable:
            state = (f"{found.name()} is frozen{' (model.freeze: ' + ', '.join(patterns) + ')' if patterns else ''}"
                     if found.frozen or patterns else f"the model has no separate {TOWER_WORDS[found.kind]}")
            return "", f"{medium} reached forward ({where}) and {through}; {state}", ""
        note = _zero_note(medium, joined, found, zero)
        if note:
            return "", f"{medium} reached forward ({where}) and {through}, {found.name()} none: {note}", ""
        if zero is None:
            return "", "", (f"{medium}: reached forward ({where}) and {through} but {found.name()} got none; whether "
                            f"{joined.name()}'s weights are zero (which would explain it) was not recorded")
        return (f"{medium}: {key} reached forward and {through}, but {found.name()}'s parameters got none though "
                f"{joined.name()}'s weights are not zero: {found.name()}'s output does not reach the loss"), "", ""
    if found.trainable or joined.trainable:
        names = [p.name() for p in (found, joined) if p.trainable]
        missing = f"neither {names[0]} nor {names[1]} got a gradient" if len(names) == 2 else f"{names[0]} got none"
        return (f"{medium}: {key} reached forward ({where}) but {missing} {at}: the {medium}'s features did not "
                "reach the loss"), "", ""
    if found.frozen or (no_grad is None and patterns):
        named = f" (model.freeze: {', '.join(patterns)})" if patterns else ""
        return "", (f"{medium} reached forward ({where}); {found.name()} is frozen{named}: it takes no gradient, "
                    "as the YAML says"), ""
    if no_grad is None:
        return "", "", (f"{medium}: reached forward ({where}); whether a {TOWER_WORDS[found.kind]} got a gradient "
                        f"could not be evaluated: no parameter of one has a step-{step} gradient and the observer "
                        "recorded no list of the parameters without one")
    return "", (f"{medium} reached forward ({where}); the model has no separate {TOWER_WORDS[found.kind]} (its "
                f"other layers take the {medium} input directly): no tower gradient to check"), ""


def media_findings(data: dict[str, DataMedium], seen: dict[int, Seen], freeze: list[str],
                   real: dict[str, RealItem], zero: dict[str, bool] | None = None,
                   trained: str = "") -> tuple[list[str], list[str], list[str]]:
    """(problems, verified, not verified) for each medium ``data`` holds.

    ``seen``: what the observer recorded at each step it recorded; ``real``: where each medium's first real item is
    trained (``real_items``); ``zero``: the connectors' weight matrices -> all zero at step 1 (None: not recorded);
    ``freeze``: the YAML's ``model.freeze``; ``trained``: which records the smoke's steps train, in words.
    """
    problems: list[str] = []
    verified: list[str] = []
    unknown: list[str] = []
    for medium in MEDIA:
        held = data.get(medium)
        if held is None or not held.present:
            continue
        item = real.get(medium)
        if item is None or item.step == 0:
            first = f"record {item.record + 1}" if item is not None and item.record >= 0 else "none"
            unknown.append(f"{medium}: no real {medium} is trained in the smoke ({trained or 'its steps'}; the "
                           f"first record with one: {first}), only masked stand-ins: put a record with one among "
                           "the first records to prove it")
            continue
        if item.shared:
            unknown.append(f"{medium}: not verified on its own: every step that trains a real {medium} (first "
                           f"{item.text()}) also trains a real {item.shared} through the same tower, whose gradient "
                           f"the tower's sums with the {medium}'s: move a record holding one to a step whose other "
                           f"records hold no {item.shared} (the sampler deals records to ranks in file order)")
            continue
        step = seen.get(item.step)
        if step is None:
            unknown.append(f"{medium}: could not evaluate: the observer recorded nothing at step {item.step}, where "
                           f"{item.text()} is trained")
            continue
        came = arrivals({item.rank: step.batches.get(item.rank, [])}, medium)
        if not came:
            keys = sorted({i.key for i in step.batches.get(item.rank, [])})
            meta = sorted({k for k in keys if input_medium(k) == medium})
            holds = f"; {', '.join(meta)} hold{'s' if len(meta) == 1 else ''} no {medium} content" if meta else ""
            problems.append(f"{medium}: {held.named()} but no {medium} input reached forward at step {item.step} "
                            f"on rank {item.rank}, which trains record {item.record + 1}'s (batch keys: "
                            f"[{', '.join(keys)}]{holds}): the model trained on the placeholder's text")
            continue
        ranks = sorted({r for r, _ in arrivals(step.batches, medium)})
        others = f", {len(ranks)} ranks in all" if len(ranks) > 1 else ""
        where = f"{came[0][1].text()} on rank {item.rank}{others}; a real one: record {item.record + 1}"
        kind = tower_for(medium)
        grads, no_grad = step.grads, step.no_grad
        problem, good, open_ = _judge(medium, where, came[0][1].key, item.step, tower(kind, grads, no_grad or {}),
                                      connector(kind, grads, no_grad or {}), _frozen_by(freeze, kind), no_grad, zero)
        for found, line in ((problems, problem), (verified, good), (unknown, open_)):
            if line:
                found.append(line)
    return problems, verified, unknown


def media_hint(problems: list[str]) -> str:
    """The hint for the media proof's failures: what was really missing."""
    if any(" input reached forward at step" in p for p in problems):
        return ("each medium's inputs must reach forward and its tower: compare the batch keys with forward's "
                "(MIGRATION.md, 'Batch keys') and what the model plugin passes on to the tower")
    return ("the medium reached forward but its features did not reach the loss: the model's forward must put the "
            "tower's (and connector's) output at the placeholder tokens (the config's media token id is the "
            "processor's), and nothing may detach it or mask those tokens")


# --- the run's files -----------------------------------------------------------------------------------


def trained_records(data_json: Path, max_samples: int | None = None) -> list[dict[str, Any]]:
    """The records the smoke trains on: the file's first ``max_samples`` (JSON list or JSONL)."""
    from hooks.data.records import dataset_runtime

    records = dataset_runtime().read_records(Path(data_json))
    return records[:max_samples] if max_samples else records


def data_ranks(cfg: dict[str, Any], nproc: int) -> int:
    """The data-parallel ranks the sampler deals records to: the world over the context-parallel degree."""
    parallel = cfg.get("parallel") if isinstance(cfg.get("parallel"), dict) else {}
    cp = int(parallel.get("ulysses_parallel_size") or 1) * int(parallel.get("ring_attention_size") or 1)
    return max(1, nproc // max(1, cp))


def _schedule(cfg: dict[str, Any]) -> tuple[int, bool]:
    """(the smoke's steps, whether the sampler shards the data per rank)."""
    def section(node: Any, key: str) -> dict[str, Any]:
        return node[key] if isinstance(node, dict) and isinstance(node.get(key), dict) else {}

    loader = section(section(cfg, "data"), "dataloader_param")
    return int(section(cfg, "training").get("train_iters") or 0), bool(loader.get("data_sharding"))


def smoke_real_items(cfg: dict[str, Any], data_json: Path, nproc: int) -> dict[str, RealItem]:
    """``real_items`` for a smoke config and its data (the steps the observer must record beside step 1)."""
    steps, sharding = _schedule(cfg)
    records = trained_records(data_json, TrainingYaml.of(cfg).max_samples)
    return real_items(records, record_files(cfg), data_ranks(cfg, nproc), steps, sharding)


def media_steps(cfg: dict[str, Any], data_json: Path, nproc: int) -> list[int]:
    """The steps at which some medium's first real item is trained: the observer records their batches and
    gradients (none where the data cannot be read: the proof then says it could not evaluate)."""
    try:
        return sorted({item.step for item in smoke_real_items(cfg, data_json, nproc).values()
                       if item.step and not item.shared})
    except Exception:  # noqa: BLE001 - prove_media reports the unreadable data
        return []


def _seen(records: dict[int, dict[str, Any]], step: int) -> tuple[Seen | None, str]:
    """What the observer recorded at ``step`` (None, and why, where it is missing)."""
    key = f"step{step}"
    batches = {rank: [BatchInput(**item) for item in record[f"{key}_batch"]]
               for rank, record in records.items() if isinstance(record.get(f"{key}_batch"), list)}
    first = records.get(0) or {}  # rank 0's: the gradients gathered whole
    grads = first.get(f"{key}_grads") or {}
    failed = [f"rank {rank}: {record[f'{key}_batch']['error']}" for rank, record in sorted(records.items())
              if isinstance(record.get(f"{key}_batch"), dict) and "error" in record[f"{key}_batch"]]
    cause = (f"the observer could not describe the step-{step} batch ({'; '.join(failed)})" if failed else
             f"the observer recorded no step-{step} batch" if not batches else
             f"step-{step} gradients ({grads['error']})" if "error" in grads else
             f"the observer recorded no step-{step} gradients" if not grads else "")
    if cause:
        return None, cause
    no_grad = first.get(f"{key}_no_grad")
    return Seen(batches, grads, no_grad if isinstance(no_grad, dict) else None), ""


def prove_media(observed: Path, cfg: dict[str, Any], data_json: Path,
                nproc: int = 2) -> tuple[list[str], list[str], list[str]]:
    """``media_findings`` for a framework smoke's run: its data, its observed folder, its config and its ranks.

    Could-not-evaluate (never evidence either way) where the data or the observer's records cannot be read."""
    try:
        records = trained_records(data_json, TrainingYaml.of(cfg).max_samples)
        data = data_media(records, record_files(cfg))
        real = smoke_real_items(cfg, data_json, nproc)
    except Exception as err:  # noqa: BLE001 - reported as not evaluated
        return [], [], [f"media: could not evaluate: the data {data_json} ({type(err).__name__}: {err})"]
    if not any(held.present for held in data.values()):
        return [], [], []  # text-only data: nothing to prove
    observed_ranks = {int(p.stem.removeprefix("observe_rank")): json.loads(p.read_text())
                      for p in sorted(Path(observed).glob("observe_rank*.json"))}
    seen: dict[int, Seen] = {}
    for step in sorted({item.step for item in real.values() if item.step and not item.shared}):
        found, cause = _seen(observed_ranks, step)
        if found is None:
            present = ", ".join(m for m, item in real.items() if item.step == step)
            return [], [], [f"{present}: could not evaluate whether the data's media reached forward: {cause}"]
        seen[step] = found
    first = observed_ranks.get(0) or {}
    zero = first.get("connector_zero")
    steps, _ = _schedule(cfg)
    ranks = data_ranks(cfg, nproc)
    last = min(steps * ranks, len(records) - len(records) % ranks)
    trained = f"its {steps} steps on {ranks} rank{'s' if ranks != 1 else ''} train records 1-{last}"
    return media_findings(data, seen, TrainingYaml.of(cfg).freeze, real, zero if isinstance(zero, dict) else None,
                          trained)

"""Proof that every medium in the smoke's data reached ``forward`` and that its tower got a gradient.

A finite, changing loss says nothing about the media: a batch that lost its ``pixel_values`` trains the
language model on the ``<image>`` placeholder's text just as well, and a vision tower whose features are
multiplied away still runs. So, per medium the smoke's training data holds (image, video, audio: files named
under the records' media key or placeholders in their text), the smoke proves from the real trainer's ranks:

- **it reached forward**: at step 1 some rank's batch, as ``forward`` got it (recorded by
  ``hooks/smoke/observer`` as ``step1_batch``, described by ``describe_batch``), holds a non-empty
  floating-point tensor under a key whose medium is that one (``hooks.model.modality.input_medium``:
  ``pixel_values``, ``pixel_values_videos``, ``input_features`` ...). Integer inputs of the medium (grids,
  sizes, masks, flags) describe the media but carry none of it: they alone are not an arrival;
- **its tower got a gradient**: the parameters of the modules whose ``tower_medium`` is the medium's tower
  (``tower_for``: videos go through the vision tower) have, in total, a finite non-zero step-1 gradient norm
  (the observer's ``step1_grads``, each parameter's norm gathered whole). A tower frozen by the YAML's
  ``model.freeze`` is reported as frozen; a model without a separate tower for the medium is said to have
  none; a tower that is a VQ tokenizer (Chameleon's and Emu3's ``vqmodel``: a ``quantize`` module turns
  the image into discrete tokens through an ``argmin``) gets no gradient by design, and is said to be one.
  None of the three is a failure; the last rests on the module's name, so a VQ tokenizer that ``forward``
  skips is not told from one that it runs.

The limit, stated: a batch drawn from records without the medium still carries it when the collator adds
a masked stand-in (a white image whose tokens nothing attends to, so that every rank runs the tower and FSDP
does not hang). The batch alone does not tell such a stand-in from the data's own media. Where every record
the smoke trains on holds the medium (the generated sample: 8 images), each rank's batch came from such
records and the arrival is the data's; where some records have none, the check says so beside its verdict
("not verified"), and the arrival rests on the data having the medium, its presence and the tower's gradient.

``prove_media`` reads the run's files; the rest are pure functions over what it read (tier-1 tested).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hooks.model.modality import MEDIA, input_medium, tower_for, tower_medium
from hooks.smoke.reference import WRAPPERS
from hooks.smoke.training_yaml import TrainingYaml

PLACEHOLDERS = {"image": "<image>", "video": "<video>", "audio": "<audio>"}
RECORD_KEYS = {"image": "images", "video": "videos", "audio": "audios"}  # the records' keys by default
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
            mine = len(files_of[medium](record)) if medium in files_of else 0
            marks = json.dumps(record, ensure_ascii=False).count(PLACEHOLDERS[medium])
            files, placeholders, holding = files + mine, placeholders + marks, holding + bool(mine or marks)
        found[medium] = DataMedium(medium, files, placeholders, holding, len(records))
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
    """The ``kind`` tower at step 1, from each parameter's gradient norm (``grads``) and the parameters that have
    none (``no_grad``: name -> whether it requires one)."""
    roots: dict[str, float] = {}  # root -> its sum of squared gradient norms
    discrete: dict[str, None] = {}
    trainable = frozen = with_grad = 0
    for name, requires, norm in [*((n, True, g) for n, g in grads.items()), *((n, r, None) for n, r in
                                                                                 no_grad.items())]:
        plain = plain_name(name)
        root = _root(plain, kind)
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


def media_findings(data: dict[str, DataMedium], batches: dict[int, list[BatchInput]], grads: dict[str, float],
                   no_grad: dict[str, bool] | None, freeze: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(problems, verified, not verified) for each medium ``data`` holds.

    ``batches``: each rank's step-1 batch; ``grads``: each parameter's step-1 gradient norm (rank 0's, gathered
    whole); ``no_grad``: the parameters without one and whether they require one (None: not recorded; then a
    tower with no gradient at all cannot be told from no tower); ``freeze``: the YAML's ``model.freeze``.
    """
    problems: list[str] = []
    verified: list[str] = []
    unknown: list[str] = []
    keys = sorted({item.key for items in batches.values() for item in items})
    for medium in MEDIA:
        held = data.get(medium)
        if held is None or not held.present:
            continue
        came = arrivals(batches, medium)
        if not came:
            meta = sorted({item.key for items in batches.values() for item in items if input_medium(item.key) ==
                           medium})
            holds = f"; {', '.join(meta)} hold{'s' if len(meta) == 1 else ''} no {medium} content" if meta else ""
            problems.append(f"{medium}: {held.named()} but no {medium} input reached forward (batch keys: "
                            f"[{', '.join(keys)}]{holds}): the model trained on the placeholder's text")
            continue
        rank, first = came[0]
        ranks = sorted({r for r, _ in came})
        where = f"{first.text()} on rank {rank}" + (f", {len(ranks)} ranks in all" if len(ranks) > 1 else "")
        kind = tower_for(medium)
        found = tower(kind, grads, no_grad or {})
        patterns = _frozen_by(freeze, kind)
        if found.trainable and found.norm > 0 and math.isfinite(found.norm):
            part = f"; {found.frozen} of its parameters frozen" if found.frozen else ""
            verified.append(f"{medium} reached forward ({where}) and {found.name(found.trained)} got a gradient "
                            f"(norm {found.norm:.1e}{part}) at step 1")
        elif found.trainable and found.tokenizes:
            verified.append(f"{medium} reached forward ({where}); {found.name()} turns it into discrete tokens (a "
                            "vector quantizer: no gradient flows into it, by design), which the language model "
                            "trains on: no tower gradient to check")
        elif found.trainable and found.with_grad and not math.isfinite(found.norm):
            problems.append(f"{medium}: {first.key} reached forward but {found.name()}'s step-1 gradient is not "
                            f"finite (norm {found.norm})")
        elif found.trainable:
            problems.append(f"{medium}: {first.key} reached forward but {found.name()}'s parameters got no gradient "
                            "at step 1")
        elif found.frozen or (no_grad is None and patterns):
            named = f" (model.freeze: {', '.join(patterns)})" if patterns else ""
            verified.append(f"{medium} reached forward ({where}); {found.name()} is frozen{named}: it takes no "
                            "gradient, as the YAML says")
        elif no_grad is None:
            unknown.append(f"{medium}: reached forward ({where}); whether a {TOWER_WORDS[kind]} got a gradient "
                           "could not be evaluated: no parameter of one has a step-1 gradient and the observer "
                           "recorded no list of the parameters without one")
        else:
            verified.append(f"{medium} reached forward ({where}); the model has no separate {TOWER_WORDS[kind]} "
                            f"(its other layers take the {medium} input directly): no tower gradient to check")
        if held.records < held.total:
            unknown.append(f"{medium}: {held.total - held.records} of the {held.total} records have no {medium}: a "
                           f"batch drawn from them carries a masked stand-in the batch alone does not tell from "
                           f"the data's own {medium}")
    return problems, verified, unknown


# --- the run's files -----------------------------------------------------------------------------------


def trained_records(data_json: Path, max_samples: int | None = None) -> list[dict[str, Any]]:
    """The records the smoke trains on: the file's first ``max_samples`` (JSON list or JSONL)."""
    from hooks.data.records import dataset_runtime

    records = dataset_runtime().read_records(Path(data_json))
    return records[:max_samples] if max_samples else records


def prove_media(observed: Path, cfg: dict[str, Any], data_json: Path) -> tuple[list[str], list[str], list[str]]:
    """``media_findings`` for a framework smoke's run: its data, its observed folder and its config.

    Could-not-evaluate (never evidence either way) where the data or the observer's records cannot be read."""
    try:
        data = data_media(trained_records(data_json, TrainingYaml.of(cfg).max_samples), record_files(cfg))
    except Exception as err:  # noqa: BLE001 - reported as not evaluated
        return [], [], [f"media: could not evaluate: the data {data_json} ({type(err).__name__}: {err})"]
    if not any(held.present for held in data.values()):
        return [], [], []  # text-only data: nothing to prove
    records = {int(p.stem.removeprefix("observe_rank")): json.loads(p.read_text())
               for p in sorted(Path(observed).glob("observe_rank*.json"))}
    batches = {rank: [BatchInput(**item) for item in record["step1_batch"]]
               for rank, record in records.items() if isinstance(record.get("step1_batch"), list)}
    grads = (records.get(0) or {}).get("step1_grads") or {}
    failed = [f"rank {rank}: {record['step1_batch']['error']}" for rank, record in sorted(records.items())
              if isinstance(record.get("step1_batch"), dict) and "error" in record["step1_batch"]]
    cause = (f"the observer could not describe the step-1 batch ({'; '.join(failed)})" if failed else
             "the observer recorded no step-1 batch" if not batches else
             f"step-1 gradients ({grads['error']})" if "error" in grads else
             "the observer recorded no step-1 gradients" if not grads else "")
    if cause:
        present = ", ".join(medium for medium in MEDIA if data[medium].present)
        return [], [], [f"{present}: could not evaluate whether the data's media reached forward: {cause}"]
    no_grad = (records.get(0) or {}).get("step1_no_grad")
    freeze = TrainingYaml.of(cfg).freeze
    return media_findings(data, batches, grads, no_grad if isinstance(no_grad, dict) else None, freeze)

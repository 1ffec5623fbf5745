"""Generated inputs for the property-based test (``tests/test_properties.py``): data sets, model-folder defects,
paths and destinations, each drawn by a hypothesis strategy and written to disk by this module.

A strategy draws a plain description (a frozen dataclass); ``write_*`` turns it into files, built with the
project's own writers (``hooks.data.sample.write_wav``/``demo_audio``, ``hooks.data.parity_samples.write_video``,
PIL for images). The description is what hypothesis shrinks and prints, so a failure reads as the smallest data
set that shows it. Nothing here judges an input: the copy's validators and the framework do (the test).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

KINDS = ("image", "video", "audio")
COLUMNS = {"image": "images", "video": "videos", "audio": "audios"}

# --- data sets -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordSpec:
    """One record: its media per kind, how the record writes them, its conversation's shape."""

    media: tuple[tuple[str, int], ...] = ()  # (kind, how many files), kinds in KINDS order, counts >= 1
    placeholder_delta: tuple[tuple[str, int], ...] = ()  # (kind, placeholders minus files): a wrong count
    media_form: str = "list"  # list | string (one path, not a list) | object ({"path": ...}) | url
    defect: str = ""  # "" | missing | truncated | garbage: what is wrong with the record's first media file
    shape: str = "messages"  # messages (role/content) | sharegpt (conversations from/value) | typed (typed parts)
    roles: tuple[str, str] = ("user", "assistant")
    assistant_first: bool = False
    system: bool = False
    turns: int = 1
    text: str = "What is this?"
    answer: str = "A test."
    empty_columns: bool = True  # the record lists every media column, empty ones as []


@dataclass(frozen=True)
class DataSpec:
    """A data set: its records, how the file is written, where media and file live, how the answers name them."""

    records: tuple[RecordSpec, ...]
    fmt: str = "json"  # json | jsonl
    file_name: str = "data.json"
    media_dir: str = "media"  # the folder the media files are in, under the data set's root
    media_root: str = "given"  # given (the media folder) | empty (the data file's folder) | parent (the root)
    path_style: str = "absolute"  # absolute | tilde (~/...) | relative (to the current directory)
    devices_per_node: int = 8  # the cluster the answers name (one node): the YAML's own run's data-parallel ranks

    def kinds(self) -> set[str]:
        return {kind for record in self.records for kind, _ in record.media}


TEXTS = st.sampled_from(["What is this?", "  Describe it.\n", "Qué es esto — 这是什么?", "Hi", "\tWhat changed?  ",
                         "Tell me <b>more</b>", "emoji 🎧 and tabs\t"])
ANSWERS = st.sampled_from(["A test.", "Un test — 测试.", " Yes. ", "It is a red square.", ""])
ROLES = st.sampled_from([("user", "assistant"), ("user", "assistant"), ("human", "gpt"), ("USER", "ASSISTANT"),
                         ("user", "model")])


# The faults a record may have, each a class of input the test can enable on its own (``tests/test_properties.py``).
RECORD_FAULTS = ("placeholder_count", "media_file", "media_form", "record_shape", "roles", "order", "empty_answer",
                 "absent_columns")


@st.composite
def record_specs(draw: st.DrawFn, kinds: tuple[str, ...] = KINDS, faults: frozenset[str] = frozenset()) -> RecordSpec:
    """A record with any subset of ``kinds`` (none included), with the ``faults`` (``RECORD_FAULTS``) users' data has
    drawn now and then."""
    media = tuple((kind, draw(st.integers(1, 2))) for kind in kinds if draw(st.booleans()))

    def pick(fault: str, strategy: st.SearchStrategy, plain: Any) -> Any:
        return draw(strategy) if fault in faults else plain

    deltas = tuple((kind, pick("placeholder_count", st.sampled_from([0] * 6 + [1, -1]), 0)) for kind in kinds)
    return RecordSpec(
        media=media,
        placeholder_delta=tuple((k, d) for k, d in deltas if d > 0 or (d < 0 and dict(media).get(k))),
        media_form=pick("media_form", st.sampled_from(["list"] * 6 + ["string", "object", "url"]), "list"),
        defect=pick("media_file", st.sampled_from([""] * 12 + ["missing", "truncated", "garbage"]), "") * bool(media),
        shape=pick("record_shape", st.sampled_from(["messages"] * 5 + ["sharegpt", "typed"]), "messages"),
        roles=pick("roles", ROLES, ("user", "assistant")),
        assistant_first=pick("order", st.sampled_from([False] * 7 + [True]), False),
        system=draw(st.booleans()),
        turns=draw(st.integers(1, 2)),
        text=draw(TEXTS),
        answer=pick("empty_answer", ANSWERS, draw(ANSWERS.filter(bool))),
        empty_columns=pick("absent_columns", st.booleans(), True),
    )


@st.composite
def data_specs(draw: st.DrawFn, kinds: tuple[str, ...] = KINDS, faults: frozenset[str] = frozenset(),
               path_styles: tuple[str, ...] = ("absolute",), max_records: int = 5) -> DataSpec:
    """A data set of 1 to ``max_records`` records; ``path_styles``: how the answers name the file and the media
    folder."""
    fmt = draw(st.sampled_from(["json", "jsonl"]))
    stem = draw(st.sampled_from(["data", "train set", "données_训练", "d"]))
    return DataSpec(
        records=tuple(draw(st.lists(record_specs(kinds, faults), min_size=1, max_size=max_records))),
        fmt=fmt,
        file_name=f"{stem}.{fmt}",
        media_dir=draw(st.sampled_from(["media", "my media", "médias", "."])),
        media_root=draw(st.sampled_from(["given", "empty", "parent"])),
        path_style=draw(st.sampled_from(path_styles)),
    )


@dataclass
class WrittenData:
    """A data set on disk and the answers that name it."""

    data_json: str  # the answer, as a user would type it (absolute, ~/..., or relative)
    media_root: str  # the answer ("" for none)
    root: Path  # the folder everything was written under
    records: list[dict[str, Any]] = field(default_factory=list)


def _image(path: Path, index: int) -> None:
    from PIL import Image

    Image.new("RGB", (32 + 8 * (index % 3), 32), ((50 * index) % 256, 120, 200)).save(path)


def _video(path: Path, index: int) -> None:
    from hooks.data.parity_samples import write_video

    write_video(path)


def _audio(path: Path, index: int) -> None:
    from hooks.data.sample import demo_audio, write_wav

    write_wav(path, demo_audio(index, seconds=0.5)[0])


WRITERS = {"image": (_image, "png"), "video": (_video, "mp4"), "audio": (_audio, "wav")}


def _break(path: Path, defect: str) -> None:
    if defect == "missing":
        path.unlink()
    elif defect == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif defect == "garbage":
        path.write_bytes(bytes(range(256)) * 8)


def _content(text: str, shape: str) -> Any:
    if shape != "typed":
        return text
    return [{"type": "text", "text": text}]


def _record(spec: RecordSpec, index: int, media_dir: Path, rel: str) -> dict[str, Any]:
    """The record ``spec`` describes, its media files written under ``media_dir`` (named ``rel``/file)."""
    record: dict[str, Any] = {}
    tags = ""
    deltas = dict(spec.placeholder_delta)
    counts = dict(spec.media)
    first = True
    for kind in KINDS:
        names = []
        for n in range(counts.get(kind, 0)):
            write, ext = WRITERS[kind]
            name = f"r{index}_{kind}{n}.{ext}"
            write(media_dir / name, index + n)
            if first and spec.defect:
                _break(media_dir / name, spec.defect)
                first = False
            names.append(f"{rel}/{name}" if rel != "." else name)
        tags += f"<{kind}>" * max(0, len(names) + deltas.get(kind, 0))
        if not names:
            if spec.empty_columns:
                record[COLUMNS[kind]] = []
            continue
        if spec.media_form == "string" and len(names) == 1:
            record[COLUMNS[kind]] = names[0]
        elif spec.media_form == "object":
            record[COLUMNS[kind]] = [{"path": name} for name in names]
        elif spec.media_form == "url":
            record[COLUMNS[kind]] = [f"https://example.com/{name}" for name in names]
        else:
            record[COLUMNS[kind]] = names
    user, assistant = spec.roles
    turns: list[tuple[str, str]] = []
    for turn in range(spec.turns):
        turns += [(user, (tags if turn == 0 else "") + spec.text), (assistant, spec.answer)]
    if spec.assistant_first:
        turns = [(assistant, "Hello."), *turns]
    role_key, content_key, column = (("from", "value", "conversations") if spec.shape == "sharegpt"
                                     else ("role", "content", "messages"))
    system = [{role_key: "system", content_key: _content("Answer briefly.", spec.shape)}] if spec.system else []
    record[column] = system + [{role_key: role, content_key: _content(text, spec.shape)} for role, text in turns]
    return record


def _answer(path: Path, style: str, home: Path, cwd: Path) -> str:
    if style == "tilde":
        return "~/" + str(path.relative_to(home))
    if style == "relative":
        return os.path.relpath(path, cwd)
    return str(path)


def write_data(spec: DataSpec, root: Path, *, home: Path | None = None, cwd: Path | None = None) -> WrittenData:
    """Write the data set under ``root`` (media under ``root/<media_dir>``); the answers name them in the spec's
    path style (``~`` against ``home``, relative against ``cwd``)."""
    media = root / spec.media_dir
    media.mkdir(parents=True, exist_ok=True)
    rel = "." if spec.media_root == "given" else spec.media_dir
    if spec.media_root == "empty":  # paths relative to the data file's folder: the file lives in root
        data_file = root / spec.file_name
    else:
        data_file = root / "meta" / spec.file_name
        data_file.parent.mkdir(exist_ok=True)
    records = [_record(r, i, media, rel) for i, r in enumerate(spec.records)]
    if spec.fmt == "jsonl":
        data_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    else:
        data_file.write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")
    media_root = {"given": media, "empty": None, "parent": root}[spec.media_root]
    home, cwd = home or root, cwd or root
    return WrittenData(_answer(data_file, spec.path_style, home, cwd),
                       _answer(media_root, spec.path_style, home, cwd) if media_root else "", root, records)


# --- model folders ---------------------------------------------------------------------------------------------

FOLDER_DEFECTS = ("none", "drop_tensor", "rename_tensor", "reshape_tensor", "index_missing_shard",
                  "incomplete_blob", "config_not_json", "config_layers", "config_layer_count", "config_no_model_type")


@dataclass(frozen=True)
class FolderSpec:
    """A tiny model folder and what is wrong with it."""

    arch: str
    defect: str
    pick: int = 0  # which tensor (index into the sorted names) the defect hits


@st.composite
def folder_specs(draw: st.DrawFn, archs: tuple[str, ...], defects: tuple[str, ...] = FOLDER_DEFECTS) -> FolderSpec:
    return FolderSpec(draw(st.sampled_from(archs)), draw(st.sampled_from(defects)), draw(st.integers(0, 10_000)))


def write_folder(spec: FolderSpec, source: Path, dest: Path) -> Path:
    """A copy of the tiny model ``source`` at ``dest`` with ``spec.defect`` applied (the weights re-sharded in two
    with an index where the defect needs one)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".*"))
    if spec.defect == "none":
        return dest
    if spec.defect.startswith("config"):
        config = dest / "config.json"
        if spec.defect == "config_not_json":
            config.write_text(config.read_text()[:-20])
        else:
            raw = json.loads(config.read_text())
            if spec.defect == "config_no_model_type":
                raw.pop("model_type", None)
            else:
                _grow_layers(raw, with_types=spec.defect == "config_layers")
            config.write_text(json.dumps(raw, indent=2))
        return dest
    weights = sorted(dest.glob("*.safetensors"))
    tensors: dict[str, Any] = {}
    for file in weights:
        tensors.update(load_file(str(file)))
        file.unlink()
    (dest / "model.safetensors.index.json").unlink(missing_ok=True)
    names = sorted(tensors)
    hit = names[spec.pick % len(names)]
    if spec.defect == "drop_tensor":
        del tensors[hit]
    elif spec.defect == "rename_tensor":
        tensors[hit.replace(".", ".renamed_", 1)] = tensors.pop(hit)
    elif spec.defect == "reshape_tensor":
        value = tensors[hit]
        tensors[hit] = value.flatten()[: max(1, value.numel() - 1)].clone()
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": {n: tensors[n] for n in sorted(tensors)[:half]},
              "model-00002-of-00002.safetensors": {n: tensors[n] for n in sorted(tensors)[half:]}}
    for name, part in shards.items():
        save_file({k: v.contiguous() for k, v in part.items()}, str(dest / name), metadata={"format": "pt"})
    weight_map = {n: shard for shard, part in shards.items() for n in part}
    (dest / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    second = dest / "model-00002-of-00002.safetensors"
    if spec.defect == "index_missing_shard":
        second.unlink()
    elif spec.defect == "incomplete_blob":  # a hub cache: the shard a symlink to a blob still downloading
        blobs = dest / ".blobs"
        blobs.mkdir()
        data = second.read_bytes()
        blob = blobs / "0123abcd.incomplete"
        blob.write_bytes(data[: len(data) // 2])
        second.unlink()
        second.symlink_to(blob)
    return dest


def _grow_layers(raw: dict[str, Any], with_types: bool) -> None:
    """One more decoder layer than the weights hold, wherever the config counts them; ``with_types``: its
    ``layer_types`` too, as a config saved for the deeper model has them (else a hand edit of the count alone)."""
    for key, value in list(raw.items()):
        if key == "num_hidden_layers" and isinstance(value, int):
            raw[key] = value + 1
            if with_types and isinstance(raw.get("layer_types"), list) and raw["layer_types"]:
                raw["layer_types"] = [*raw["layer_types"], raw["layer_types"][-1]]
        elif isinstance(value, dict):
            _grow_layers(value, with_types)

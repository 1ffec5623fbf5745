"""The model folder's weights files, checked to deserialise from their headers alone (no tensor is read).

The probe builds the model on the meta device and never opens a weights file; the first reader is the
smoke's ``from_pretrained`` (or ``training.load``), after the checkout was written. A truncated download,
a file whose header was damaged, or an index that names a shard that is not there would only surface
there, as a traceback. Here each is read the way the loaders read it, without torch and without the
tensors' bytes (a 100 GB folder costs one small read per file):

- ``*.safetensors``: the 8-byte little-endian header length, the JSON header, and each tensor's dtype,
  shape and ``data_offsets`` checked as the safetensors library's ``Metadata::validate`` does (offsets
  contiguous from 0, each span the dtype's size times the element count, the last ending where the
  file does);
- ``model.safetensors.index.json`` / ``pytorch_model.bin.index.json``: JSON with a ``weight_map`` whose
  files are in the folder;
- ``*.bin`` / ``*.pt``, only in a folder without safetensors: torch's zip archive (its central directory,
  at the end of the file, read; a ``data.pkl`` record in it, every member inside the file) or the legacy
  pickle stream's first bytes.

``weights_error(model_dir)`` returns one line, ``model_path: <file> ...; re-download it from the model's
release``, or "" when every file reads.
"""

from __future__ import annotations

import functools
import json
import math
import struct
import zipfile
from pathlib import Path

FIX = "re-download it from the model's release"
MAX_HEADER = 100_000_000  # safetensors' MAX_HEADER_SIZE: a longer header is refused (HeaderTooLarge)
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
# Bits per element of each safetensors dtype (safetensors 0.8's ``Dtype::bitsize``); the library refuses any other
# dtype name while parsing the header.
DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
    "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}


def weights_error(model_dir: Path) -> str:
    """Why a weights file of ``model_dir`` would not deserialise ("" when all of them do, or there are none)."""
    model_dir = Path(model_dir)
    safetensors = sorted(model_dir.glob("*.safetensors"))
    # transformers reads the safetensors index whenever it is there; the .bin index only without safetensors (a
    # download of "*.safetensors" and "*.json" keeps the .bin index and none of its shards: a fine folder)
    has_safetensors = bool(safetensors) or (model_dir / INDEXES[0]).is_file()
    for index in INDEXES[:1] if has_safetensors else INDEXES:
        problem = _index_error(model_dir / index)
        if problem:
            return problem
    files = safetensors or sorted([*model_dir.glob("*.bin"), *model_dir.glob("*.pt")])
    check = _safetensors_cause if safetensors else _torch_cause
    for path in files:
        if not path.is_file():
            continue
        stat = path.stat()
        cause = check(str(path), stat.st_size, stat.st_mtime_ns)
        if cause:
            return f"model_path: {path} does not deserialise ({cause}); {FIX}"
    return ""


def _index_error(index: Path) -> str:
    """An index file that does not parse, or names a shard that is not in the folder."""
    if not index.is_file():
        return ""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        names = sorted(set(weight_map.values()))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as err:
        return f"model_path: {index} does not deserialise ({_cause(err)}); {FIX}"
    for name in names:
        if not isinstance(name, str) or not (index.parent / name).is_file():
            return (f"model_path: {index} names the shard {name}, which is not in {index.parent}; {FIX} "
                    "(every file the index lists)")
    return ""


@functools.lru_cache(maxsize=1024)
def _safetensors_cause(path: str, size: int, mtime_ns: int) -> str:
    """Why the safetensors file at ``path`` would not deserialise ("" when it would); cached per size and time."""
    del mtime_ns  # part of the cache key only: a file rewritten in place is read again
    try:
        with open(path, "rb") as file:
            head = file.read(8)
            if len(head) < 8:
                return f"{size} bytes, shorter than the 8-byte header length"
            length = struct.unpack("<Q", head)[0]
            if length > MAX_HEADER:
                return f"header length {length} bytes, over safetensors' limit of {MAX_HEADER}"
            if 8 + length > size:
                return f"header length {length} bytes, but the file holds {size} bytes (truncated?)"
            raw = file.read(length)
    except OSError as err:
        return _cause(err)
    try:
        text = raw.decode("utf-8")
        if not text.startswith("{"):
            return "the header is not a JSON object"
        header = json.loads(text)
    except (UnicodeDecodeError, ValueError) as err:
        return f"the header is not UTF-8 JSON: {_cause(err)}"
    if not isinstance(header, dict):
        return "the header is not a JSON object"
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        return "its __metadata__ is not a map of strings"
    return _tensors_cause(header, size - 8 - length)


def _tensors_cause(header: dict[str, object], data_size: int) -> str:
    """The tensors' entries against the data that follows the header (safetensors' ``Metadata::validate``)."""
    spans = []
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]  # type: ignore[index]
        except (TypeError, KeyError, ValueError):
            return f"tensor {name!r} lacks a dtype, a shape or two data_offsets"
        if not (isinstance(dtype, str) and isinstance(shape, list)
                and all(isinstance(n, int) and n >= 0 for n in [*shape, begin, end])):
            return f"tensor {name!r} has a malformed dtype, shape or data_offsets"
        spans.append((begin, end, name, dtype, shape))
    position = 0
    for begin, end, name, dtype, shape in sorted(spans):
        if begin != position or end < begin:
            return (f"tensor {name!r} has data_offsets [{begin}, {end}], not starting where the one before ends "
                    f"({position})")
        position = end
        if dtype not in DTYPE_BITS:
            return f"tensor {name!r} has the dtype {dtype!r}, which safetensors does not know"
        bits = DTYPE_BITS[dtype] * math.prod(shape)
        if bits % 8:
            return f"tensor {name!r} is {dtype} {shape}, not a whole number of bytes"
        if bits // 8 != end - begin:
            return f"tensor {name!r} is {dtype} {shape}, {bits // 8} bytes, but its data_offsets span {end - begin}"
    if position != data_size:
        return (f"the tensors' data is {position} bytes, but {data_size} bytes follow the header"
                + (" (truncated)" if position > data_size else ""))
    return ""


@functools.lru_cache(maxsize=1024)
def _torch_cause(path: str, size: int, mtime_ns: int) -> str:
    """Why a torch ``.bin``/``.pt`` file would not load ("" when its container reads): a zip archive's central
    directory and members, or the legacy format's pickle protocol mark. No pickle is run."""
    del mtime_ns
    try:
        with open(path, "rb") as file:
            head = file.read(4)
    except OSError as err:
        return _cause(err)
    if head.startswith(b"PK"):
        try:
            with zipfile.ZipFile(path) as archive:
                members = archive.infolist()
        except (OSError, zipfile.BadZipFile, ValueError) as err:
            return f"a torch zip archive that does not open: {_cause(err)} (truncated?)"
        if not any(m.filename.endswith("data.pkl") for m in members):
            return "a zip archive without torch's data.pkl"
        for member in members:
            if member.header_offset + member.compress_size > size:
                return f"its member {member.filename} ends past the end of the file (truncated)"
        return ""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return ""  # torch's legacy format: a pickle stream (its end is only found by loading it)
    return "neither torch's zip archive nor its legacy pickle format"


def _cause(err: BaseException) -> str:
    """An exception as one short line."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:200]}" if text else type(err).__name__

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
release``, or "" when every file reads. A file behind a symlink (the Hugging Face cache's ``snapshots/`` files link
into ``blobs/``) is read through it; a link whose target is gone, or is a ``.incomplete`` blob (a download still
running or interrupted), is refused by name.

``parameters_error(model, model_dir)`` then holds the headers' names and shapes against the model the probe built
on the meta device from config.json, with the names mapped as transformers 4.57's ``from_pretrained`` maps them
(``PreTrainedModel._fix_state_dict_key_on_load``, the VLM classes' ``_checkpoint_conversion_mapping``, the
``base_model_prefix`` added or dropped; a tied parameter may be absent when another of its group is there):
a parameter no file holds, one of another shape, or a stored layer the config does not declare is named, the
first in the model's order. transformers 4.57 would load such a folder
with a warning, the missing parameter freshly initialised, and the smoke would judge a model that is not the
release.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        link = _link_error(path)
        if link:
            return link
        if not path.is_file():
            continue
        stat = path.stat()
        cause = check(str(path), stat.st_size, stat.st_mtime_ns)
        if cause:
            return f"model_path: {path} does not deserialise ({cause}); {FIX}"
    return ""


def _index_error(index: Path) -> str:
    """An index file that does not parse, or names a shard that is not in the folder."""
    link = _link_error(index)  # an index behind a link to a blob that is gone or still downloading
    if link:
        return link
    if not index.is_file():
        return ""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        names = sorted(set(weight_map.values()))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as err:
        return f"model_path: {index} does not deserialise ({_cause(err)}); {FIX}"
    for name in names:
        link = _link_error(index.parent / name) if isinstance(name, str) else ""
        if link:
            return link
        if not isinstance(name, str) or not (index.parent / name).is_file():
            return (f"model_path: {index} names the shard {name}, which is not in {index.parent}; {FIX} "
                    "(every file the index lists)")
    return ""


PARTIAL = ".incomplete"  # huggingface_hub's suffix for a blob being downloaded


def _link_error(path: Path) -> str:
    """A weights file that is a symlink (the Hugging Face cache: ``snapshots/<rev>/<file>`` -> ``blobs/<hash>``)
    whose target is gone or is a download in progress; "" for a plain file or a link to a whole one."""
    if not path.is_symlink():
        return ""
    target = Path(os.path.realpath(path))
    partial = target if target.name.endswith(PARTIAL) else target.with_name(target.name + PARTIAL)
    if partial == target or (not target.exists() and partial.exists()):
        return (f"model_path: {path} links to {target}, a download that did not finish ({partial.name}); let the "
                f"download finish (huggingface-cli download resumes it), or {FIX}")
    if not target.exists():
        return f"model_path: {path} is a symlink to {target}, which does not exist (a partial download?); {FIX}"
    return ""


def _safetensors_cause(path: str, size: int, mtime_ns: int) -> str:
    """Why the safetensors file at ``path`` would not deserialise ("" when it would)."""
    return _safetensors_header(path, size, mtime_ns)[0]


@functools.lru_cache(maxsize=1024)
def _safetensors_header(path: str, size: int, mtime_ns: int) -> tuple[str, dict[str, Any]]:
    """(why the file would not deserialise or "", its tensors' entries); cached per size and time. The entries are
    shared by every caller: read them, never change them."""
    del mtime_ns  # part of the cache key only: a file rewritten in place is read again
    try:
        with open(path, "rb") as file:
            head = file.read(8)
            if len(head) < 8:
                return f"{size} bytes, shorter than the 8-byte header length", {}
            length = struct.unpack("<Q", head)[0]
            if length > MAX_HEADER:
                return f"header length {length} bytes, over safetensors' limit of {MAX_HEADER}", {}
            if 8 + length > size:
                return f"header length {length} bytes, but the file holds {size} bytes (truncated?)", {}
            raw = file.read(length)
    except OSError as err:
        return _cause(err), {}
    try:
        text = raw.decode("utf-8")
        if not text.startswith("{"):
            return "the header is not a JSON object", {}
        header = json.loads(text)
    except (UnicodeDecodeError, ValueError) as err:
        return f"the header is not UTF-8 JSON: {_cause(err)}", {}
    if not isinstance(header, dict):
        return "the header is not a JSON object", {}
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        return "its __metadata__ is not a map of strings", {}
    return _tensors_cause(header, size - 8 - length), header


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


SINGLE = "model.safetensors"
MISMATCH_FIX = ("give config.json and the weights of one release (re-download both from the model's release; a "
                "config edited by hand must declare the layers and sizes the weights have)")


@dataclass(frozen=True)
class Stored:
    """One tensor of the weights files transformers reads: its shape and the file that holds it."""

    shape: tuple[int, ...]
    file: str


def stored_tensors(model_dir: Path) -> tuple[dict[str, Stored], str] | None:
    """The tensors ``from_pretrained`` reads, by checkpoint name, from the safetensors headers (transformers 4.57's
    choice of files in a local folder: ``model.safetensors``, else the index's shards), and the first name the
    index assigns to a shard whose header lacks it ("" when none: such a name is never loaded). None where the
    weights are not safetensors (a pickle's names are only read by running it) or ``weights_error`` has a cause."""
    model_dir = Path(model_dir)
    index = model_dir / INDEXES[0]
    if (model_dir / SINGLE).is_file():
        shards, weight_map = [SINGLE], None
    elif index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            return None
    else:
        return None
    headers = {}
    for shard in shards:
        path = model_dir / shard
        if not path.is_file():
            return None
        stat = path.stat()
        cause, header = _safetensors_header(str(path), stat.st_size, stat.st_mtime_ns)
        if cause:
            return None
        headers[shard] = header
    found: dict[str, Stored] = {}
    unheld = ""
    names = weight_map.items() if weight_map is not None else ((name, SINGLE) for name in headers[SINGLE])
    for name, shard in names:
        entry = headers[shard].get(name)
        if entry is None:
            unheld = unheld or (f"{index} names the tensor {name} in {shard}, whose header does not hold it (the "
                                "index of another download?)")
            continue
        found[name] = Stored(tuple(entry["shape"]), shard)
    return found, unheld


def parameters_error(model: Any, model_dir: Path) -> str:
    """The first parameter of ``model`` (built from config.json on the meta device, as ``from_pretrained`` builds it
    before loading) that the weights files do not hold with its shape, or a stored layer past the model's own
    (``_extra_layer``), as one line naming ``model_path``; "" when they agree or cannot be compared here (weights not in
    safetensors; a quantized checkpoint, whose quantizer renames and reshapes; transformers 5, whose conversion
    operations fuse and split tensors while loading)."""
    import transformers

    if int(transformers.__version__.split(".")[0]) >= 5 or getattr(model.config, "quantization_config", None):
        return ""
    read = stored_tensors(model_dir)
    if read is None:
        return ""
    stored, unheld = read
    if unheld:
        return f"model_path: {unheld}; {FIX}"
    loaded = {new: old for old, new in loaded_names(model, list(stored)).items()}
    version = transformers.__version__
    params: dict[str, tuple[tuple[int, ...], int]] = {}  # name -> (shape, the parameter object's id)
    groups: dict[int, list[str]] = {}  # tied parameters: one object under several names
    for name, param in model.named_parameters(remove_duplicate=False):
        params[name] = tuple(param.shape), id(param)
        groups.setdefault(id(param), []).append(name)
    ignored = [re.compile(p) for p in getattr(model, "_keys_to_ignore_on_load_missing", None) or []]
    where = f"{model_dir}'s weights do not match its config.json"
    for name, (shape, identity) in params.items():
        if name in loaded:
            held = stored[loaded[name]]
            if held.shape != shape:
                return (f"model_path: {where}: the model built from config.json has {name} of shape {list(shape)}, "
                        f"but {held.file} holds {loaded[name]} of shape {list(held.shape)}; {MISMATCH_FIX}")
            continue
        tied = [other for other in groups[identity] if other in loaded]
        if tied or any(p.search(name) for p in ignored):
            continue  # transformers ties it to a loaded one (lm_head to the embeddings) or expects it absent
        return (f"model_path: {where}: the model built from config.json has the parameter {name} {list(shape)}, "
                f"which no weights file holds under any name transformers {version} loads as it; {MISMATCH_FIX}")
    buffers = {name for name, _ in model.named_buffers()}
    dropped = [re.compile(p) for p in getattr(model, "_keys_to_ignore_on_load_unexpected", None) or []]
    extra = [new for new in loaded
             if new not in params and new not in buffers and not any(p.search(new) for p in dropped)]
    layer = _extra_layer(extra, params)
    if layer:
        first = min((new for new in extra if new.startswith(layer + ".")), key=lambda new: _natural(loaded[new]))
        old = loaded[first]
        return (f"model_path: {where}: {stored[old].file} holds {old} {list(stored[old].shape)}, of a layer the model "
                f"built from config.json does not have ({layer}: config.json declares fewer); {MISMATCH_FIX}")
    return ""


def _extra_layer(extra: list[str], params: dict[str, object]) -> str:
    """The first stored layer (``<list>.<n>``, by the model's names) past the model's own whose every tensor is one
    the model's layers of that list have: config.json declares fewer layers (or experts) than the weights hold.
    Other stored tensors the model has no place for are what transformers drops with a warning, and releases ship
    them (GLM's multi-token-prediction layer after the last decoder layer: ``eh_proj``, ``enorm``): left alone; a
    renamed module shows as a missing parameter first."""
    if not extra:
        return ""
    shapes = set()  # (list, rest): a tensor some layer of the list has
    for name in params:
        for found in re.finditer(r"\.(\d+)\.", name):
            shapes.add((name[:found.start()], name[found.end():]))
    layers: dict[str, bool] = {}  # "<list>.<n>" -> every tensor of it is a layer's
    for new in extra:
        found = re.search(r"\.(\d+)\.", new)
        if found is None:
            continue
        key = new[:found.end() - 1]
        layers[key] = layers.get(key, True) and (new[:found.start()], new[found.end():]) in shapes
    plain = [key for key, every in layers.items() if every]
    return min(plain, key=_natural) if plain else ""


def loaded_names(model: Any, checkpoint_keys: list[str]) -> dict[str, str]:
    """Checkpoint name -> the model's name, as transformers 4.57's ``_load_pretrained_model`` renames them
    (``_get_key_renaming_mapping``): the class's legacy renames, the VLM classes' ``_checkpoint_conversion_mapping``
    (first pattern that matches), then the base model's prefix added (a base checkpoint loaded into a task model)
    or dropped (the other way, keeping only the prefixed names). A name the loader skips is absent."""
    from transformers import modeling_utils

    cls = type(model)
    vlms = getattr(modeling_utils, "VLMS", [])
    mapping = (cls._checkpoint_conversion_mapping if any(name in k.__name__.lower() for k in cls.__mro__[:-1]
                                                         for name in vlms) else None) or {}
    prefix = getattr(model, "base_model_prefix", "") or ""
    has_prefix = bool(prefix) and any(key.startswith(prefix) for key in checkpoint_keys)
    expects_prefix = bool(prefix) and hasattr(model, prefix)
    fix = getattr(model, "_fix_state_dict_key_on_load", lambda key: (key, False))
    renamed = {}
    for key in checkpoint_keys:
        new = fix(key)[0]
        for pattern, replacement in mapping.items():
            new, count = re.subn(pattern, replacement, new)
            if count:
                break
        if expects_prefix and not has_prefix:
            new = f"{prefix}.{new}"
        elif has_prefix and not expects_prefix:
            if not new.startswith(f"{prefix}."):
                continue
            new = new[len(prefix) + 1:]
        renamed[key] = new
    return renamed


def _natural(name: str) -> list[object]:
    """``layers.10`` after ``layers.9``: names compared part by part, numbers as numbers."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in name.split(".")]


def _cause(err: BaseException) -> str:
    """An exception as one short line."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:200]}" if text else type(err).__name__

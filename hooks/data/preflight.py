"""Pre-flight for the data answers: the training data checked before anything is written.

copier renders the scaffold only after the last question; a data file that does not parse, holds
no records, or names media that are not there would otherwise surface as a traceback in the smoke,
after the checkout was changed (or, worse, not at all: the smoke trains on its own sample). Each
check here returns one line, ``<field>: <what is wrong>; <how to fix>``, or "" when the answer is
fine; copier's validators (``hooks.render.copier_ext``) show it or stop an unattended copy with it.

- ``data_error``: the file parses (a JSON list, or JSONL: one object per line), holds records, and
  (branches a and b) they are in the huggingface shape the framework's builder reads, each with as
  many ``<image>``/``<video>``/``<audio>`` placeholders as it names images/videos/audios
  (``placeholder_error``), and one of them at least has an answer to train on
  (``hooks.data.records.answer_error``, the rule branch c's mapping is held to as well);
- ``media_error``: ``media_root`` is a folder, and every image, video or audio file the first records
  name exists under it (relative paths resolve against it, else against the data file's folder, as
  the YAML's ``dataset_dir`` does), inside it, and decodes as its kind (``decode_error``);
- ``length_error`` (``python -m hooks.data.preflight``, in the training interpreter): the first
  records, built by the model's own processor with their media expanded, fit the YAML's
  ``cutoff_len``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hooks.model.memory import CUTOFF_LEN

CHECKED_RECORDS = 64  # media of the first records are checked; the smoke trains on the first few
MEDIA_KEYS = (("image", "images"), ("video", "videos"), ("audio", "audios"))  # the huggingface shape's lists
DECODES_AS = {"image": "an image", "video": "a video", "audio": "audio"}


@dataclass(frozen=True)
class MediaRef:
    """One media file a record names."""

    kind: str  # "image", "video" or "audio": how the data path decodes it
    key: str  # the record key that names it ("images", or branch c's mapped key)
    name: str  # the path as the record gives it


class DataError(ValueError):
    """A problem with the data answers, worded as ``<field>: <what>; <fix>``."""


def read_records(data_json: Path) -> list[dict[str, Any]]:
    """The records of a JSON list or a JSONL file; raises DataError naming the field and the fix."""
    try:
        text = data_json.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"data_json: cannot read {data_json} ({type(err).__name__}: {err}); give a readable "
                        "UTF-8 JSON or JSONL file") from err
    lines = [(1, text)] if text.startswith("[") else [(n, line) for n, line in enumerate(text.splitlines(), 1)
                                                       if line.strip()]
    values = []
    for number, chunk in lines:
        try:
            values.append(json.loads(chunk))
        except json.JSONDecodeError as err:
            raise DataError(f"data_json: {data_json} is not valid JSON or JSONL (line {number + err.lineno - 1}, "
                            f"column {err.colno}: {err.msg}); fix the file (a JSON list of records, or one JSON "
                            "object per line)") from err
    records = values[0] if text.startswith("[") else values
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DataError(f"data_json: {data_json} is not a list of records (JSON objects); write a JSON list of "
                        "objects, or one object per line (JSONL)")
    if not records:
        raise DataError(f"data_json: {data_json} holds no records; give at least one training sample")
    return records


def data_error(data_json: str, data_branch: str = "a") -> str:
    """Why ``data_json`` cannot be trained on ("" when it can, or when it is not given)."""
    if not str(data_json or "").strip():
        return ""
    path = Path(os.path.expanduser(str(data_json)))
    if not path.is_file():
        return f"data_json: {path} is not an existing file; fix the path or leave it empty"
    try:
        records = read_records(path)
    except DataError as err:
        return str(err)
    if data_branch == "c":
        return ""  # any shape: data_fields maps it (checked at that question)
    from hooks.data.shapes import ShapeError, convention_of, record_error

    try:  # every record: the trainer converts and preprocesses them all at start
        convention = convention_of(records)
    except ShapeError as err:
        return str(err)
    for index, record in enumerate(records, 1):
        problem = record_error(record, index, convention) or placeholder_error(record, convention)
        if problem:
            return problem if problem.startswith("data_json:") else f"data_json: record {index} of {path} {problem}"
    from hooks.data.records import answer_error, dataset_runtime

    return answer_error(path, records, dataset_runtime().FieldMap(**convention.fields()))


def placeholder_error(record: dict[str, Any], convention: Any = None) -> str:
    """Why the record's ``<image>``/``<video>``/``<audio>`` placeholders and its media lists disagree ("" when
    they match).

    The framework's rule (MindSpeed-MM ``mindspeed_mm/fsdp/data/data_utils/func_utils/mm_plugin.py:132``,
    ``MMPluginMixin._validate_messages``, called by ``Qwen2VLPlugin.process_messages`` at :526 and by the
    branch-b plugin): the placeholders counted over the contents of the messages it is given equal the
    number of images/videos/audios, else the trainer stops with "The number of images does not match ...".
    Those messages are the record's minus a leading system message, which the sharegpt converter takes
    out as the system prompt (``convert.py:148``); a lone path string counts as one file
    (``DatasetConverter._find_media_files``, ``convert.py:69``). The placeholders are the framework's
    ``IMAGE_PLACEHOLDER``/``VIDEO_PLACEHOLDER``/``AUDIO_PLACEHOLDER`` environment overrides, as there
    (``mm_plugin.py:18``).
    """
    from hooks.data.shapes import HUGGINGFACE

    attr = convention or HUGGINGFACE  # the YAML's attr: which keys hold the turns (hooks.data.shapes)
    messages = record.get(attr.messages)
    if not isinstance(messages, list):
        return ""
    if messages and isinstance(messages[0], dict) and messages[0].get(attr.role_tag) == attr.system_tag:
        messages = messages[1:]
    texts = [m[attr.content_tag] for m in messages
             if isinstance(m, dict) and isinstance(m.get(attr.content_tag), str)]
    for kind, key in MEDIA_KEYS:
        tag = os.environ.get(f"{kind.upper()}_PLACEHOLDER", f"<{kind}>")
        value = record.get(key)
        given = 1 if isinstance(value, str) and value else len(value) if isinstance(value, list) else 0
        wanted = sum(text.count(tag) for text in texts)
        if wanted != given:
            return (f"has {wanted} {tag} placeholder(s) in its messages but {given} {kind}(s) in '{key}' (the trainer "
                    f"would stop: the number of {kind}s does not match the number of {tag} tokens); put one {tag} in "
                    f"the text for each {kind}, in order, or fix the '{key}' list")
    return ""


def huggingface_media(record: dict[str, Any]) -> list[MediaRef]:
    """Media files of a record in the huggingface shape (its ``images``, ``videos`` and ``audios`` lists)."""
    found: list[MediaRef] = []
    for kind, key in MEDIA_KEYS:
        value = record.get(key) or []
        found += [MediaRef(kind, key, v) for v in ([value] if isinstance(value, str) else value) if isinstance(v, str)]
    return found


def mapped_media(mapping: Any) -> Callable[[dict[str, Any]], list[MediaRef]]:
    """Media files of a branch-c record, read through its ``FieldMap`` (images and audios)."""

    def media_of(record: dict[str, Any]) -> list[MediaRef]:
        return [*(MediaRef("image", mapping.images, n) for n in mapping.images_of(record) if isinstance(n, str)),
                *(MediaRef("audio", mapping.audios, n) for n in mapping.audios_of(record) if isinstance(n, str))]

    return media_of


def media_error(data_json: str, media_root: str,
                media_of: Callable[[dict[str, Any]], list[MediaRef]] = huggingface_media) -> str:
    """Why the media of the first records cannot be read ("" when they all exist under the media folder and
    decode as their kind)."""
    root_answer = str(media_root or "").strip()
    if root_answer:
        root = Path(os.path.expanduser(root_answer))
        if not root.is_dir():
            return f"media_root: {root} is not an existing folder; give the folder the data's media paths start in"
    if not str(data_json or "").strip():
        return ""
    path = Path(os.path.expanduser(str(data_json)))
    try:
        records = read_records(path)
    except (DataError, OSError):
        return ""  # data_json's own check says why
    root = (Path(os.path.expanduser(root_answer)) if root_answer else path.parent).resolve()
    field = "media_root" if root_answer else "data_json"
    for index, record in enumerate(records[:CHECKED_RECORDS], 1):
        try:
            refs = media_of(record)
        except (KeyError, TypeError, AttributeError):
            return ""  # a mapping problem: data_fields' own check says why
        for ref in refs:
            named = f"record {index} names {ref.name} in '{ref.key}'"
            if "://" in ref.name:  # neither the framework's loaders nor branch c's plugin fetch a URL
                from hooks.data.shapes import entry_fix, entry_problem

                return f"data_json: {named}, {entry_problem(ref.name)}; {entry_fix(ref.name)}"
            target = (root / os.path.expanduser(ref.name)).resolve()
            if not target.is_relative_to(root):
                return (f"{field}: {named}, outside {root}; keep the media under media_root (relative paths) or set "
                        "media_root to a folder that holds them all")
            if not target.is_file():
                return (f"{field}: {named}, but {target} does not exist; fix the record, or set media_root to the "
                        "folder its media paths start in")
            broken = decode_error(target, ref.kind)
            if broken:
                return (f"data_json: {named}, but {target} does not decode as {DECODES_AS[ref.kind]} ({broken}); "
                        "replace the file (re-export or re-download it) or drop the record")
    return ""


def decode_error(path: Path, kind: str = "image") -> str:
    """Why the data path could not decode the ``kind`` file at ``path`` ("" when it can, or when the decoder is
    not in this interpreter: then the smoke is the first to read the file).

    The trainer reads every file it is given in full: images with PIL (opened and converted), videos with
    PyAV (MindSpeed-MM's ``_regularize_videos``: the first video stream, decoded frame by frame), audio with
    librosa (``_regularize_audios``, which reads with soundfile first). A truncated or corrupt file would
    otherwise fail in the smoke's data loader, after the checkout was written. Each check here costs
    milliseconds for the first records' files: an image fully decoded, a video's first frame, an audio file's
    samples (read, at least one, all finite).
    """
    check = {"image": _image_error, "video": _video_error, "audio": _audio_error}[kind]
    try:
        return check(path)
    except ImportError:  # copier's interpreter without the decoder: the smoke reports a bad file
        return ""


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:300]}" if text else type(err).__name__


def _image_error(path: Path) -> str:
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.load()
    except Exception as err:  # noqa: BLE001 - PIL raises OSError, SyntaxError, ValueError, DecompressionBombError...
        return _one_line(err)
    return ""


def _video_error(path: Path) -> str:
    import av

    try:
        with av.open(str(path), "r") as container:
            stream = next((s for s in container.streams if s.type == "video"), None)
            if stream is None:
                return "no video stream"
            if next(iter(container.decode(stream)), None) is None:
                return "its video stream has no frame"
    except Exception as err:  # noqa: BLE001 - PyAV raises its FFmpegError family, OSError, ValueError...
        return _one_line(err)
    return ""


def _audio_error(path: Path) -> str:
    """Read as librosa reads: soundfile first, then librosa itself (whose other backend reads what libsndfile
    cannot, mp3 on an old one), imported only when soundfile is missing or fails."""
    import numpy as np

    causes = []
    for read in (_soundfile_samples, _librosa_samples):
        try:
            samples = np.asarray(read(path))
        except ImportError:
            continue
        except Exception as err:  # noqa: BLE001 - LibsndfileError, audioread's NoBackendError, EOFError...
            causes.append(_one_line(err))
            continue
        if samples.size == 0:
            return "it holds no samples"
        if not np.isfinite(samples).all():
            return "it holds non-finite samples (NaN or infinity)"
        return ""
    if not causes:
        raise ImportError("neither soundfile nor librosa")
    return causes[0]  # soundfile's word: what libsndfile makes of the file


def _soundfile_samples(path: Path) -> Any:
    import soundfile

    return soundfile.read(str(path), dtype="float32", always_2d=True)[0]


def _librosa_samples(path: Path) -> Any:
    import warnings

    import librosa

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "PySoundFile failed. Trying audioread instead."
        return librosa.load(str(path), sr=None, mono=False)[0]


# --- sample lengths (run in the training interpreter: it needs the model's processor) -----------------

LENGTH_RECORDS = 8


def length_error(model_dir: Path, data_json: Path, media_root: Path | None, fields: dict[str, str],
                 trust_remote_code: bool, cutoff: int = CUTOFF_LEN) -> str:
    """Whether the first records, built by the model's own processor (its images expanded), fit ``cutoff``.

    Branch c's plugin builds them this way; branches a and b build the same text and media tokens with
    the framework's template, so the processor's count is the length to expect. A model without a
    processor class (its own data code) is left to the smoke.
    """
    from hooks.compat import ensure_torchvision

    ensure_torchvision()
    from transformers import AutoProcessor

    from hooks.data.audio import audio_facts, with_audio
    from hooks.data.records import dataset_runtime, sample_format, template_call

    processor = AutoProcessor.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
    if not hasattr(processor, "tokenizer"):
        return ""
    from hooks.data.audio import extractor_of
    from hooks.data.shapes import data_convention

    data = dataset_runtime()
    form = with_audio(sample_format(processor, model_dir), processor, audio_facts(processor, []))
    fmt = data.SampleFormat(**form)
    records = read_records(data_json)
    mapping = data.FieldMap(**(fields or data_convention(records).fields()))
    root = media_root or data_json.parent
    cut = clip_error(extractor_of(processor)[1], mapping, records[:CHECKED_RECORDS], root)
    if cut:
        return cut
    with tempfile.TemporaryDirectory(prefix="msmm-clips-") as clips:
        if fmt.kind == "template":  # the processor's own template call, loaded as the dataset plugin loads it
            processor = template_call(processor, form, model_dir, Path(clips))
        return _first_too_long(processor, data, fmt, mapping, records[:LENGTH_RECORDS], root, cutoff)


def clip_error(extractor: Any, mapping: Any, records: list[dict[str, Any]], root: Path) -> str:
    """The first clip the feature extractor cuts ("" when it keeps every clip whole, or cannot be asked).

    MindSpeed-MM's mm_plugin hands each clip to the extractor as ``feature_extractor(audios, sampling_rate=...,
    return_attention_mask=True, padding="max_length")`` (``mm_plugin.py:356``), leaving ``truncation`` at its
    default: Whisper's extractor (Qwen2-Audio, the Qwen-Omni thinkers) then keeps the first ``n_samples`` (30 s)
    and drops the rest without a word, so the answer is trained on a clip the model never heard whole. A clip
    longer than ``n_samples`` is run through the extractor whole and cut at ``n_samples``: the same features mean
    the tail was dropped (the property, not the length alone).
    """
    kept = int(getattr(extractor, "n_samples", 0) or 0)
    rate = int(getattr(extractor, "sampling_rate", 0) or 0)
    if not kept or not rate:
        return ""
    import numpy as np

    from hooks.data.records import dataset_runtime

    for index, record in enumerate(records, 1):
        try:
            names = [n for n in mapping.audios_of(record) if isinstance(n, str)]
        except (KeyError, TypeError, AttributeError):
            return ""
        for name in names:
            path = Path(root) / name
            if _seconds(path) * rate <= kept:
                continue
            try:
                clip = dataset_runtime().load_audios([name], Path(root), rate)[0]
                whole, first = (extractor([c], sampling_rate=rate, return_attention_mask=True, padding="max_length",
                                          return_tensors="np") for c in (clip, clip[:kept]))
            except Exception:  # noqa: BLE001 - could not evaluate: the smoke reads the clip
                continue
            if all(np.array_equal(whole[k], first[k]) for k in whole.keys()):
                return (f"data_json: record {index} names {name}, a {len(clip) / rate:.1f} s clip, but "
                        f"{type(extractor).__name__} keeps the first {kept / rate:g} s of each clip (n_samples "
                        f"{kept} at {rate} Hz) and drops the rest without a word; split the clip into pieces of at "
                        f"most {kept / rate:g} s (one record each, the answer about that piece) or trim it")
    return ""


def _seconds(path: Path) -> float:
    """A clip's duration from its header (0 when it cannot be read: the decode check says why)."""
    try:
        import soundfile

        return float(soundfile.info(str(path)).duration)
    except Exception:  # noqa: BLE001 - no soundfile, or a format libsndfile does not read: librosa's estimate
        try:
            import librosa

            return float(librosa.get_duration(path=str(path)))
        except Exception:  # noqa: BLE001
            return 0.0


def _first_too_long(processor: Any, data: Any, fmt: Any, mapping: Any, records: list[dict[str, Any]], root: Path,
                    cutoff: int) -> str:
    """Why the first of ``records`` whose sample exceeds ``cutoff`` does ("" when none does)."""
    for index, record in enumerate(records, 1):
        try:
            images = data.load_images(mapping.images_of(record), root)
            audios = data.load_audios(mapping.audios_of(record), root, fmt.sampling_rate)
            sample = data.build_sample(processor, fmt, mapping.turns(record), images, 1 << 30, audios)
        except Exception:  # noqa: BLE001 - a sample the processor cannot build is the smoke's to report
            continue
        length = int(sample["input_ids"].shape[-1])
        if length > cutoff:
            ways = shorter(record, images, audios)
            return (f"data_json: record {index} becomes {length} tokens with its media expanded, over the YAML's "
                    f"cutoff_len {cutoff} (the sample would be cut inside it); {ways}, or raise "
                    "data.dataset_param.basic_parameters.cutoff_len after the copy")
    return ""


def shorter(record: dict[str, Any], images: list[Any], audios: list[Any]) -> str:
    """How to make a record fewer tokens, per medium it holds: what the data path keeps of each and what to change."""
    ways = ["shorten its text"]
    if images:
        ways.append(f"fewer or smaller images (each of its {len(images)} keeps up to preprocess_parameters."
                    "image_max_pixels pixels, branch c the processor's own size: resize them or lower that)")
    if audios:
        ways.append(f"fewer or shorter clips (each of its {len(audios)} becomes tokens for every second the feature "
                    "extractor keeps: trim them or split the record)")
    if record.get("videos"):
        ways.append("fewer video frames (preprocess_parameters.video_fps, video_maxlen; smaller: video_max_pixels)")
    return "; ".join(ways)


def main(argv: list[str] | None = None) -> int:
    """``python -m hooks.data.preflight MODEL_DIR DATA_JSON [--media-root DIR] [--fields JSON]``: one line, exit 1."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m hooks.data.preflight", description=length_error.__doc__)
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("data_json", type=Path)
    parser.add_argument("--media-root", type=Path)
    parser.add_argument("--fields", default="")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--cutoff", type=int, default=CUTOFF_LEN)
    args = parser.parse_args(argv)
    from hooks.data.records import parse_fields

    message = length_error(args.model_dir, args.data_json, args.media_root, parse_fields(args.fields),
                           args.trust_remote_code, args.cutoff)
    if message:
        print(f"error: {message}", file=sys.stderr)
    return 1 if message else 0


if __name__ == "__main__":
    from hooks import exit_now

    exit_now(main())

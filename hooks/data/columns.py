"""Which media columns the user's data has: the YAML maps exactly those, and data parity samples only those media.

MindSpeed-MM's huggingface converter reads every mapped column from every record (``example[attr.images]``): a
column the data lacks altogether raises ``KeyError`` in the trainer (``images`` on audio-only data), and a column
the data has but the YAML does not map leaves its ``<video>`` placeholders without frames ("The number of videos
does not match the number of <video> tokens"). So ``partials/config.yaml.jinja`` maps ``images``, ``videos`` and
``audios`` each only where some record names files in it (``data_has``, the render filter ``msmm_data_has``), and
the parity check of branches a and b (``hooks.data.parity``) compares samples of those media only
(``for_data``): a MATCH on a medium the YAML does not map would prove a data path the trainer never runs.
Without data (the generated sample) the YAML is today's: ``images`` and, for audio models, ``audios`` mapped,
``videos`` commented out; parity compares every medium the processor takes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

RECORD_KEYS = {"image": "images", "video": "videos", "audio": "audios"}  # the huggingface records' media columns


def data_columns(data_json: Any) -> set[str] | None:
    """The media columns (``images``, ``videos``, ``audios``) in which some record names a file; None without data
    (no path) or where it cannot be read (the data pre-flight names that)."""
    records = data_records(data_json)
    if records is None:
        return None
    return {column for column in RECORD_KEYS.values() if any(isinstance(r, dict) and r.get(column) for r in records)}


def data_records(data_json: Any) -> list[dict[str, Any]] | None:
    """The data's records; None without data (no path) or where they cannot be read (the pre-flight says why)."""
    if not str(data_json or "").strip():
        return None
    from hooks.data.preflight import DataError, read_records

    try:
        return read_records(Path(str(data_json)).expanduser())
    except (DataError, OSError):
        return None


def data_has(data_json: Any, column: str, default: bool = True) -> bool:
    """Whether the training data names files in ``column``; ``default`` without data: the generated sample has
    images (and clips for an audio model) and no videos."""
    found = data_columns(data_json)
    return default if found is None else column in found


def for_data(spec: Any, data_json: Any) -> Any:
    """The parity ``BatchSpec`` with its samples drawn from the media the data has (the YAML's mapped columns):
    unchanged without data."""
    found = data_columns(data_json)
    if found is None:
        return spec
    return replace(spec, media=[m for m in spec.media if RECORD_KEYS[m] in found],
                   video=bool(spec.video and RECORD_KEYS["video"] in found))


def data_attr(data_json: Any) -> dict[str, str]:
    """The YAML's ``attr`` keys for the turns of the training data (the render filter ``msmm_data_attr``): the role
    convention it is written in (``hooks.data.shapes``: huggingface ``messages``/``role``/``content`` or LLaVA's
    sharegpt ``conversations``/``from``/``value``, ``human``/``gpt``), which MindSpeed-MM's converter reads as
    mapped; the huggingface keys without data."""
    from hooks.data.shapes import HUGGINGFACE, data_convention

    records = data_records(data_json)
    return HUGGINGFACE.attr() if records is None else data_convention(records).attr()

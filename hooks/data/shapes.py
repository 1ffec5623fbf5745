"""The shapes of records users bring, judged against what MindSpeed-MM's converter and sampler will do with them.

Branches a and b hand the user's file to the framework's ``huggingface`` dataset unchanged: its sharegpt
converter (``mindspeed_mm/fsdp/data/data_utils/func_utils/convert.py``, ``SharegptDatasetConverter``) reads the
turns through the YAML's ``attr`` keys, and its sampler (``fsdp/data/dataloader/sampler.py``) splits the records
over the data-parallel ranks. What it does with each shape decides here whether the copy maps it or stops:

- **Role conventions** (``Convention``): the converter reads any column of turns (``messages``), any role and
  content keys (``role_tag``/``content_tag``) and any user and assistant tags, all named in ``attr``. The two
  conventions MindSpeed-MM's own data use are mapped: the huggingface shape (``messages`` of ``role``/``content``,
  ``user``/``assistant``) and LLaVA's sharegpt (``conversations`` of ``from``/``value``, ``human``/``gpt``,
  the input of ``tools/data_tool/llava_instruct_2_mllm_demo_format.py``). Another role tag is stopped: the
  converter would skip every record it is in (a warning in the trainer's log, ``convert.py:166``).
- **Content as typed parts** (``[{"type": "text", ...}, {"type": "image"}]``, OpenAI/HF chat style): the
  converter calls ``.strip()`` on the content (``convert.py:182``): the trainer stops with an AttributeError.
  Stopped, with the string to write instead (branch c's dataset plugin reads such parts itself).
- **Conversation order**: the converter wants user, assistant, user, ... after an optional leading system
  turn, and an even count (``convert.py:161-193``); any other record becomes an empty sample that the
  processor drops with a warning, so the data trains on fewer records than it holds. Stopped, naming the turn.
- **Media as objects or URLs**: ``_find_media_files`` joins each entry to ``dataset_dir`` as a path
  (``convert.py:80``, a TypeError for an object) and ``mm_plugin``'s ``_regularize_images/videos/audios`` open
  local files (PIL, PyAV, librosa), never a URL. Stopped, naming the entry.
- **Too few records** (``records_error``): the sampler's ``BaseRandomBatchSampler`` divides by the records
  that fill whole batches over the ranks (``drop_last``, ``sampler.py:63``): fewer records than ranks x micro
  batch is a ZeroDivisionError on every rank (seen as ``gloo: Connection closed by peer``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MEDIA_COLUMNS = ("images", "videos", "audios")
_MARKS = {"image": "<image>", "video": "<video>", "audio": "<audio>"}
PART_MEDIUM = {"image": "image", "image_url": "image", "video": "video", "video_url": "video", "audio": "audio",
               "input_audio": "audio", "audio_url": "audio"}  # typed-part types (HF chat, OpenAI) -> medium


@dataclass(frozen=True)
class Convention:
    """How a data set names its turns: the ``attr`` keys MindSpeed-MM's sharegpt converter reads them by
    (``DatasetAttr``: ``messages``, ``role_tag``, ``content_tag``, ``user_tag``, ``assistant_tag``,
    ``system_tag``)."""

    messages: str = "messages"
    role_tag: str = "role"
    content_tag: str = "content"
    user_tag: str = "user"
    assistant_tag: str = "assistant"
    system_tag: str = "system"

    def attr(self) -> dict[str, str]:
        """The YAML's ``attr`` lines for the turns, in the order the template writes them (``system_tag`` left to
        ``DatasetAttr``'s default, ``system``, which both mapped conventions use)."""
        return {key: value for key, value in asdict(self).items() if key != "system_tag"}

    def fields(self) -> dict[str, str]:
        """Branch c's ``FieldMap`` arguments that read the same turns (its ``turns`` reads either key pair)."""
        return {"conversations": self.messages}


    @classmethod
    def of_attr(cls, attr: dict[str, Any]) -> Convention:
        """The convention a YAML's ``attr`` reads: its keys, ``DatasetAttr``'s defaults (sharegpt's) for the rest."""
        return cls(**{**asdict(SHAREGPT), **{k: str(v) for k, v in attr.items() if k in asdict(SHAREGPT)}})

    def written(self, record: dict[str, Any]) -> dict[str, Any]:
        """A huggingface-shape ``record`` (``messages`` of role/content) written in this convention: the parity's
        own samples as the YAML's ``attr`` reads the user's data."""
        tags = {"user": self.user_tag, "assistant": self.assistant_tag, "system": self.system_tag}
        turns = [{self.role_tag: tags.get(t["role"], t["role"]), self.content_tag: t["content"]}
                 for t in record.get("messages", [])]
        return {**{k: v for k, v in record.items() if k != "messages"}, self.messages: turns}


HUGGINGFACE = Convention()
SHAREGPT = Convention("conversations", "from", "value", "human", "gpt")
TAG_PAIRS = ((HUGGINGFACE.user_tag, HUGGINGFACE.assistant_tag), (SHAREGPT.user_tag, SHAREGPT.assistant_tag))


class ShapeError(ValueError):
    """A record the framework would not train as written, worded ``<field>: <what>; <fix>``."""


def _turns_key(record: dict[str, Any]) -> str:
    for key in (HUGGINGFACE.messages, SHAREGPT.messages):
        if isinstance(record.get(key), list) and record[key]:
            return key
    return ""


def convention_of(records: list[dict[str, Any]], where: str = "data_json") -> Convention:
    """The convention every record is written in; raises ShapeError naming the first record that differs or
    that no mapping reads."""
    found: Convention | None = None
    for index, record in enumerate(records, 1):
        key = _turns_key(record)
        if not key:
            raise ShapeError(f"{where}: record {index} has no 'messages' list (nor sharegpt's 'conversations') "
                             "of turns (the huggingface shape: messages with role/content, images, videos, "
                             "audios); convert it, or answer data_branch=c and map its keys with data_fields")
        turn = next((t for t in record[key] if isinstance(t, dict)), {})
        role_tag, content_tag = (("role", "content") if "role" in turn else ("from", "value") if "from" in turn
                                 else ("", ""))
        if not role_tag:
            raise ShapeError(f"{where}: record {index}'s first turn has neither 'role' nor 'from' (keys "
                             f"{sorted(turn)}); write each turn as {{\"role\": ..., \"content\": ...}}")
        roles = {str(t.get(role_tag)) for t in record[key] if isinstance(t, dict)} - {HUGGINGFACE.system_tag}
        if found is not None and roles <= {found.user_tag, found.assistant_tag}:
            pair: tuple[str, str] | None = (found.user_tag, found.assistant_tag)
        else:
            pair = next((p for p in TAG_PAIRS if roles <= set(p)), None)
        if pair is None:
            other = sorted(roles - {*TAG_PAIRS[0], *TAG_PAIRS[1]}) or sorted(roles)
            raise ShapeError(f"{where}: record {index} has role(s) {other} in '{role_tag}'; MindSpeed-MM's converter "
                             "reads one user and one assistant tag per data set (user/assistant or human/gpt, and "
                             "system first) and skips every other record; rename the roles")
        this = Convention(key, role_tag, content_tag, *pair)
        if found is None:
            found = this
        elif this != found:
            raise ShapeError(f"{where}: record {index} is written as {key}/{role_tag}/{'/'.join(sorted(roles))} but "
                             f"record 1 as {found.messages}/{found.role_tag}/{found.user_tag}/{found.assistant_tag}; "
                             "write every record in one convention (the YAML's attr maps one)")
    return found or HUGGINGFACE


def record_error(record: dict[str, Any], index: int, convention: Convention, where: str = "data_json") -> str:
    """Why the converter would not train ``record`` as written ("" when it would): typed-part content, a turn out
    of order, an odd number of turns, media given as objects or URLs."""
    turns = record.get(convention.messages) or []
    named = f"{where}: record {index}"
    for number, turn in enumerate(turns, 1):
        if not isinstance(turn, dict):
            return f"{named} turn {number} is not an object; write each turn as {{\"{convention.role_tag}\": ..., " \
                   f"\"{convention.content_tag}\": ...}}"
        content = turn.get(convention.content_tag)
        if isinstance(content, list):
            return (f"{named} turn {number} gives '{convention.content_tag}' as a list of typed parts; MindSpeed-MM's "
                    "converter reads a string (the trainer would stop: 'list' object has no attribute 'strip'); write "
                    f"the text as one string with a placeholder per media part in order ({typed_text(content)!r}) and "
                    "the files in images/videos/audios, or answer data_branch=c (its dataset plugin reads parts)")
        if not isinstance(content, str):
            return (f"{named} turn {number} has no string '{convention.content_tag}' ({type(content).__name__}); write "
                    "the turn's text as a string")
    problem = order_problem([str(t.get(convention.role_tag)) for t in turns], convention)
    if problem:
        return (f"{named} {problem}: MindSpeed-MM's converter skips such a record (a warning in the trainer's log) "
                f"and the data trains on fewer records than it holds; start with the {convention.user_tag} turn, "
                f"alternate {convention.user_tag}/{convention.assistant_tag}, end with an {convention.assistant_tag} "
                "turn (a system turn only first), or drop the record")
    return media_entry_error(record, index, where)


def order_problem(roles: list[str], convention: Convention = HUGGINGFACE) -> str:
    """What breaks the converter's turn order in ``roles`` ("" when nothing does)."""
    if roles and roles[0] == convention.system_tag:
        roles = roles[1:]
    if not roles:
        return "has no turn besides a system turn"
    for number, role in enumerate(roles, 1):
        wanted = convention.user_tag if number % 2 else convention.assistant_tag
        if role != wanted:
            what = "a system turn mid-way" if role == convention.system_tag else f"'{role}'"
            return f"has {what} at turn {number} (after any leading system turn) where '{wanted}' belongs"
    if len(roles) % 2:
        return f"has an odd number of turns ({len(roles)}, after any leading system turn): it ends with a question"
    return ""


def typed_text(parts: list[Any]) -> str:
    """Typed parts as the one string the framework reads: text parts' text, a placeholder per media part."""
    out = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            out.append(str(part.get("text", "")))
        elif kind in PART_MEDIUM:
            out.append(_MARKS[PART_MEDIUM[kind]])
    return "".join(out)


def media_entry_error(record: dict[str, Any], index: int, where: str = "data_json",
                      columns: tuple[str, ...] = MEDIA_COLUMNS) -> str:
    """Why a media entry of ``record`` is not a local path ("" when each is): an object or a URL."""
    for column in columns:
        value = record.get(column)
        for entry in [value] if isinstance(value, (str, dict)) else value if isinstance(value, list) else []:
            problem = entry_problem(entry)
            if problem:
                return (f"{where}: record {index} names {_short(entry)} in '{column}', {problem}; "
                        f"{entry_fix(entry)}")
    return ""


def entry_problem(entry: Any) -> str:
    """Why a media entry is not a path the framework's loaders open ("" when it is one)."""
    if isinstance(entry, dict):
        return ("an object, not a path (MindSpeed-MM's converter joins each entry to dataset_dir as a path: a "
                "TypeError in the trainer)")
    if not isinstance(entry, str):
        return f"a {type(entry).__name__}, not a path"
    if "://" in entry:
        return "a URL: the framework's loaders (PIL, PyAV, librosa) open local files only"
    return ""


def entry_fix(entry: Any) -> str:
    if isinstance(entry, dict) and isinstance(entry.get("path"), str):
        return f"write the path itself ({entry['path']!r}), relative to media_root"
    if isinstance(entry, dict) or isinstance(entry, str) and "://" in entry:
        return "download the file under media_root and name its path relative to it"
    return "give the path as a string"


def _short(entry: Any) -> str:
    text = entry if isinstance(entry, str) else repr(entry)
    return text if len(text) <= 80 else text[:77] + "..."


def data_convention(records: list[dict[str, Any]]) -> Convention:
    """The convention the YAML's ``attr`` maps for ``records`` (the huggingface one for data the pre-flight
    stopped)."""
    try:
        return convention_of(records)
    except ShapeError:
        return HUGGINGFACE


def records_error(count: int, ranks: int, micro_batch: int = 1, what: str = "the smoke", fix: str = "") -> str:
    """Whether ``count`` records fill one micro batch on each of ``ranks`` ranks ("" when they do); ``fix`` adds a
    way out beside more records."""
    needed = ranks * micro_batch
    if count >= needed:
        return ""
    return (f"data_json: holds {count} record(s), but {what} runs {ranks} data-parallel rank(s) x micro batch "
            f"{micro_batch} with drop_last, so it needs at least {needed} (with fewer, MindSpeed-MM's "
            f"BaseRandomBatchSampler divides by zero on every rank); add records (a copy of a record counts){fix}")


def mapped_error(records: list[dict[str, Any]], mapping: Any, where: str = "data_json") -> str:
    """Branch c: the first record its dataset plugin cannot train as written, read through ``mapping`` (a
    ``FieldMap``: typed parts and ``{"path": ...}`` media objects it reads itself) ("" when every record can)."""
    for index, record in enumerate(records, 1):
        try:
            turns = mapping.turns(record)
        except TypeError as err:
            if "content part" not in str(err):
                return ""  # a mapping problem: data_fields' own check says why
            return (f"{where}: record {index} has {err}; write that part's medium as a file in the mapped images or "
                    "audios and a placeholder in the text, or drop the record")
        except (KeyError, AttributeError):
            return ""
        roles = [role for role, _ in turns]
        problem = order_problem(roles) if not mapping.prompt else ""
        if problem:
            return (f"{where}: record {index} {problem}: a chat sample alternates user and assistant turns after an "
                    "optional leading system turn and ends with an answer; reorder the turns or drop the record")
        listed = ((mapping.images, mapping.images_of(record)), (mapping.audios, mapping.audios_of(record)))
        for column, entries in listed:
            for entry in entries:
                why = entry_problem(entry)
                if why:
                    return f"{where}: record {index} names {_short(entry)} in '{column}', {why}; {entry_fix(entry)}"
    return ""

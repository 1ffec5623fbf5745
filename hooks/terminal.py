"""Text for a person at a terminal: wrapped at word boundaries to its width, never split inside a word.

A terminal wraps a long line wherever its last column falls (``apply_\\nmodules``), so every line the hooks print
for a person goes through ``echo``. Where the output is no terminal (a CI log, a pipe) lines are left whole, so a
log keeps each figure on one searchable line. Shared by every stage that prints (the smoke's progress, the report,
``hooks.check``, ``hooks.update``).
"""

from __future__ import annotations

import shutil
import sys
from typing import TextIO


def is_terminal(stream: TextIO | None = None) -> bool:
    """Someone reads ``stream`` (stdout by default) at a terminal."""
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def terminal_width(stream: TextIO | None = None) -> int | None:
    """Columns to wrap at (one short of the terminal's, at least 40), or None where the output is no terminal."""
    if not is_terminal(stream):
        return None
    return max(40, shutil.get_terminal_size((80, 24)).columns - 1)


def wrap(text: str, width: int | None, *, hang: int | None = None) -> list[str]:
    """``text``'s lines wrapped at word boundaries to ``width`` (None: unchanged); a wrapped line is indented by
    ``hang`` columns (default: its line's indent plus two). A word is never split, except that a path too long
    for a line is broken after one of its slashes."""
    if width is None:
        return text.splitlines() or [""]
    out: list[str] = []
    for line in text.splitlines() or [""]:
        lead = len(line) - len(line.lstrip(" "))
        out += _wrap_line(line, width, " " * (hang if hang is not None else lead + 2))
    return out


def _wrap_line(line: str, width: int, indent: str) -> list[str]:
    """Greedy: words joined by the spaces they had; a new row starts with ``indent``."""
    if len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    rows: list[str] = []
    row, start = line[: len(line) - len(body)], True
    for word in body.split(" "):
        pieces = _path_pieces(word, width - len(indent))
        if start or len(row) + 1 + len(word) <= width:
            row, start = (row + word if start else f"{row} {word}"), False
            continue
        if len(pieces) > 1:  # a long path: fill this row with its first pieces
            row += " "
            for piece in pieces:
                if len(row) + len(piece) > width and row.strip():
                    rows.append(row.rstrip())
                    row = indent
                row += piece
            continue
        rows.append(row.rstrip())
        row = indent + word
    return [*rows, row.rstrip()]


def _path_pieces(word: str, room: int) -> list[str]:
    """A word longer than ``room`` cut after each slash (``['/tmp/', 'a/', 'b']``); any other word whole."""
    if len(word) <= room or "/" not in word.strip("/"):
        return [word]
    parts = word.split("/")
    return [part + "/" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def echo(text: str = "", *, file: TextIO | None = None) -> None:
    """Print ``text`` wrapped for the stream it goes to (stdout by default), flushed."""
    stream = file or sys.stdout
    for line in wrap(text, terminal_width(stream)):
        print(line, file=stream)
    stream.flush()

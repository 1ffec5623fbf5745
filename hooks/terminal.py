"""Text for a person at a terminal: wrapped at word boundaries to its width, never split inside a word.

A terminal wraps a long line wherever its last column falls (``apply_\\nmodules``), so every line the hooks print
for a person goes through ``echo``. Where the output is no terminal (a CI log, a pipe) lines are left whole, so a
log keeps each figure on one searchable line. Shared by every stage that prints (the smoke's progress, the report,
``hooks.check``, ``hooks.update``).
"""

from __future__ import annotations

import shutil
import sys
import textwrap
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


def wrap(text: str, width: int | None) -> list[str]:
    """``text``'s lines wrapped at word boundaries to ``width`` (None: unchanged); a wrapped line keeps its indent
    plus two spaces. A word longer than the width (a path) is left whole, never split."""
    if width is None:
        return text.splitlines() or [""]
    out: list[str] = []
    for line in text.splitlines() or [""]:
        indent = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_long_words=False,
                             break_on_hyphens=False) or [""]
    return out


def echo(text: str = "", *, file: TextIO | None = None) -> None:
    """Print ``text`` wrapped for the stream it goes to (stdout by default), flushed."""
    stream = file or sys.stdout
    for line in wrap(text, terminal_width(stream)):
        print(line, file=stream)
    stream.flush()

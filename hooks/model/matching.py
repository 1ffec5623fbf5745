"""MindSpeed's module-name pattern matcher, re-implemented for planning.

MindSpeed-MM matches every ``apply_modules`` pattern with
``mindspeed.fsdp.utils.str_match.module_name_match``: an anchored full-name
match where ``{*}`` is one run of digits, ``{a-b}`` an inclusive index range,
``*`` any characters (dots included), ``?`` one character, everything else
literal. We re-implement it so plans can be checked without MindSpeed on the
path; ``tests/test_matching.py`` compares it with the real one when available.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

_TOKEN = re.compile(r"\{[^}]*\}|\*|\?")


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str) -> tuple[re.Pattern[str], tuple[tuple[int, int] | None, ...]]:
    parts: list[str] = []
    ranges: list[tuple[int, int] | None] = []
    pos = 0
    for tok in _TOKEN.finditer(pattern):
        parts.append(re.escape(pattern[pos : tok.start()]))
        text = tok.group()
        if text == "*":
            parts.append(".*")
        elif text == "?":
            parts.append(".")
        elif text == "{*}":
            parts.append(r"(\d+)")
            ranges.append(None)
        else:
            low, sep, high = text[1:-1].partition("-")
            if not sep or not low.isdigit() or not high.isdigit() or int(low) > int(high):
                raise ValueError(f"invalid index range {text!r} in pattern {pattern!r}")
            parts.append(r"(\d+)")
            ranges.append((int(low), int(high)))
        pos = tok.end()
    parts.append(re.escape(pattern[pos:]))
    return re.compile("^" + "".join(parts) + "$"), tuple(ranges)


def module_name_match(pattern: str, name: str) -> bool:
    """True when ``name`` fully matches ``pattern`` under MindSpeed's rules."""
    regex, ranges = _compile(pattern)
    found = regex.match(name)
    if not found:
        return False
    for value, bounds in zip(found.groups(), ranges, strict=True):
        if bounds is not None and not bounds[0] <= int(value) <= bounds[1]:
            return False
    return True


def matches(pattern: str, names: Iterable[str]) -> list[str]:
    """All names matched by ``pattern``, in the given order."""
    return [name for name in names if module_name_match(pattern, name)]


def generalize(name: str) -> str:
    """Turn a concrete module name into a pattern: numeric segments become ``{*}``."""
    return ".".join("{*}" if part.isdigit() else part for part in name.split("."))

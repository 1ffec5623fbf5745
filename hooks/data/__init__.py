"""The data path: what reaches the model's forward, checked against the model's own processor.

``chat_format`` reads a template's slots off the model's own chat template and ``media`` asks the
processor what each media item becomes (branch b); ``records`` reads the user's records through a
field mapping for branch c's dataset plugin; ``candidates`` and ``parity`` (running ``batch`` in the
framework) compare the whole batch the data path builds with the model's own, and choose the
branch; ``sample`` writes the smoke's generated data when the user gives none.
"""

from collections.abc import Sequence


def first_difference(ours: Sequence[object], theirs: Sequence[object]) -> int:
    """Index of the first position where two token lists differ (the shorter length if one is a prefix)."""
    return next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), min(len(ours), len(theirs)))

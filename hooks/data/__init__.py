"""The data path: what reaches the model's forward, checked against the model's own processor.

``parity`` compares MindSpeed-MM's encoding of a sample with the model's own chat template and
processor; ``sample`` writes the smoke's generated data when the user gives none.
"""

from collections.abc import Sequence


def first_difference(ours: Sequence[object], theirs: Sequence[object]) -> int:
    """Index of the first position where two token lists differ (the shorter length if one is a prefix)."""
    return next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), min(len(ours), len(theirs)))

"""The data path: what reaches the model's forward, checked against the model's own processor.

``chat_format`` reads a template's slots off the model's own chat template and ``media`` asks the
processor what each media item becomes (branch b); ``records`` reads the user's records through a
field mapping for branch c's dataset plugin, and ``model_code`` reads the model's own data code
(``load_image``, its conversation, measured on its ``chat()``) when it has no processor class;
``candidates`` and ``parity`` (running ``batch`` in the framework) compare the whole batch the data
path builds with the model's own, and choose the branch; ``sample`` writes the smoke's generated
data when the user gives none, and ``encoders`` turns samples into the labelled batches the contract
smoke trains on.
"""

from collections.abc import Sequence
from typing import Any

# Sample formats made by the model's own data code (no processor class): its chat(), a sample method, make_context(),
# the model card's quick-start code (``recipe``)
MODEL_CODE_KINDS = ("code", "method", "context", "recipe")
IGNORE_INDEX = -100  # the label of a token no loss is computed on (torch's cross_entropy default)


def first_difference(ours: Sequence[object], theirs: Sequence[object]) -> int:
    """Index of the first position where two token lists differ (the shorter length if one is a prefix)."""
    return next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), min(len(ours), len(theirs)))


def value_difference(a: Any, b: Any) -> str:
    """How two batch values differ, in words ("" when equal; floats within tolerance)."""
    import torch

    atol, rtol = 1e-4, 1e-3
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        if a.shape != b.shape:
            return f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
        if a.is_floating_point() or b.is_floating_point():
            if torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol):
                return ""
            return f"values differ by up to {float((a.double() - b.double()).abs().max()):.3g}"
        return "" if torch.equal(a, b) else "values differ"
    return "" if a == b else f"{a!r} vs {b!r}"


def per_sample_problem(name: str, ours: Any, key: str) -> str:
    """Why the dataset plugin's batch for the parity sample ``name`` is not what a ``forward`` taking its media
    ``key`` one entry per sample takes ("" when it is): the plugin raised, or the media are no such list."""
    if isinstance(ours, Exception):
        return f"{name}: the dataset plugin fails on it ({type(ours).__name__}: {ours})"
    media = ours.get(key)
    if not isinstance(media, list) or len(media) != ours["input_ids"].shape[0]:
        return f"{name}: {key!r} is not a list with one entry per sample, as forward takes it"
    return ""

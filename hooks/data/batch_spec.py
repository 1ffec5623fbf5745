"""What the batch check's worker needs to know of the model: the parity stage's one message to it.

The parity check (``hooks.data.parity``, and the copy-time evidence) writes it from the frozen model facts; the
worker (``python -m hooks.data.batch --spec SPEC.json``, in the training interpreter, inside the framework) reads it
back. It crosses a process boundary as JSON, so it is a typed record with one writer and one reader.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class BatchSpec:
    """The model as the batch check needs it (``hooks.data.parity.spec_for``)."""

    forward_keys: list[str] = field(default_factory=list)  # the inputs forward names
    forward_kwargs: bool = False  # forward also takes **kwargs
    end_of_turn: str = ""  # what closes an answer (the end-of-turn tokens, or the template's own closing text)
    sample_format: dict[str, Any] = field(default_factory=dict)  # branch c's convention, as the generated code has it
    string_roles: list[str] = field(default_factory=list)  # roles whose content the chat template wants as a string
    trust_remote_code: bool = False
    media: list[str] = field(default_factory=lambda: ["image"])  # the media the processor takes
    video: bool = False  # compare a video sample too (branch b with a video item)
    branch: str | None = None  # "c": the dataset plugin makes the batches (None: the huggingface data path)
    model_id: str | None = None  # branch c's plugin and model registration

    @property
    def kind(self) -> str:
        """The sample convention's kind ('' for none)."""
        return str(self.sample_format.get("kind") or "")

    def to_dict(self) -> dict[str, Any]:
        """The JSON the worker reads (``branch``/``model_id`` only where set, as the parity cache key hashes it)."""
        return {k: v for k, v in asdict(self).items() if v is not None or k not in ("branch", "model_id")}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchSpec:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

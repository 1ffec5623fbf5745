"""What every checker returns, and what the checkout offers (read once for all its models)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hooks import scaffold
from hooks.framework import checkout

LEVELS = ("error", "warning", "info")


def update_command(model_id: str) -> str:
    """The command that re-renders one model's scaffold."""
    return f"copier update --trust --defaults -a {scaffold.answers_file(model_id)}"


@dataclass(frozen=True)
class Finding:
    """One line of the report: what every checker returns.

    The checkers look at a setting, a file or a registry and need not know whose it is, so ``model`` is left
    empty there; ``check_model`` fills it in.
    """

    level: str  # error | warning | info
    what: str
    fix: str
    model: str = ""

    def line(self) -> str:
        return f"{self.model}: {self.level}: {self.what} — fix: {self.fix}"


@dataclass
class Framework:
    """What the checkout offers, read once for all its models."""

    dest: Path
    places: dict[str, list[str]]
    deprecated: set[str]
    facts: dict[str, Any]
    extras: set[str]

    @classmethod
    def read(cls, dest: Path) -> Framework:
        from hooks.smoke.settings import extras_read

        return cls(dest, checkout.schema(dest), set(checkout.deprecated(dest)), checkout.facts(dest),
                   extras_read(dest))



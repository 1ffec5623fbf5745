"""msmm-migrate hooks: probe, plan, shrink, data parity, smoke (framework / contract) and report.

Every user-facing step has a ``python -m hooks.<step>`` entry. Modules import
torch/transformers lazily so that copier can import this package cheaply.
"""

from __future__ import annotations

import os
from pathlib import Path

TEMPLATE_ROOT = Path(__file__).resolve().parent.parent  # this repository: the copier template and hooks/


def env_with_hooks(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this environment) with this repository first on PYTHONPATH.

    Every subprocess that runs ``python -m hooks.<step>`` needs it: the hooks interpreter is
    the training environment's, where this repository is not installed.
    """
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TEMPLATE_ROOT), env.get("PYTHONPATH", "")) if p)
    return env

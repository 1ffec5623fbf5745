"""msmm-migrate hooks: probe, plan, shrink, data parity, smoke (framework / contract) and report.

Every user-facing step has a ``python -m hooks.<step>`` entry. Modules import
torch/transformers lazily so that copier can import this package cheaply.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

TEMPLATE_ROOT = Path(__file__).resolve().parent.parent  # this repository: the copier template and hooks/
# Set by the copy when an interactive copier showed the probe's findings above the data-branch question, so the
# post-generation task (hooks.report.postgen) need not repeat them.
FINDINGS_SHOWN = "MSMM_FINDINGS_SHOWN"


def env_with_hooks(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this environment) with this repository first on PYTHONPATH.

    Every subprocess that runs ``python -m hooks.<step>`` needs it: the hooks interpreter is
    the training environment's, where this repository is not installed.
    """
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TEMPLATE_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def exit_now(code: int) -> NoReturn:
    """Flush stdout/stderr and leave without the interpreter's teardown.

    A process that imported torch and transformers spends 0.6-2 s (one core, 2-core VM) in
    shutdown: the final garbage collection and module finalisation walk millions of objects.
    The probe is waited on by copier before anything renders, so that is user-visible time.
    Safe where every file is closed by then (all hooks write through ``with`` blocks or
    libraries that close their files). A forked or torchrun rank also avoids gloo's C++
    destructors, which abort when a peer has already exited.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_one_shot(main: Callable[[], int]) -> NoReturn:
    """Run a short-lived, import-heavy entry point (the probe copier waits on) and ``exit_now``.

    The cyclic GC is off: during the torch/transformers imports it keeps rescanning the growing
    module graph (~20% of the probe's time) to free nothing that outlives the process anyway.
    """
    gc.disable()
    exit_now(main())


def cache_root() -> Path:
    """Where this tool keeps state (shrunk models, smoke work dirs, parity verdicts), never the checkout."""
    return Path(os.environ.get("MSMM_CACHE", Path.home() / ".cache" / "msmm-migrate"))


def load_answers(answers_file: Path) -> dict[str, Any]:
    """A model's copier answers file (``.copier-answers/<model_id>.yml``): answers and the frozen model facts."""
    import yaml

    if not answers_file.is_file():
        raise SystemExit(f"error: answers file {answers_file} not found; run from the checkout root")
    return yaml.safe_load(answers_file.read_text())


def dig(node: Any, *keys: str) -> Any:
    """``node[k1][k2]...`` through nested dicts (a YAML, a JSON record), None where a level is missing."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def load_partial(filename: str) -> ModuleType:
    """A run-time file of ``partials/`` (copied beside the generated plugins; it imports nothing of ours) as a
    module, loaded once per process: the hooks run the very code the checkout will."""
    name = "msmm_" + Path(filename).stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TEMPLATE_ROOT / "partials" / filename)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load partials/{filename}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules[name]

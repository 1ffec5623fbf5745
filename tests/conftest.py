"""Shared fixtures: tiny model directories (built once per session) and the template root.

Tier 1 runs everywhere. Tier 2 (marker ``tier2``) needs a MindSpeed-MM work tree in
``MINDSPEED_MM_HOME`` (and MindSpeed core in ``MINDSPEED_HOME`` unless installed); ``make test``
sets both from the vendored snapshots (``tests/framework_snapshots.py``). Two more markers:
``full_matrix`` (real-trainer smokes of the families beyond the representative subset CI runs;
``--full-matrix`` runs them) and ``torch27`` (the hooks in the torch 2.7.1 interpreter named by
``MSMM_TORCH27_PYTHON``; ``make test-torch27`` builds it) and ``tf5`` (the hooks in the transformers 5.x
interpreter named by ``MSMM_TF5_PYTHON``; ``make test-tf5`` builds it).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

TEMPLATE_ROOT = Path(__file__).resolve().parent.parent
FULL_CONFIGS = Path(__file__).resolve().parent / "fixtures" / "full_configs"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full-matrix", action="store_true",
                     help="tier 2: every family through the real trainer, not only the representative subset")


def pytest_configure(config: pytest.Config) -> None:
    # Keep smoke work dirs (shrunk models, generated data, logs) out of the user's cache.
    os.environ.setdefault("MSMM_CACHE", tempfile.mkdtemp(prefix="msmm-test-cache-"))
    config.addinivalue_line("markers", "tier2: needs a MindSpeed-MM checkout in MINDSPEED_MM_HOME")
    config.addinivalue_line("markers", "full_matrix: tier-2 family beyond the representative subset (--full-matrix)")
    config.addinivalue_line("markers", "torch27: runs the hooks in MSMM_TORCH27_PYTHON (torch 2.7.1)")
    config.addinivalue_line("markers", "tf5: runs the hooks in MSMM_TF5_PYTHON (transformers 5.x)")


def _skip_reasons(config: pytest.Config) -> dict[str, str]:
    """marker -> why its tests are skipped in this session (markers whose tests run are absent)."""
    reasons = {}
    if not os.environ.get("MINDSPEED_MM_HOME"):
        reasons["tier2"] = "tier 2: set MINDSPEED_MM_HOME to a MindSpeed-MM work tree (make test does)"
    if not config.getoption("--full-matrix"):
        reasons["full_matrix"] = "beyond the representative subset: run with --full-matrix (make test-all)"
    if not os.environ.get("MSMM_TORCH27_PYTHON"):
        reasons["torch27"] = "set MSMM_TORCH27_PYTHON to a torch 2.7.1 interpreter (make test-torch27)"
    if not os.environ.get("MSMM_TF5_PYTHON"):
        reasons["tf5"] = "set MSMM_TF5_PYTHON to a transformers 5.x interpreter (make test-tf5)"
    return reasons


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reasons = _skip_reasons(config)
    for item in items:
        for marker, reason in reasons.items():
            if marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
                break


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory):
    """``tiny_models(arch) -> Path``: a tiny model directory, built on first use."""
    from hooks.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("tiny-models")
    built: dict[str, Path] = {}

    def get(arch: str) -> Path:
        if arch not in built:
            built[arch] = build_tiny_model(arch, root / arch)
        return built[arch]

    return get


@pytest.fixture(scope="session")
def demo_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hooks.data.sample import build_demo_dataset

    return build_demo_dataset(tmp_path_factory.mktemp("demo-data"))


@pytest.fixture(scope="session")
def mm_home() -> Path:
    home = os.environ.get("MINDSPEED_MM_HOME")
    if not home:
        pytest.skip("tier 2: MINDSPEED_MM_HOME is not set")
    return Path(home)


@pytest.fixture(scope="session")
def template_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template as a clean, fixed git snapshot (stable ``_commit`` across renders)."""
    from tests.copier_run import template_snapshot

    return template_snapshot(tmp_path_factory.mktemp("template") / "msmm-migrate")

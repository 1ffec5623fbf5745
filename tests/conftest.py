"""Shared fixtures: tiny model directories (built once per session) and the template root.

Tier 1 runs everywhere. Tier 2 (marker ``tier2``) needs a MindSpeed-MM work tree in
``MINDSPEED_MM_HOME`` (and MindSpeed core in ``MINDSPEED_HOME`` unless installed).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

TEMPLATE_ROOT = Path(__file__).resolve().parent.parent
FULL_CONFIGS = Path(__file__).resolve().parent / "fixtures" / "full_configs"


def pytest_configure(config: pytest.Config) -> None:
    # Keep smoke work dirs (shrunk models, generated data, logs) out of the user's cache.
    os.environ.setdefault("MSMM_CACHE", tempfile.mkdtemp(prefix="msmm-test-cache-"))
    config.addinivalue_line("markers", "tier2: needs a MindSpeed-MM checkout in MINDSPEED_MM_HOME")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("MINDSPEED_MM_HOME"):
        return
    skip = pytest.mark.skip(reason="tier 2: set MINDSPEED_MM_HOME to a MindSpeed-MM work tree")
    for item in items:
        if "tier2" in item.keywords:
            item.add_marker(skip)


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

"""Fixtures of the runtime tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from toy_flower_app import write_toy_app


@pytest.fixture
def toy_app(tmp_path: Path) -> Path:
    """The toy Flower app, written into ``tmp_path/app``."""
    return write_toy_app(tmp_path / "app")

"""Shared fixtures of the tests of ``experiments/`` scripts (plain files, not a package)."""

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

_EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.fixture(scope="session")
def experiment_script():
    """``load(relative_path)``: the module of ``experiments/<relative_path>``."""

    def load(relative: str) -> ModuleType:
        path = _EXPERIMENTS / relative
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load

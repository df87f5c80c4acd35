"""Rough edges a new user met in the first hour (issue 82), each kept fixed."""

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_license_is_an_spdx_expression():
    """setuptools deprecates ``project.license`` as a table (``pip install -e .`` warned)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and (REPO / "LICENSE").is_file()


def test_the_tests_read_the_data_where_the_runs_do(monkeypatch):
    """``FGL_DATA_ROOT`` (the runs' setting) also points the tests at the data; a clone
    elsewhere no longer skips every data test silently."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("suite_conftest", REPO / "tests" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    benchmark_data_root = conftest.benchmark_data_root

    monkeypatch.setenv("FGL_DATA_ROOT", "/somewhere/data")
    monkeypatch.setenv("FGL_TEST_DATA_ROOT", "/elsewhere")
    assert benchmark_data_root() == Path("/somewhere/data")
    monkeypatch.delenv("FGL_DATA_ROOT")
    assert benchmark_data_root() == Path("/elsewhere")
    monkeypatch.delenv("FGL_TEST_DATA_ROOT")
    assert benchmark_data_root() == REPO.parent / "shared" / "data"

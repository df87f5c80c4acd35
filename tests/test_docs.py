"""The documentation: the site builds in strict mode (a broken link, a page missing from the
nav or a docstring the API reference cannot read fails), README stays a front door, its links
resolve, and the generated tables are current."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed (pip install -e '.[docs]')",
)
def test_the_docs_site_builds_strictly(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "methods" / "authoring" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "api" / "index.html").is_file()


def test_the_readme_is_a_front_door():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "bash scripts/test.sh" in text  # the test command CI runs


def test_the_readmes_links_resolve():
    text = (REPO / "README.md").read_text()
    targets = [
        t for t in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text) if not t.startswith("http")
    ]
    assert targets
    assert [t for t in targets if not (REPO / t).exists()] == []


def test_the_generated_tables_are_current():
    from fgl_flower.tables import sync_blocks

    for path in (REPO / "README.md", REPO / "docs" / "methods" / "index.md"):
        text = path.read_text()
        assert sync_blocks(text, path) == text, f"run: python -m fgl_flower.tables --write {path}"

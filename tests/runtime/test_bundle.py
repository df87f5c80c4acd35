"""The staged app folder: Flower builds the same app bundle from it, without walking the rest."""

import io
import zipfile

import pytest
from flwr.cli.build import build_fab_from_disk

from fgl_flower.paths import STAGED, app_dir
from fgl_flower.runtime.bundle import literal_root, staged_app

PYPROJECT = """\
[project]
name = "demo-app"
version = "1.0.0"
dependencies = ["flwr>=1.42"]

[tool.flwr.app]
publisher = "demo"
fab-include = [{patterns}]

[tool.flwr.app.components]
serverapp = "pkg.server:app"
clientapp = "pkg.client:app"

[tool.flwr.app.config]
x = 1
"""


def _app(root, patterns='"pkg/**/*.py"'):
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT.format(patterns=patterns))
    (root / ".gitignore").write_text("pkg/ignored.py\n")
    for rel in (
        "pkg/__init__.py",
        "pkg/server.py",
        "pkg/client.py",
        "pkg/sub/deep.py",
        "pkg/ignored.py",
        "pkg/data.csv",
        ".venv/lib/site.py",
        "tests/test_x.py",
        "top.py",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    (root / "pkg" / "link.py").symlink_to(root / "top.py")  # Flower skips links
    return root


def _names(fab: bytes) -> list[str]:
    return sorted(zipfile.ZipFile(io.BytesIO(fab)).namelist())


def test_flower_builds_the_same_bundle_from_the_staged_folder(tmp_path):
    app = _app(tmp_path / "app")
    staged = staged_app(app, tmp_path / "staged")
    assert staged == tmp_path / "staged"
    assert not (staged / ".venv").exists() and not (staged / "tests").exists()
    fab = build_fab_from_disk(app)
    assert build_fab_from_disk(staged) == fab
    assert "pkg/sub/deep.py" in _names(fab) and "pkg/ignored.py" not in _names(fab)


@pytest.mark.parametrize("patterns", ['"*.py"', '"**/*.py"', ""])
def test_patterns_that_may_match_anywhere_keep_the_app_folder(tmp_path, patterns):
    app = _app(tmp_path / "app", patterns)
    assert staged_app(app, tmp_path / "staged") == app


def test_literal_roots():
    assert literal_root("fgl_flower/**/*.py") == "fgl_flower"
    assert literal_root("/a/b/*.py") == "a/b"
    assert literal_root("a/*/c.py") == "a"
    assert literal_root("**/*.py") == "" and literal_root("*.py") == ""
    assert literal_root("pkg/") == "pkg"


def test_this_app_is_its_package_only_and_is_not_staged_again(tmp_path):
    """``app_dir()`` writes the bundle's files only (marked), so staging hands it over as it
    is, not copied a second time."""
    app = app_dir()
    staged = staged_app(app, tmp_path / "staged")
    assert staged == app and not (tmp_path / "staged").exists()
    assert (staged / "fgl_flower" / "client_app.py").is_file()
    assert sorted(p.name for p in staged.iterdir()) == [STAGED, "fgl_flower", "pyproject.toml"]
    assert (staged / "fgl_flower" / "run_config.toml").is_file()
    files = [p for p in (staged / "fgl_flower").rglob("*") if p.is_file()]
    assert files and all(p.suffix in (".py", ".toml") for p in files)

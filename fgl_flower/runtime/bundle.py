"""The folder that ``flwr run`` bundles: only the files of the app bundle (FAB).

``flwr run <folder>`` builds the FAB by walking every file under ``<folder>`` (``os.walk``:
the virtual environment, run folders and caches included) and only then filters them by
``.gitignore`` and ``[tool.flwr.app] fab-include``. In a project folder with a ``.venv``
that walk visits tens of thousands of files and took 2.7-14 s of every run on this
project's machine. :func:`staged_app` copies ``pyproject.toml``, ``.gitignore`` and the
files that ``fab-include`` names into a fresh folder, walking only the folders the
patterns start with, so Flower's walk sees those files alone and builds the same FAB.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: Files of the app folder that Flower reads besides the ``fab-include`` matches.
APP_FILES = ("pyproject.toml", ".gitignore")


def literal_root(pattern: str) -> str:
    """The folder a ``fab-include`` pattern starts with, before any wildcard: ``""`` when
    the pattern can match anywhere (``*.py``, ``**/x``), so the whole tree must be walked.

    >>> literal_root("fgl_flower/**/*.py"), literal_root("**/*.py"), literal_root("/a/b.py")
    ('fgl_flower', '', 'a')
    """
    parts = pattern.strip().lstrip("/").split("/")
    root = []
    for part in parts[:-1]:  # the last part names files
        if any(c in part for c in "*?[!\\"):
            break
        root.append(part)
    if not root and len(parts) == 1:
        return ""  # a bare file pattern matches at any depth
    return "/".join(root)


def staged_app(app_dir: Path, dest: Path) -> Path:
    """``dest`` filled with the files of ``app_dir``'s FAB (copies, not links: Flower skips
    links), or ``app_dir`` itself where a ``fab-include`` pattern may match anywhere or
    none is set (then every file is a candidate and Flower's walk is needed), or where it
    holds its bundle's files only already (marked :data:`~fgl_flower.paths.STAGED`)."""
    import pathspec

    from fgl_flower.app_defaults import read_toml
    from fgl_flower.paths import STAGED

    if (app_dir / STAGED).exists():  # fgl_flower.paths.app_dir's: the bundle's files only
        return app_dir

    app = read_toml(app_dir / "pyproject.toml").get("tool", {}).get("flwr", {}).get("app", {})
    patterns = [str(p) for p in app.get("fab-include", [])]
    roots = {literal_root(p) for p in patterns}
    if not patterns or "" in roots:
        return app_dir
    spec = pathspec.PathSpec.from_lines("gitwildmatch", patterns)
    dest.mkdir(parents=True, exist_ok=True)
    for name in APP_FILES:
        if (app_dir / name).is_file():
            shutil.copy2(app_dir / name, dest / name)
    for root in sorted(roots):
        for dirpath, _, filenames in os.walk(app_dir / root, followlinks=False):
            for filename in filenames:
                path = Path(dirpath) / filename
                rel = path.relative_to(app_dir).as_posix()
                if path.is_symlink() or not spec.match_file(rel):
                    continue
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest / rel)
    return dest

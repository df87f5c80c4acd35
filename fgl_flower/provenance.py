"""Which code made a run: the package version and, in a git checkout of this project, its
commit (``.dirty`` when tracked files of the package differ from it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fgl_flower import __version__


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_version() -> str:
    """``0.1.0+<commit>[.dirty]`` in a git checkout whose top level holds this package, else
    the package version (an installed copy, a Flower app bundle)."""
    package = Path(__file__).resolve().parent
    root = package.parent
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root:
        return __version__
    commit = _git(root, "rev-parse", "--short=12", "HEAD")
    if commit is None:
        return __version__
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no", "--", package.name)
    return f"{__version__}+{commit}{'.dirty' if dirty else ''}"

"""Locations: the Flower app directory and writable per-user folders."""

from __future__ import annotations

import os
from pathlib import Path

from fgl_flower.errors import FGLError


def app_dir() -> Path:
    """The Flower app directory: the folder holding this package and its ``pyproject.toml``.

    ``flwr run`` needs it. It exists in a source checkout, an editable install, and inside
    the unpacked Flower app bundle that a SuperLink runs.
    """
    root = Path(__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file():
        raise FGLError(
            f"No pyproject.toml next to the fgl_flower package (looked in {root}). `fgl run` "
            "needs the app's source folder: clone the repository and `pip install -e .`."
        )
    return root


def user_cache_dir() -> Path:
    """Per-user writable cache: ``$FGL_CACHE_DIR`` or ``$XDG_CACHE_HOME/fgl-flower``."""
    env = os.environ.get("FGL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "fgl-flower"

"""Location of the Flower app directory (the writable cache is ``datasets.cache_dir``)."""

from __future__ import annotations

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


"""The Flower app folder that ``fgl run`` hands to ``flwr run`` (the writable cache is
``datasets.cache_dir``)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def app_dir() -> Path:
    """A Flower app folder for the package as it is installed: a fresh temporary folder
    (removed when this process exits) holding the generated ``pyproject.toml``
    (:func:`~fgl_flower.app_defaults.app_pyproject_text`: every registered method's options,
    those of installed third-party methods included) and a copy of the package.

    The same for a source checkout, an editable install and a wheel: nothing outside the
    package is read, so ``fgl run`` works from any folder.
    """
    from fgl_flower.app_defaults import app_pyproject_text

    package = Path(__file__).resolve().parent
    dest = Path(tempfile.mkdtemp(prefix="fgl-app-"))
    atexit.register(shutil.rmtree, dest, True)
    (dest / "pyproject.toml").write_text(app_pyproject_text(), encoding="utf-8")
    shutil.copytree(package, dest / package.name, ignore=_not_in_the_bundle(package))
    (dest / STAGED).touch()  # holds the bundle's files only: flwr run may read it as it is
    return dest


#: Marks an app folder that holds the files of its app bundle and nothing else (what
#: :func:`app_dir` writes), so that :func:`fgl_flower.runtime.bundle.staged_app` need not
#: copy them again.
STAGED = ".fgl-staged"


def _not_in_the_bundle(package: Path) -> Callable[[str, list[str]], set[str]]:
    """A ``copytree`` filter of ``package``: the names under a folder that the app bundle
    leaves out (files no pattern of :data:`~fgl_flower.app_defaults.FAB_INCLUDE` matches;
    caches): templates, data files."""
    import pathspec

    from fgl_flower.app_defaults import FAB_INCLUDE

    spec = pathspec.PathSpec.from_lines("gitwildmatch", FAB_INCLUDE)

    def ignored(folder: str, names: list[str]) -> set[str]:
        here = Path(folder)
        return {
            name
            for name in names
            if name == "__pycache__"
            or (
                not (here / name).is_dir()
                and not spec.match_file(f"{package.name}/{(here / name).relative_to(package)}")
            )
        }

    return ignored

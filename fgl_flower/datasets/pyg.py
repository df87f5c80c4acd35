"""Loading a PyG dataset class from a (possibly read-only) data root, offline-aware.

PyG downloads whenever a raw file is missing. We subclass the dataset class so that
its :meth:`download` first honours ``FGL_OFFLINE`` and turns any failure into
:class:`_Unavailable`; :func:`fgl_flower.datasets.source.load_dataset` converts
that into one clear :class:`~fgl_flower.errors.DataUnavailableError`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fgl_flower.datasets.root import file_lock, is_offline, mirror_path, shadow_dir

if TYPE_CHECKING:
    from torch_geometric.data import Dataset


class _Unavailable(Exception):
    """Raw files are missing and could not be downloaded (reason in ``args[0]``)."""


@functools.cache
def _guarded(cls: type[Dataset]) -> type[Dataset]:
    """``cls`` with a download that fails fast offline and cleans up partial files, and
    without PyG's "Processing... Done!" lines (a user cannot act on them)."""

    def download(self: Dataset) -> None:
        if is_offline():
            raise _Unavailable("downloads are disabled (FGL_OFFLINE is set)")
        raw = Path(self.raw_dir)
        before = set(os.listdir(raw)) if raw.is_dir() else set()
        try:
            cls.download(self)
        except Exception as exc:  # network errors come in many types
            for name in set(os.listdir(raw)) - before if raw.is_dir() else ():
                path = raw / name
                if path.is_file() and not path.is_symlink():
                    path.unlink(missing_ok=True)
            raise _Unavailable(f"download failed: {type(exc).__name__}: {exc}") from exc

    quiet = property(lambda self: False, lambda self, value: None)  # Dataset.__init__ sets it
    return type(
        cls.__name__, (cls,), {"download": download, "log": quiet, "__module__": cls.__module__}
    )


@dataclass(frozen=True)
class PyGSource:
    """How to build one PyG dataset below a data root.

    Args:
        cls: Name of the PyG dataset class in ``torch_geometric.datasets`` (imported
            when the dataset is loaded, so the catalog itself imports no PyG).
        folder: Sub-folder of the data root passed to ``cls`` as ``root``.
        raw_subdir: Folder of the raw files, relative to ``folder`` (for status checks).
        kwargs: Extra constructor arguments (e.g. ``name``).
        pre_transform: Factory of the ``pre_transform`` (kept lazy and picklable).
    """

    cls: str
    folder: str
    raw_subdir: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    pre_transform: Callable[[], Callable[[Any], Any]] | None = None

    def raw_folder(self, root: Path) -> Path:
        return root / self.folder / self.raw_subdir

    def present(self, root: Path) -> bool:
        """Whether raw files exist under ``root`` or were downloaded into the cache."""
        mirrored = mirror_path(root, self.folder) / self.raw_subdir
        return any(_has_files(p) for p in (self.raw_folder(root), mirrored))

    def load(self, root: Path) -> Dataset:
        """Instantiate the dataset from a cache mirror of ``root/folder`` (may raise ``_Unavailable``)."""
        top = Path(self.raw_subdir).parts[0]
        mirror = shadow_dir(root, self.folder, "" if top == "raw" else top)
        import torch_geometric.datasets

        pre = self.pre_transform() if self.pre_transform is not None else None
        cls = getattr(torch_geometric.datasets, self.cls)
        with file_lock(mirror / ".lock"):  # one process runs PyG's processing at a time
            return _guarded(cls)(str(mirror), pre_transform=pre, **self.kwargs)


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(p.exists() for p in folder.iterdir())

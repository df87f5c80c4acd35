"""Where raw data lives and where derived files (processed data, partitions) go.

The data root may be read-only (a shared folder). PyG writes ``processed/`` next to
``raw/``, so every dataset is loaded from a *shadow tree* in the writable cache: the
same folders as under the data root, with each raw file symlinked to the original.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

try:  # POSIX advisory locks; a no-op elsewhere.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

#: Environment variables read (at call time, never at import time).
ENV_DATA_ROOT = "FGL_DATA_ROOT"
ENV_CACHE_DIR = "FGL_CACHE_DIR"
ENV_OFFLINE = "FGL_OFFLINE"


def _user_cache() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "fgl-flower"


def resolve_data_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding raw datasets.

    Order: ``explicit`` (run-config ``data-root``), env ``FGL_DATA_ROOT``, then
    ``$XDG_CACHE_HOME/fgl-flower/data`` (default ``~/.cache/fgl-flower/data``).
    """
    value = explicit or os.environ.get(ENV_DATA_ROOT)
    return Path(value).expanduser().resolve() if value else _user_cache() / "data"


def cache_dir() -> Path:
    """The writable cache folder (env ``FGL_CACHE_DIR``, else the per-user cache); created."""
    value = os.environ.get(ENV_CACHE_DIR)
    path = Path(value).expanduser().resolve() if value else _user_cache()
    path.mkdir(parents=True, exist_ok=True)
    return path


def is_offline() -> bool:
    """Whether downloads are disabled (env ``FGL_OFFLINE`` set to ``1``/``true``/``yes``)."""
    return os.environ.get(ENV_OFFLINE, "").strip().lower() in {"1", "true", "yes"}


def mirror_path(root: Path, folder: str) -> Path:
    """Where :func:`shadow_dir` mirrors ``root/folder`` (nothing is created)."""
    tag = hashlib.sha1(str(root).encode()).hexdigest()[:12]
    return cache_dir() / "datasets" / tag / folder


def shadow_dir(root: Path, folder: str, subdir: str = "") -> Path:
    """Mirror ``root/folder/subdir`` into the cache and return the mirror of ``root/folder``.

    Directories are created for real (so PyG can write ``processed/`` and download into
    them); files are symlinked (copied where symlinks are unsupported). ``processed*``
    folders of the source are skipped so processing always happens in the cache.
    Safe to call concurrently and repeatedly.
    """
    dst_base = mirror_path(root, folder)
    dst_base.mkdir(parents=True, exist_ok=True)
    src_base = root / folder
    if not (src_base / subdir).is_dir():
        return dst_base
    for dirpath, dirnames, filenames in os.walk(src_base / subdir, followlinks=True):
        dirnames[:] = [d for d in dirnames if not d.startswith("processed")]
        rel = Path(dirpath).relative_to(src_base)
        (dst_base / rel).mkdir(parents=True, exist_ok=True)
        for fname in filenames:
            src, dst = Path(dirpath) / fname, dst_base / rel / fname
            if dst.is_symlink() and not dst.exists():  # dangling: source moved
                dst.unlink(missing_ok=True)
            if dst.exists() or dst.is_symlink():
                continue
            try:
                dst.symlink_to(src)
            except FileExistsError:
                pass
            except OSError:  # pragma: no cover - filesystems without symlinks
                shutil.copy2(src, dst)
    return dst_base


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive inter-process lock on ``path`` (created); a no-op without ``fcntl``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        if fcntl is not None:
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh, fcntl.LOCK_UN)

"""Open Graph Benchmark datasets, read with the ``ogb`` package's PyG classes.

Node datasets (one class per node: ``ogbn-arxiv``, ``ogbn-products``) become one ``Data``;
single-target molecule datasets (``ogbg-mol*``: binary classification or regression) a
:class:`~fgl_flower.datasets.graphset.GraphSet`. Both keep OGB's split as ``official_split``.

Files: ``<root>/<folder>/`` as OGB's zip extracts, ``folder`` the name with ``_`` for ``-``
(``ogbn_arxiv``): ``raw/*.csv.gz``, ``split/<type>/{train,valid,test}.csv.gz`` and
``RELEASE_v<version>.txt``. ogb processes (and downloads) next to ``raw/``, so it runs on the
cache's shadow mirror of that folder (:func:`~fgl_flower.datasets.root.shadow_dir`).

ogb 1.3.6 wants guarding: importing it starts a thread asking PyPI for a newer ogb (package
``outdated``; ``OUTDATED_IGNORE`` only mutes the warning), so the import is made with
``outdated`` hidden; its constructors call ``input()`` when the dataset folder exists without
its ``RELEASE_v*.txt``, its download when the zip is over 1 GB (and ``exit()`` on no), so
:meth:`OGBEntry.load` checks the marker first, downloads by itself, and any prompt left
raises; its ``torch.load`` of the processed file needs PyG's classes allowed (torch >= 2.6).

This module imports neither torch nor ogb until a dataset is loaded.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import os
import shutil
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fgl_flower.datasets.options import NODE_OPTIONS, Option, Scalar
from fgl_flower.datasets.pyg import _Unavailable
from fgl_flower.datasets.root import cache_dir, file_lock, is_offline, mirror_path, shadow_dir
from fgl_flower.errors import ConfigError, CorruptDataError, DataUnavailableError, FGLError

if TYPE_CHECKING:
    from torch_geometric.data import Data, InMemoryDataset

    from fgl_flower.datasets.graphset import GraphSet

_CLASSES = {
    "node": ("ogb.nodeproppred.dataset_pyg", "PygNodePropPredDataset"),
    "graph": ("ogb.graphproppred.dataset_pyg", "PygGraphPropPredDataset"),
}
_PROMPTING = ("ogb.nodeproppred.dataset_pyg", "ogb.graphproppred.dataset_pyg", "ogb.utils.url")
_SPLIT_CODES = {"train": 0, "valid": 1, "test": 2}


class _Prompt(Exception):
    """ogb asked a question on stdin (never answered: runs are not interactive)."""


@dataclass(frozen=True)
class OGBEntry:
    """One OGB dataset under a data root (``<root>/<folder>``, see the module docstring).

    Attributes:
        name: OGB's name, e.g. ``"ogbn-arxiv"``.
        task: ``"node"`` or ``"graph"``.
        regression: Whether the target is a real number (graph datasets only).
        options: Node datasets: ``undirected``.
    """

    name: str
    task: Literal["node", "graph"]
    regression: bool = False
    options: Mapping[str, Option] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        """The dataset's folder below the data root, e.g. ``ogbn_arxiv``."""
        return self.name.replace("-", "_")

    def real_targets(self, options: Mapping[str, Scalar]) -> bool:
        """Whether its targets are real numbers (the regression molecule sets)."""
        return self.regression

    def status(self, root: Path) -> tuple[bool, Path]:
        """``(present, root/folder)``: whether raw files are there or were downloaded."""
        places = (root / self.folder, mirror_path(root, self.folder))
        return any(_has_files(p / "raw") for p in places), root / self.folder

    def load(self, root: Path, options: Mapping[str, Scalar]) -> Data | GraphSet:
        """The dataset, processed in the cache (downloaded there where raw files are missing).

        Returns:
            Node task: ``Data`` with ``x`` float32 [N, F], ``edge_index`` long [2, E] as OGB
            stores it (reversed edges added with ``undirected``), ``y`` long [N],
            ``num_classes`` and ``official_split`` long [N] (0 train, 1 valid, 2 test, -1
            none). Graph task: :class:`GraphSet` of graphs with ``x`` float32 [n, 9] (OGB's
            integer atom features as they are), ``edge_index`` long [2, E] (both directions),
            ``edge_attr`` float32 [E, 3] (bond features) and ``y`` [1] (long class id, or
            float32 target), ``num_classes`` (1 for regression) and ``official_split`` int64
            [len] (OGB's scaffold split).

        Raises:
            DataUnavailableError: No raw files, and offline or the download failed.
            CorruptDataError: The files cannot be read, or lack OGB's release marker.
        """
        try:
            _import_ogb()
        except ImportError as exc:
            raise ConfigError(
                f"Dataset {self.name!r} is read by the ogb package, which is missing ({exc}): "
                "pip install 'ogb>=1.3.6'"
            ) from None
        try:
            with warnings.catch_warnings():  # ogb's tensors from read-only pandas arrays
                warnings.filterwarnings("ignore", "The given NumPy array is not writable")
                dataset = self._open(root)
                if self.task == "node":
                    return _node_data(dataset, bool(options.get("undirected")))
                return _graph_set(dataset, self.regression)
        except _Unavailable as exc:
            meta = _meta(self)
            raise DataUnavailableError(
                f"Dataset {self.name!r} is not available: no raw files in "
                f"{root / self.folder / 'raw'} ({exc.args[0]}). Set run-config `data-root` or "
                f"env FGL_DATA_ROOT to a folder holding '{self.folder}/raw' (OGB's "
                f"{meta['download_name']}.zip extracted and renamed {self.folder}, with its "
                f"split/ and RELEASE_v{meta['version']}.txt), or connect to the network so OGB "
                f"downloads it ({meta['url']})."
            ) from None
        except _Prompt as exc:
            raise CorruptDataError(f"Dataset {self.name!r}: {exc}") from None
        except FGLError:
            raise
        except Exception as exc:  # pandas, numpy and torch fail in many ways on damaged files
            raise CorruptDataError(
                f"Dataset {self.name!r}: reading its files failed ({type(exc).__name__}: {exc}). "
                f"The files in {root / self.folder} are likely corrupt or incomplete: restore "
                f"them, or delete them to let OGB download them again; processed copies live "
                f"under {cache_dir()} (delete them too)."
            ) from exc

    def _open(self, root: Path) -> InMemoryDataset:
        """ogb's dataset on the cache mirror of ``root/folder`` (may raise ``_Unavailable``)."""
        meta = _meta(self)
        mirror = mirror_path(root, self.folder)
        release = f"RELEASE_v{meta['version']}.txt"
        with file_lock(mirror.parent / f".{self.folder}.lock"):  # ogb may remove the mirror
            shadow_dir(root, self.folder)
            if not (mirror / release).is_file():  # ogb would ask whether to update
                if _has_files(mirror / "raw"):
                    raise CorruptDataError(
                        f"Dataset {self.name!r}: {root / self.folder} holds raw files but not "
                        f"{release}, the marker of OGB's current release (without it ogb asks "
                        f"whether to download the dataset again). Add an empty {release} there "
                        f"if the files are that release; otherwise replace the folder with OGB's "
                        f"{meta['download_name']}.zip extracted, or delete it to download it."
                    )
                if is_offline():
                    raise _Unavailable("downloads are disabled (FGL_OFFLINE is set)")
                shutil.rmtree(mirror)  # our empty mirror: let ogb download into a new one
            cls = _ogb_class(self.task)
            with _safe_globals():
                return cls(name=self.name, root=str(mirror.parent))


#: name -> entry of every OGB dataset the catalog lists: one label per node (not the
#: multi-label ogbn-proteins), one target per graph (not the multi-task molpcba, moltox21...).
OGB_DATASETS: dict[str, OGBEntry] = {
    **{n: OGBEntry(n, "node", options=dict(NODE_OPTIONS)) for n in ("ogbn-arxiv", "ogbn-products")},
    **{n: OGBEntry(n, "graph") for n in ("ogbg-molhiv", "ogbg-molbace", "ogbg-molbbbp")},
    **{
        n: OGBEntry(n, "graph", regression=True)
        for n in ("ogbg-molesol", "ogbg-molfreesolv", "ogbg-mollipo")
    },
}


def is_regression(entry: object) -> bool:
    """Whether a catalog entry's target is a real number (an :class:`OGBEntry` with
    ``regression``; every other entry classifies)."""
    return bool(getattr(entry, "regression", False))


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(p.exists() for p in folder.iterdir())


def _import_ogb() -> None:
    """Import ogb without its version check: ``ogb.version`` asks PyPI in a thread (no
    timeout, retried) unless ``from outdated import check_outdated`` fails."""
    if "ogb" in sys.modules:
        return
    missing = object()
    saved = sys.modules.get("outdated", missing)
    sys.modules["outdated"] = None  # type: ignore[assignment]  # the import raises ImportError
    try:
        import ogb  # noqa: F401
    finally:
        if saved is missing:
            sys.modules.pop("outdated", None)
        else:
            sys.modules["outdated"] = saved  # type: ignore[assignment]


def _refuse(prompt: str = "") -> str:
    """Stands in for ``input`` in ogb's modules: a question is an error, never a wait."""
    raise _Prompt(
        f"ogb asked {prompt.strip()!r} on stdin; fgl-flower never answers prompts. "
        "Put the dataset's files (with their RELEASE_v*.txt) under the data root."
    )


@functools.cache
def _ogb_class(task: str) -> type[InMemoryDataset]:
    """ogb's PyG dataset class for ``task``, with our download and quiet processing."""
    _import_ogb()
    for module in _PROMPTING:
        importlib.import_module(module).input = _refuse  # their `input(...)` finds this first
    module, name = _CLASSES[task]
    cls = getattr(importlib.import_module(module), name)
    url_tools = importlib.import_module("ogb.utils.url")

    def download(self: Any) -> None:
        """ogb's download without its prompts: fail fast offline, clean up on failure."""
        if is_offline():
            raise _Unavailable("downloads are disabled (FGL_OFFLINE is set)")
        top, url = Path(self.original_root), self.meta_info["url"]
        zip_path, unpacked = top / url.rpartition("/")[2], top / self.meta_info["download_name"]
        try:
            url_tools.download_url(url, str(top))
            url_tools.extract_zip(str(zip_path), str(top))
            shutil.rmtree(self.root)
            shutil.move(str(unpacked), self.root)
        except Exception as exc:  # network errors come in many types
            raise _Unavailable(f"download failed: {type(exc).__name__}: {exc}") from exc
        finally:
            zip_path.unlink(missing_ok=True)
            shutil.rmtree(unpacked, ignore_errors=True)

    def process(self: Any) -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # ogb's "Loading necessary files..."
            cls.process(self)

    quiet = property(lambda self: False, lambda self, value: None)  # PyG's "Processing..."
    return type(
        name,
        (cls,),
        {"download": download, "process": process, "log": quiet, "__module__": __name__},
    )


@functools.cache
def _master(task: str) -> Mapping[str, Mapping[str, str]]:
    """ogb's table of dataset facts (``master.csv``): name -> field -> text."""
    import pandas as pd

    _import_ogb()
    module = importlib.import_module(_CLASSES[task][0].rpartition(".")[0])
    table = pd.read_csv(
        os.path.join(os.path.dirname(module.__file__), "master.csv"),
        index_col=0,
        keep_default_na=False,
    )
    return {name: {k: str(v) for k, v in table[name].items()} for name in table.columns}


def _meta(entry: OGBEntry) -> Mapping[str, str]:
    return _master(entry.task)[entry.name]


def _safe_globals() -> contextlib.AbstractContextManager[Any]:
    """Allow the PyG classes in ogb's processed file (its ``torch.load`` is weights-only
    from torch 2.6 on)."""
    import torch
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    allow = getattr(torch.serialization, "safe_globals", None)
    if allow is None:  # pragma: no cover - torch < 2.5 loads them anyway
        return contextlib.nullcontext()
    return allow([Data, DataEdgeAttr, DataTensorAttr, GlobalStorage])


def _official_split(dataset: Any, size: int):
    """``[size]`` long: 0/1/2 for OGB's train/valid/test indices, -1 elsewhere."""
    import torch

    split = torch.full((size,), -1, dtype=torch.long)
    for part, idx in dataset.get_idx_split().items():
        split[torch.as_tensor(idx, dtype=torch.long)] = _SPLIT_CODES[part]
    return split


def _labels(y: Any, size: int, regression: bool):
    """OGB's ``[size, 1]`` targets as ``[size]``: long class ids, or float32 targets."""
    import torch

    if y is None or y.numel() != size:
        raise ValueError(f"expected one target per item, got {None if y is None else y.shape}")
    y = y.reshape(-1)
    if regression:
        return y.to(torch.float32)
    if y.is_floating_point():  # ogb keeps labels float where some are missing (NaN)
        raise ValueError(f"{int(torch.isnan(y).sum())} of {size} labels are missing")
    return y.long()


def _node_data(dataset: Any, undirected: bool) -> Data:
    """The one graph of an OGB node dataset (see :meth:`OGBEntry.load`)."""
    import torch
    from torch_geometric.data import Data

    graph = dataset[0]
    n = int(graph.num_nodes)
    edge_index = graph.edge_index.long()
    if undirected:
        from torch_geometric.utils import to_undirected

        edge_index = to_undirected(edge_index, num_nodes=n)
    data = Data(
        x=graph.x.to(torch.float32),
        edge_index=edge_index,
        y=_labels(graph.y, n, regression=False),
        official_split=_official_split(dataset, n),
        num_nodes=n,
    )
    data.num_classes = int(dataset.num_classes)
    return data


def _graph_set(dataset: Any, regression: bool) -> GraphSet:
    """The graphs of an OGB graph dataset (see :meth:`OGBEntry.load`), cut from ogb's
    collated tensors (``dataset[i]`` one by one takes 4x as long: 8 s for molhiv)."""
    import torch
    from torch_geometric.data import Data

    from fgl_flower.datasets.graphset import GraphSet

    store, slices = dataset._data, dataset.slices
    count = len(dataset)

    def pieces(key: str, values: Any, dim: int = 0) -> list[Any]:
        return list(values.split(slices[key].diff().tolist(), dim=dim))

    xs = pieces("x", store.x.to(torch.float32))
    edges = pieces("edge_index", store.edge_index.long(), dim=1)
    bonds = pieces("edge_attr", store.edge_attr.to(torch.float32))
    ys = _labels(store.y, count, regression)
    graphs = [
        Data(x=x, edge_index=e, edge_attr=b, y=ys[i : i + 1], num_nodes=x.size(0))
        for i, (x, e, b) in enumerate(zip(xs, edges, bonds, strict=True))
    ]
    classes = 1 if regression else int(dataset.num_classes)
    return GraphSet(graphs, classes, _official_split(dataset, count).numpy())

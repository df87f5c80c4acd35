"""A dataset read from a file: ``.pt``, ``.npz`` or a CSV pair (docs/own-data.md).

=========  ==============================================================================
file       content
=========  ==============================================================================
``.pt``    ``torch.save`` of a PyG ``Data`` (a node task), a list of ``Data`` (a graph task)
           or a dict of tensors with the ``.npz`` keys; read with ``weights_only`` (PyG's
           data classes allowed, nothing else is unpickled)
``.npz``   ``x`` [N, F], ``edge_index`` [2, E], ``y`` [N]; optional ``train_mask``,
           ``val_mask``, ``test_mask`` [N] bool (``split-mode = official`` uses them)
``.csv``   the edges, one per row (columns ``data.source-column`` / ``target-column``), and
           ``data.nodes`` (default ``nodes.csv`` beside it): one row per node with its id
           (``data.id-column``), label (``data.label-column``) and features (``data.feature-
           columns``, comma-separated; default: every other column)
=========  ==============================================================================

Every source then passes :mod:`fgl_flower.datasets.checks` (bad data stops with one line;
the edge options ``undirected``, ``self-loops``, ``duplicates``).
"""

from __future__ import annotations

import csv
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from fgl_flower.datasets.checks import EDGE_OPTIONS, DataError, check_graph_set, check_node_graph
from fgl_flower.datasets.options import Option, Scalar
from fgl_flower.errors import CorruptDataError, DataUnavailableError

if TYPE_CHECKING:
    from torch_geometric.data import Data

    from fgl_flower.datasets.graphset import GraphSet

#: File suffixes read as datasets.
SUFFIXES = (".pt", ".npz", ".csv")

#: Options of a CSV pair (beside :data:`~fgl_flower.datasets.checks.EDGE_OPTIONS`).
CSV_OPTIONS: dict[str, Option] = {
    "nodes": Option(str, "", "the nodes file; '' = nodes.csv beside the edges file"),
    "source-column": Option(str, "source", "edges: the column of the first node"),
    "target-column": Option(str, "target", "edges: the column of the second node"),
    "id-column": Option(str, "id", "nodes: the node id the edges use"),
    "label-column": Option(str, "label", "nodes: the class id"),
    "feature-columns": Option(str, "", "nodes: feature columns, comma-separated; '' = the rest"),
}

_NPZ_KEYS = ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask")


def is_file_reference(name: str) -> bool:
    """Whether a dataset reference names a file (by its suffix) rather than a catalog entry."""
    return name.lower().endswith(SUFFIXES)


def dataset_label(name: str) -> str:
    """A short name for folders and titles: a file's stem, else the name itself."""
    return Path(name).stem if is_file_reference(name) else name


def source_stamp(name: str) -> tuple[int, ...] | None:
    """For a dataset file, its (and a CSV pair's default nodes file's) size and modification
    time: part of every in-process memo of a file dataset, so an edited file is read again;
    ``None`` for catalog names."""
    if not is_file_reference(name):
        return None
    path = Path(name).expanduser()
    files = [path, path.with_name("nodes.csv")] if path.suffix.lower() == ".csv" else [path]
    stats = [f.stat() for f in files if f.exists()]
    return tuple(v for st in stats for v in (st.st_size, st.st_mtime_ns))


@functools.lru_cache(maxsize=32)
def _digest(paths: tuple[str, ...], stamps: tuple[tuple[int, int], ...]) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def content_digest(*paths: Path) -> str:
    """sha256 of the files' bytes (16 hex digits; memoised by path, size and mtime)."""
    stats = tuple((p.stat().st_size, p.stat().st_mtime_ns) for p in paths)
    return _digest(tuple(str(p) for p in paths), stats)


def _safe_load(path: Path) -> Any:
    import torch
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    allowed = [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, weights_only=True)
    except Exception as exc:
        raise CorruptDataError(
            f"{path}: not readable as a saved Data, list of Data or dict of tensors "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]}). Save one of those "
            "with torch.save (see docs/own-data.md)."
        ) from None


def _from_arrays(name: str, arrays: Mapping[str, Any]) -> Data:
    import torch
    from torch_geometric.data import Data

    unknown = sorted(set(arrays) - set(_NPZ_KEYS))
    if unknown:
        raise DataError(
            f"{name}: unknown keys {unknown}; a node graph has {', '.join(_NPZ_KEYS)} "
            "(the masks optional)."
        )
    return Data(**{k: torch.as_tensor(np.asarray(v)) for k, v in arrays.items()})


def _read_pt(path: Path) -> Data | list[Data]:
    from torch_geometric.data import Data

    obj = _safe_load(path)
    if isinstance(obj, Data):
        return obj
    if isinstance(obj, (list, tuple)) and obj and all(isinstance(g, Data) for g in obj):
        return list(obj)
    if isinstance(obj, dict) and "graphs" in obj:  # a stored object (datasets/objects.py)
        return [Data.from_dict(g) for g in obj["graphs"]]
    if isinstance(obj, dict):
        return _from_arrays(str(path), obj)
    raise DataError(
        f"{path}: holds a {type(obj).__name__}; save a Data (node task), a non-empty list "
        "of Data (graph task) or a dict of tensors."
    )


def _read_npz(path: Path) -> Data:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as exc:
        raise CorruptDataError(
            f"{path}: not a readable .npz ({type(exc).__name__}: {exc})."
        ) from None
    return _from_arrays(str(path), arrays)


def _csv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    if not path.is_file():
        raise DataUnavailableError(
            f"{path}: no such file (the nodes of a CSV pair: set data.nodes=<file>)."
        )
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise DataError(f"{path}: empty file; the first row names the columns.")
    return [c.strip() for c in rows[0]], [r for r in rows[1:] if r]


def _column(path: Path, header: list[str], col: str, option: str) -> int:
    if col not in header:
        raise DataError(
            f"{path}: no column {col!r} (columns: {', '.join(header)}); set data.{option}."
        )
    return header.index(col)


def _floats(path: Path, rows: list[list[str]], cols: list[int], what: str) -> np.ndarray:
    try:
        return np.array([[float(r[c]) for c in cols] for r in rows], dtype=np.float64)
    except (ValueError, IndexError) as exc:
        raise DataError(f"{path}: {what} must be numbers in every row ({exc}).") from None


def _read_csv(path: Path, opts: Mapping[str, Scalar]) -> Data:
    """The CSV pair as a ``Data``: nodes in the nodes file's order, edges mapped by id."""
    import torch
    from torch_geometric.data import Data

    nodes = Path(str(opts["nodes"])).expanduser() if opts["nodes"] else path.with_name("nodes.csv")
    head, rows = _csv_rows(nodes)
    id_col = _column(nodes, head, str(opts["id-column"]), "id-column")
    label_col = _column(nodes, head, str(opts["label-column"]), "label-column")
    names = [c.strip() for c in str(opts["feature-columns"]).split(",") if c.strip()]
    feats = (
        [_column(nodes, head, c, "feature-columns") for c in names]
        if names
        else [i for i in range(len(head)) if i not in (id_col, label_col)]
    )
    ids = [r[id_col] for r in rows]
    index = {v: i for i, v in enumerate(ids)}
    if len(index) != len(ids):
        raise DataError(f"{nodes}: node ids repeat in column {head[id_col]!r}; one row per node.")
    labels = _floats(nodes, rows, [label_col], "labels").reshape(-1)
    x = _floats(nodes, rows, feats, "features") if feats else np.ones((len(ids), 1))
    ehead, erows = _csv_rows(path)
    s = _column(path, ehead, str(opts["source-column"]), "source-column")
    t = _column(path, ehead, str(opts["target-column"]), "target-column")
    try:
        edges = np.array([[index[r[s]], index[r[t]]] for r in erows], dtype=np.int64).T
    except KeyError as exc:
        raise DataError(
            f"{path}: edge endpoint {exc.args[0]!r} is not a node id of {nodes}."
        ) from None
    return Data(
        x=torch.from_numpy(x).float(),
        edge_index=torch.from_numpy(edges.reshape(2, -1)),
        y=torch.from_numpy(labels),
    )


@functools.lru_cache(maxsize=8)
def _read(path: str, kind: str, csv_opts: tuple[tuple[str, Scalar], ...], stamp: int):
    p = Path(path)
    if kind == ".pt":
        return _read_pt(p)
    if kind == ".npz":
        return _read_npz(p)
    return _read_csv(p, dict(csv_opts))


@dataclass(frozen=True)
class FileEntry:
    """A dataset file (the module's table); ``name`` is the reference as the run gives it."""

    name: str
    path: Path
    task: Literal["node", "graph"] = "node"
    options: Mapping[str, Option] = field(default_factory=dict)

    @classmethod
    def of(cls, name: str) -> FileEntry:
        """The entry of the file ``name`` (its task read from a ``.pt`` file's content)."""
        path = Path(name).expanduser().resolve()
        suffix = path.suffix.lower()
        options = dict(EDGE_OPTIONS, **(CSV_OPTIONS if suffix == ".csv" else {}))
        if not path.is_file():
            raise DataUnavailableError(
                f"Dataset file {name!r} does not exist ({path}); give the path of a .pt, "
                ".npz or .csv file (docs/own-data.md)."
            )
        task = "node"
        if suffix == ".pt":
            task = "graph" if isinstance(cls._raw(path, suffix, {}), list) else "node"
        return cls(name, path, task, options)

    @staticmethod
    def _raw(path: Path, suffix: str, opts: Mapping[str, Scalar]):
        """The file's content as read, before the checks (``opts``: the CSV options given,
        defaults for the others)."""
        csv_keys = tuple(
            sorted((k, opts.get(k, o.default)) for k, o in CSV_OPTIONS.items())
            if suffix == ".csv"
            else ()
        )
        return _read(str(path), suffix, csv_keys, path.stat().st_mtime_ns)

    def cache_key(self, options: Mapping[str, Scalar]) -> str:
        """A file-safe cache name that changes with the content: ``<stem>-<digest>`` (a CSV
        pair: of both files)."""
        files = [self.path]
        if self.path.suffix.lower() == ".csv":
            nodes = options.get("nodes")
            files.append(
                Path(str(nodes)).expanduser() if nodes else self.path.with_name("nodes.csv")
            )
        return f"{self.path.stem}-{content_digest(*[f for f in files if f.is_file()])}"

    def real_targets(self, options: Mapping[str, Scalar]) -> bool:
        """Graphs whose ``y`` is a float tensor (a regression set); node graphs never."""
        raw = self._raw(self.path, self.path.suffix.lower(), options)
        return isinstance(raw, list) and any(
            g.y is not None and g.y.is_floating_point() for g in raw
        )

    def status(self, root: Path) -> tuple[bool, Path]:
        return self.path.is_file(), self.path

    def load(self, root: Path, options: Mapping[str, Scalar]) -> Data | GraphSet:
        """The checked graph (node task) or graphs (graph task)."""
        from fgl_flower.datasets.graphset import GraphSet

        raw = self._raw(self.path, self.path.suffix.lower(), options)
        if isinstance(raw, list):
            return check_graph_set(self.name, GraphSet(raw, 0), options)
        return check_node_graph(self.name, raw, options)

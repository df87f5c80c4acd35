"""The dataset catalog: every dataset and dataset group, by name.

Each entry of :data:`DATASETS` knows its task (``"node"`` or ``"graph"``), the options it
accepts, and how to load itself below a data root. :data:`DATASET_GROUPS` holds the
cross-dataset settings whose client ``k`` owns member ``k``: FedDense's graph-classification
groups (``tu-*``) and FedHERO's node-classification ``syn-cora`` (ten H2GCN graphs of
homophily 0.0-0.9, :mod:`fgl_flower.datasets.syncora`). Lookups are case-insensitive and
suggest close names.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from fgl_flower.datasets.ogb import OGB_DATASETS
from fgl_flower.datasets.options import NODE_OPTIONS, Option, Scalar
from fgl_flower.datasets.pyg import PyGSource, _Unavailable
from fgl_flower.datasets.root import cache_dir
from fgl_flower.datasets.syncora import FOLDER as SYN_CORA_FOLDER
from fgl_flower.datasets.syncora import HOMOPHILY_LEVELS, REPLICAS, file_name, load_syn_cora
from fgl_flower.datasets.synthetic import SYNTHETIC_OPTIONS
from fgl_flower.datasets.synthetic_graphs import SYNTHETIC_GRAPH_OPTIONS
from fgl_flower.errors import CorruptDataError, DataUnavailableError, FGLError
from fgl_flower.registry import Registry, import_object

if TYPE_CHECKING:
    from torch_geometric.data import Data, Dataset

Task = Literal["node", "graph"]


class DatasetEntry(Protocol):
    """What the rest of the package needs from a catalog entry."""

    name: str
    task: Task
    options: Mapping[str, Option]

    def load(self, root: Path, options: Mapping[str, Scalar]) -> Data | Dataset: ...

    def status(self, root: Path) -> tuple[bool, Path]: ...


@dataclass(frozen=True)
class PyGEntry:
    """A dataset shipped by PyG: node tasks yield one ``Data``, graph tasks the dataset."""

    name: str
    task: Task
    source: PyGSource
    options: Mapping[str, Option] = field(default_factory=dict)

    def status(self, root: Path) -> tuple[bool, Path]:
        return self.source.present(root), self.source.raw_folder(root)

    def load(self, root: Path, options: Mapping[str, Scalar]) -> Data | Dataset:
        try:
            dataset = self.source.load(root)
        except _Unavailable as exc:
            raise DataUnavailableError(
                f"Dataset {self.name!r} is not available: no raw files in "
                f"{self.source.raw_folder(root)} ({exc.args[0]}). Set run-config `data-root` "
                f"or env FGL_DATA_ROOT to a folder holding '{self.source.folder}/"
                f"{self.source.raw_subdir}', or connect to the network so PyG can download it."
            ) from None
        except FGLError:
            raise
        except Exception as exc:  # PyG's readers fail in many ways on damaged files
            raise CorruptDataError(
                f"Dataset {self.name!r}: reading its files failed ({type(exc).__name__}: {exc}). "
                f"The raw files in {self.source.raw_folder(root)} are likely corrupt or "
                f"incomplete: restore them, or delete them to let PyG download them again; "
                f"processed copies live under {cache_dir()} (delete them too)."
            ) from exc
        if self.task == "graph":
            return dataset
        data = dataset[0]
        data.num_classes = int(dataset.num_classes)
        if options.get("undirected"):
            from torch_geometric.utils import to_undirected

            data.edge_index = to_undirected(data.edge_index, num_nodes=data.num_nodes)
        return data


@dataclass(frozen=True)
class SyntheticEntry:
    """A seeded generator (no files): ``synthetic``, the contextual SBM of
    :mod:`fgl_flower.datasets.synthetic` (nodes), and ``synthetic-graphs``, the community
    graphs of :mod:`fgl_flower.datasets.synthetic_graphs` (graph classification).
    ``generator`` (``"module:function"``) is called with the options, ``data-seed`` as
    ``seed``."""

    name: str = "synthetic"
    task: Task = "node"
    options: Mapping[str, Option] = field(default_factory=lambda: dict(SYNTHETIC_OPTIONS))
    generator: str = "fgl_flower.datasets.synthetic:contextual_sbm"

    def status(self, root: Path) -> tuple[bool, Path]:
        return True, root

    def real_targets(self, options: Mapping[str, Scalar]) -> bool:
        """``synthetic-graphs`` with ``target = regression``."""
        return options.get("target") == "regression"

    def load(self, root: Path, options: Mapping[str, Scalar]) -> Data | Dataset:
        kw = {k.replace("-", "_"): v for k, v in options.items()}
        kw["seed"] = kw.pop("data_seed")
        return import_object(self.generator)(**kw)


@dataclass(frozen=True)
class SynCoraEntry:
    """One H2GCN syn-cora graph, ``<root>/syn-cora/raw/<file>`` (no download: PyG has no class)."""

    name: str
    file: str
    task: Task = "node"
    options: Mapping[str, Option] = field(default_factory=lambda: dict(NODE_OPTIONS))

    def status(self, root: Path) -> tuple[bool, Path]:
        return (root / SYN_CORA_FOLDER / self.file).is_file(), root / SYN_CORA_FOLDER

    def load(self, root: Path, options: Mapping[str, Scalar]) -> Data:
        """The graph (already undirected, so ``undirected`` changes nothing)."""
        return load_syn_cora(self.name, root / SYN_CORA_FOLDER / self.file)


def _sparse_features():
    """PyG pre-transform storing ``x`` sparse (imports torch when a dataset is built)."""
    from fgl_flower.datasets.features import SparseFeatures

    return SparseFeatures()


@dataclass(frozen=True)
class DatasetGroup:
    """Several datasets federated together; client ``k`` owns ``members[k]`` (whole: a graph
    dataset's graphs, or a node dataset's graph)."""

    name: str
    members: tuple[str, ...]
    task: Task = "graph"


DATASETS: Registry[DatasetEntry] = Registry("dataset")
DATASET_GROUPS: Registry[DatasetGroup] = Registry("dataset group")


def _one_hot_degree(max_degree: int):
    """PyG's ``OneHotDegree(max_degree, cat=False)`` pre-transform (imported when used)."""
    from torch_geometric.transforms import OneHotDegree

    return OneHotDegree(max_degree, cat=False)


def _pyg(key: str, task: Task, cls: str, folder: str, raw: str, **kw: object) -> None:
    pre = kw.pop("pre_transform", None)
    source = PyGSource(cls, folder, raw, kwargs=kw, pre_transform=pre)  # type: ignore[arg-type]
    options = dict(NODE_OPTIONS) if task == "node" else {}
    DATASETS.register(key, PyGEntry(key, task, source, options))


def _populate() -> None:
    """Fill :data:`DATASETS` and :data:`DATASET_GROUPS` (called once, below)."""
    # --- node classification ------------------------------------------------------------
    for n in ("Cora", "CiteSeer", "PubMed"):
        _pyg(n, "node", "Planetoid", "Planetoid", f"{n}/raw", name=n)
    for n in ("Computers", "Photo"):
        _pyg(n, "node", "Amazon", "Amazon", f"{n}/raw", name=n)
    for n in ("CS", "Physics"):  # dense x would be 0.5 / 1.2 GB
        _pyg(n, "node", "Coauthor", "Coauthor", f"{n}/raw", name=n, pre_transform=_sparse_features)
    for n in ("chameleon", "squirrel"):
        _pyg(
            n,
            "node",
            "WikipediaNetwork",
            "WikipediaNetwork",
            f"{n}/geom_gcn/raw",
            name=n,
            geom_gcn_preprocess=True,
        )
    _pyg("Actor", "node", "Actor", "Actor", "raw")
    for n in ("Cornell", "Texas", "Wisconsin"):
        _pyg(n, "node", "WebKB", "WebKB", f"{n.lower()}/raw", name=n)
    for n in ("minesweeper", "tolokers", "roman-empire", "amazon-ratings", "questions"):
        _pyg(
            n,
            "node",
            "HeterophilousGraphDataset",
            "HeterophilousGraphDataset",
            f"{n.replace('-', '_')}/raw",
            name=n,
        )
    _pyg("WikiCS", "node", "WikiCS", "WikiCS", "raw", is_undirected=True)
    _pyg("Flickr", "node", "Flickr", "Flickr", "raw")
    for name, ogb_entry in OGB_DATASETS.items():  # node and graph tasks, OGB's own split
        DATASETS.register(name, ogb_entry)
    DATASETS.register("synthetic", SyntheticEntry())
    DATASETS.register(
        "synthetic-graphs",
        SyntheticEntry(
            "synthetic-graphs",
            "graph",
            dict(SYNTHETIC_GRAPH_OPTIONS),
            "fgl_flower.datasets.synthetic_graphs:synthetic_graphs",
        ),
    )
    for h in HOMOPHILY_LEVELS:
        for r in REPLICAS:
            DATASETS.register(
                f"syn-cora-h{h}-r{r}", SynCoraEntry(f"syn-cora-h{h}-r{r}", file_name(h, r))
            )

    # --- graph classification (features as FedDense §2.2) --------------------------------
    tu_plain = (
        "MUTAG",
        "BZR",
        "COX2",
        "DHFR",
        "PTC_MR",
        "AIDS",
        "NCI1",
        "PROTEINS",
        "DD",
        "ENZYMES",
    )
    for n in tu_plain:
        _pyg(n, "graph", "TUDataset", "TUDataset", f"{n}/raw", name=n)
    for n, dmax in (("IMDB-BINARY", 135), ("IMDB-MULTI", 88), ("COLLAB", 491)):
        _pyg(
            n,
            "graph",
            "TUDataset",
            "TUDataset",
            f"{n}/raw",
            name=n,
            pre_transform=functools.partial(_one_hot_degree, dmax),
        )
    for n in ("Letter-low", "Letter-med", "Letter-high"):
        _pyg(n, "graph", "TUDataset", "TUDataset", f"{n}/raw", name=n, use_node_attr=True)

    # --- FedDense cross-dataset settings (spec §1 table; order matters) -------------------
    molecules = ("MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1")
    bio = ("ENZYMES", "DD")
    social = ("COLLAB", "IMDB-BINARY", "IMDB-MULTI")
    vision = ("Letter-low", "Letter-high", "Letter-med")
    for g, members in (
        ("tu-single", molecules),
        ("tu-cross-sim", molecules + bio),
        ("tu-cross-diff", bio + social + vision),
        ("tu-multi", molecules + bio + social + vision),
    ):
        DATASET_GROUPS.register(g, DatasetGroup(g, members))
    # --- FedHERO: one H2GCN graph per client, homophily 0.0 ... 0.9, replica 1 (spec A16) -
    syn_cora = tuple(f"syn-cora-h{h}-r1" for h in HOMOPHILY_LEVELS[:10])
    DATASET_GROUPS.register("syn-cora", DatasetGroup("syn-cora", syn_cora, task="node"))


_populate()

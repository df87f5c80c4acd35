"""syn-cora: the synthetic graphs of H2GCN (Zhu et al., NeurIPS 2020), read from GemsLab npz files.

Each graph ``h{H}-r{R}`` (target edge homophily ``H`` in 0.00, 0.10, ..., 0.90, 0.99, 1.00;
replica ``R`` in 1..3) has 1,490 nodes in 5 classes of 298, 1,433 binary Cora bag-of-words
features and about 2,966 undirected edges. The files live at
``<data root>/syn-cora/raw/h{H}-r{R}.npz`` with the keys ``adj_data/adj_indices/adj_indptr/
adj_shape`` (CSR adjacency), ``attr_*`` (CSR features) and ``labels``. PyG has no class for
them, so nothing is downloaded. torch is imported when a graph is loaded.

All graphs are drawn from the same 1,490 Cora nodes (same features and labels, rewired and
reordered): every graph's feature rows are the rows of every other. :func:`source_ids` names
each node by its Cora node, so that splits fixed per node (``five-group``) put the same node in
the same group in every graph; split by position, a client's test node would be a training
node of other clients.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fgl_flower.errors import CorruptDataError, DataUnavailableError

if TYPE_CHECKING:
    from torch_geometric.data import Data

#: Target homophily levels and replicas of the H2GCN release.
HOMOPHILY_LEVELS = tuple(f"{h / 10:.2f}" for h in range(10)) + ("0.99", "1.00")
REPLICAS = (1, 2, 3)
FOLDER = "syn-cora/raw"


def file_name(homophily: str, replica: int) -> str:
    """``h0.50-r1.npz`` for homophily ``"0.50"`` and replica 1."""
    return f"h{homophily}-r{replica}.npz"


def _csr(z: np.lib.npyio.NpzFile, key: str):
    import scipy.sparse as sp

    shape = tuple(int(s) for s in z[f"{key}_shape"])
    return sp.csr_matrix((z[f"{key}_data"], z[f"{key}_indices"], z[f"{key}_indptr"]), shape=shape)


def _edge_index(adj) -> np.ndarray:
    """``[2, 2E]`` both directions of the undirected simple graph of ``adj`` (self-loops dropped)."""
    coo = adj.tocoo()
    u, v = (
        np.minimum(coo.row, coo.col).astype(np.int64),
        np.maximum(coo.row, coo.col).astype(np.int64),
    )
    n = adj.shape[0]
    keys = np.unique(u[u != v] * n + v[u != v])
    a, b = keys // n, keys % n
    both = np.concatenate([np.stack([a, b]), np.stack([b, a])], axis=1)
    return both[:, np.lexsort((both[1], both[0]))]


def source_ids(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``[N]`` id of each node's source node: its rank when the nodes are sorted by label, then
    by feature row (bytes), ties kept in graph order; equal in every graph for the same node."""
    order = sorted(range(len(y)), key=lambda i: (int(y[i]), x[i].tobytes()))
    ids = np.empty(len(y), dtype=np.int64)
    ids[order] = np.arange(len(y))
    return ids


def load_syn_cora(name: str, path: Path) -> Data:
    """The graph in ``path`` as a PyG ``Data``: ``x`` [1490, 1433] dense float32, ``edge_index``
    both directions without self-loops, ``y`` long, ``num_classes`` and ``source_id`` ``[1490]``
    (:func:`source_ids`).

    Raises:
        DataUnavailableError: the file is missing (nothing to download).
        CorruptDataError: the file cannot be read as a GemsLab npz graph.
    """
    if not path.is_file():
        raise DataUnavailableError(
            f"Dataset {name!r} is not available: no file {path}. Put H2GCN's syn-cora graphs "
            f"(GemsLab npz, e.g. JRowbottomGit/graff data/syn-cora/) as '{FOLDER}/{path.name}' "
            "under the data root (run-config `data-root` or env FGL_DATA_ROOT). PyG has no class "
            "for syn-cora, so it cannot be downloaded."
        )
    try:
        with np.load(path) as z:
            adj, x, y = _csr(z, "adj"), _csr(z, "attr"), np.asarray(z["labels"], dtype=np.int64)
    except Exception as exc:  # numpy/zip/scipy fail in many ways on damaged files
        raise CorruptDataError(
            f"Dataset {name!r}: reading {path} failed ({type(exc).__name__}: {exc}); "
            "restore the file."
        ) from exc
    if not (adj.shape[0] == adj.shape[1] == x.shape[0] == y.shape[0]):
        raise CorruptDataError(
            f"Dataset {name!r}: {path} holds {adj.shape} adjacency, {x.shape} "
            f"features and {y.shape[0]} labels; restore the file."
        )
    import torch
    from torch_geometric.data import Data

    dense = x.toarray().astype(np.float32)
    data = Data(
        x=torch.from_numpy(dense),
        edge_index=torch.from_numpy(_edge_index(adj)),
        y=torch.from_numpy(y),
        source_id=torch.from_numpy(source_ids(dense, y)),
    )
    data.num_classes = int(y.max()) + 1
    return data

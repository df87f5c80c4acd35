"""A node-task partition stored as a few arrays: one file per array, not one per client.

Client ``k`` of ``K`` owns rows ``node_ptr[k]:node_ptr[k+1]`` of the node arrays and columns
``edge_ptr[k]:edge_ptr[k+1]`` of ``edge_index``; every array is a ``.npy`` file opened
memory-mapped, so setting a partition up writes the same handful of files for 10 or
100,000 clients, and a client reads its own rows only.

===================  ======================  =============================================
file                 shape, dtype            content
===================  ======================  =============================================
``node_ptr``         [K+1] int64             offsets of each client's nodes
``global_id``        [N] int64               node ids in the whole graph, client by client
``y``                [N] int64               labels, same order
``x``                [N, F] float32          features (dense datasets), same order
``x_indptr``         [N+1] int64             sparse features as CSR rows (instead of ``x``)
``x_indices``        [nnz] int64             their columns
``x_values``         [nnz] float32           their values
``edge_ptr``         [K+1] int64             offsets of each client's edges
``edge_index``       [2, E] int64            induced edges in local ids, in the graph's order
``official_split``   [N] int64               the source's split (0/1/2/-1), where it has one
===================  ======================  =============================================

A client's part (:func:`load_node_part`) equals the induced subgraph that PyG's
``subgraph(ids, edge_index, relabel_nodes=True)`` gives for its node ids (local id = position
in the client's ids, edges in the graph's order), with features compacted as
:func:`~fgl_flower.datasets.features.compact_features` does; it is computed for all clients
in one pass over the edges when the clients' nodes are disjoint.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fgl_flower.datasets.cache import atomic_write
from fgl_flower.datasets.features import compact_features

if TYPE_CHECKING:
    from torch_geometric.data import Data

#: ``meta.json`` value of ``layout`` for this store.
LAYOUT = "node-arrays"


def _save(folder: Path, name: str, array: np.ndarray) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(array))

    atomic_write(folder / f"{name}.npy", write)


def induced_edges(
    edge_index: np.ndarray, num_nodes: int, parts: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """``(edge_ptr [K+1], edges [2, E])``: each part's induced edges in local ids, in the
    graph's edge order, parts one after the other. ``parts`` must be disjoint."""
    sizes = np.array([len(p) for p in parts], dtype=np.int64)
    order = np.concatenate(parts).astype(np.int64) if len(parts) else np.zeros(0, np.int64)
    owner = np.full(num_nodes, -1, dtype=np.int64)
    owner[order] = np.repeat(np.arange(len(parts), dtype=np.int64), sizes)
    local = np.zeros(num_nodes, dtype=np.int64)
    local[order] = np.arange(order.size, dtype=np.int64) - np.repeat(
        np.cumsum(sizes) - sizes, sizes
    )
    src, dst = edge_index
    ks = owner[src]
    kept = np.flatnonzero((ks >= 0) & (ks == owner[dst]))
    kept = kept[np.argsort(ks[kept], kind="stable")]
    edge_ptr = np.concatenate([[0], np.cumsum(np.bincount(ks[kept], minlength=len(parts)))])
    return edge_ptr.astype(np.int64), np.stack([local[src[kept]], local[dst[kept]]])


def _overlapping_edges(data: Data, parts: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`induced_edges` for parts that share nodes: one PyG ``subgraph`` per part."""
    from torch_geometric.utils import subgraph

    chunks = []
    for ids in parts:
        idx = torch.from_numpy(np.asarray(ids, dtype=np.int64))
        chunks.append(
            subgraph(idx, data.edge_index, relabel_nodes=True, num_nodes=data.num_nodes)[0].numpy()
        )
    ptr = np.concatenate([[0], np.cumsum([c.shape[1] for c in chunks])]).astype(np.int64)
    edges = np.concatenate(chunks, axis=1) if chunks else np.zeros((2, 0), np.int64)
    return ptr, edges


def write_node_parts(folder: Path, data: Data, parts: Sequence[np.ndarray]) -> dict[str, Any]:
    """Store the induced subgraphs of ``parts`` (node ids of ``data``) in ``folder``;
    returns what ``meta.json`` records about them."""
    parts = [np.asarray(p, dtype=np.int64) for p in parts]
    order = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    n = int(data.num_nodes)
    if np.unique(order).size == order.size:
        edge_ptr, edges = induced_edges(data.edge_index.numpy(), n, parts)
    else:
        edge_ptr, edges = _overlapping_edges(data, parts)
    _save(
        folder,
        "node_ptr",
        np.concatenate([[0], np.cumsum([p.size for p in parts])]).astype(np.int64),
    )
    _save(folder, "global_id", order)
    _save(folder, "y", data.y.numpy()[order].astype(np.int64))
    x = data.x.float()
    if x.is_sparse:
        import scipy.sparse as sp

        x = x.coalesce()
        rows, cols = x.indices().numpy()
        csr = sp.csr_matrix((x.values().numpy(), (rows, cols)), shape=tuple(x.shape))[order]
        csr.sort_indices()
        _save(folder, "x_indptr", csr.indptr.astype(np.int64))
        _save(folder, "x_indices", csr.indices.astype(np.int64))
        _save(folder, "x_values", csr.data.astype(np.float32))
    else:
        _save(folder, "x", x.numpy()[order])
    split = getattr(data, "official_split", None)
    if split is not None:  # the source's own split, kept per node
        _save(folder, "official_split", np.asarray(split)[order].astype(np.int64))
    _save(folder, "edge_ptr", edge_ptr)
    _save(folder, "edge_index", edges.astype(np.int64))
    return {
        "layout": LAYOUT,
        "num_classes": int(data.num_classes),
        "num_nodes_total": n,
        "num_features": int(x.shape[1]),
        "sparse_x": bool(x.is_sparse),
        "num_parts": len(parts),
    }


@functools.lru_cache(maxsize=16)
def _store(folder: str, stamp: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The meta data and memory-mapped arrays of ``folder`` (``stamp``: its ``meta.json``'s
    mtime, so a partition written again is opened again)."""
    meta = json.loads((Path(folder) / "meta.json").read_text())
    arrays = {p.stem: np.load(p, mmap_mode="r") for p in Path(folder).glob("*.npy")}
    return meta, arrays


def load_node_part(folder: Path, k: int) -> dict[str, Any]:
    """Client ``k``'s part: ``x``, ``edge_index``, ``y``, ``global_id``, ``num_classes``,
    ``num_nodes_total`` (what the whole-graph ``subgraph`` gave) and, where the source has
    one, ``official_split``."""
    meta, a = _store(str(folder), (Path(folder) / "meta.json").stat().st_mtime_ns)
    lo, hi = int(a["node_ptr"][k]), int(a["node_ptr"][k + 1])
    e0, e1 = int(a["edge_ptr"][k]), int(a["edge_ptr"][k + 1])
    if meta["sparse_x"]:
        p0, p1 = int(a["x_indptr"][lo]), int(a["x_indptr"][hi])
        counts = np.diff(np.asarray(a["x_indptr"][lo : hi + 1]))
        rows = np.repeat(np.arange(hi - lo, dtype=np.int64), counts)
        index = torch.from_numpy(np.stack([rows, np.asarray(a["x_indices"][p0:p1])]))
        x = torch.sparse_coo_tensor(
            index,
            torch.from_numpy(np.array(a["x_values"][p0:p1])),
            (hi - lo, meta["num_features"]),
            check_invariants=False,
        ).coalesce()
    else:
        x = torch.from_numpy(np.array(a["x"][lo:hi]))
    part = {
        "x": compact_features(x),
        "edge_index": torch.from_numpy(np.array(a["edge_index"][:, e0:e1])),
        "y": torch.from_numpy(np.array(a["y"][lo:hi])),
        "global_id": torch.from_numpy(np.array(a["global_id"][lo:hi])),
        "num_classes": int(meta["num_classes"]),
        "num_nodes_total": int(meta["num_nodes_total"]),
    }
    if "official_split" in a:
        part["official_split"] = np.array(a["official_split"][lo:hi])
    return part

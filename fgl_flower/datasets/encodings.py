"""Node-level inputs that a graph model reads besides ``x`` (computed once, cached on disk).

A graph-classification model lists them in its ``graph_inputs`` (e.g. FedStar's and
FedDense's ``("stc_enc",)``); :func:`attach_graph_inputs` adds each to every graph of a
client, from :data:`GRAPH_INPUTS`. The structural encoding of DD's large graphs takes
minutes, so values are cached under ``<cache_dir()>/encodings/``, keyed by a digest of the
graphs' structure: any process (simulation actor, SuperNode) computes them at most once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from fgl_flower.datasets.cache import atomic_write
from fgl_flower.datasets.root import cache_dir, file_lock
from fgl_flower.registry import Registry

if TYPE_CHECKING:
    from torch_geometric.data import Data

    from fgl_flower.datasets.client_data import GraphClientData

#: ``name -> f(edge_index, num_nodes) -> [num_nodes, d]``: a per-node input of graph models.
GRAPH_INPUTS: Registry[Callable[[Tensor, int], Tensor]] = Registry("graph input")


@GRAPH_INPUTS.register("stc_enc")
def _structure(edge_index: Tensor, num_nodes: int) -> Tensor:
    """FedStar/FedDense's ``[RWSE (16) || DSE (16)]`` (spec §2.3)."""
    from fgl_flower.models.structure import structure_encoding

    return structure_encoding(edge_index, num_nodes)


#: Part of every cache key: raise it when a :data:`GRAPH_INPUTS` function's output changes, so
#: that no process reads values an earlier version of the code computed.
ENCODING_VERSION = 1


def _digest(name: str, graphs: Sequence[Data]) -> str:
    h = hashlib.sha256(f"{name}:v{ENCODING_VERSION}:{len(graphs)}".encode())
    for g in graphs:
        h.update(int(g.num_nodes).to_bytes(8, "little"))
        h.update(g.edge_index.numpy().tobytes())
    return h.hexdigest()[:24]


def encode_graphs(name: str, graphs: Sequence[Data]) -> list[Tensor]:
    """``GRAPH_INPUTS[name]`` of every graph (``[n_i, d]`` each), from the disk cache if
    this exact set of graphs was encoded before."""
    fn = GRAPH_INPUTS.get(name)
    path = cache_dir() / "encodings" / f"{name}-{_digest(name, graphs)}.pt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(path.with_suffix(".lock")):
            if not path.exists():
                values = [fn(g.edge_index, int(g.num_nodes)) for g in graphs]
                atomic_write(
                    path,
                    lambda tmp: torch.save(
                        {"values": torch.cat(values), "sizes": [v.size(0) for v in values]}, tmp
                    ),
                )
    stored = torch.load(path, weights_only=True)
    return list(torch.split(stored["values"], stored["sizes"]))


def attach_graph_inputs(data: GraphClientData, names: Sequence[str]) -> None:
    """Set ``g.<name>`` on every graph of ``data`` that lacks it (in place: the graphs are
    the process's memoised copies, so later messages find them done)."""
    graphs = [*data.train, *data.val, *data.test]
    for name in names:
        missing = [g for g in graphs if name not in g]
        if missing:
            for g, value in zip(missing, encode_graphs(name, missing)):
                g[name] = value

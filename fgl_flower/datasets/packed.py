"""A client's graphs packed once on its device and cut into mini-batches by index.

PyG's :class:`~torch_geometric.loader.DataLoader` collates every mini-batch from Python
``Data`` objects, every epoch, on the CPU. With the model on a GPU the CPU is what runs short
(21 runs of FedDense's Table 2 sharing an H200 kept its 16 cores at a load of 25), and on the
CPU alone the collate is a tenth of a FedAvg round on TU datasets. :class:`PackedGraphs`
concatenates a split's graphs once, keeps them on the learner's device, and builds each
mini-batch there with a few index kernels.

A batch holds exactly what PyG's collate of the same graphs in the same order holds for
the model (``x``, ``edge_index``, ``batch``, ``y`` and the per-node inputs), and
:func:`batch_order` draws the order as the ``DataLoader`` does, with the same calls on
torch's global generator, so a run's numbers do not depend on which of the two fed it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["GraphBatch", "PackedGraphs", "batch_order"]


@dataclass(frozen=True)
class GraphBatch:
    """A mini-batch of ``B`` graphs with ``N`` nodes and ``E`` edges in all.

    ``x`` [N, F]; ``edge_index`` [2, E] (node ids of the batch); ``batch`` [N] (the graph
    of each node, ``0 .. B-1``); ``y`` [B]; ``inputs``: per-node tensors [N, ...] by name,
    also read as ``batch[name]`` (as from a PyG ``Batch``).
    """

    x: Tensor
    edge_index: Tensor
    batch: Tensor
    y: Tensor
    inputs: dict[str, Tensor]

    @property
    def num_graphs(self) -> int:
        return int(self.y.size(0))

    def __getitem__(self, name: str) -> Tensor:
        return self.inputs[name]


def batch_order(num_graphs: int, batch_size: int, shuffle: bool) -> tuple[Tensor, ...]:
    """The graph indices of each mini-batch of one pass, as
    ``DataLoader(graphs, batch_size, shuffle)`` draws them: one draw on the global
    generator for the loader iterator's base seed, then (shuffling) one for the sampler's
    seed, whose generator gives the permutation."""
    torch.empty(
        (), dtype=torch.int64
    ).random_()  # the iterator's base seed: keeps the stream aligned
    if shuffle and num_graphs:
        seed = int(torch.empty((), dtype=torch.int64).random_().item())
        order = torch.randperm(num_graphs, generator=torch.Generator().manual_seed(seed))
    else:
        order = torch.arange(num_graphs)
    return order.split(batch_size) if num_graphs else ()


class PackedGraphs:
    """``graphs`` (each with ``x`` [n_i, F], ``edge_index`` [2, e_i] and one label ``y``)
    concatenated on ``device``, with the per-node attributes named in ``inputs``.

    :meth:`batch` gathers graphs ``idx`` with node ids renumbered as PyG's collate does:

    .. math::
        \\mathrm{edge\\_index}^{(b)} = \\mathrm{edge\\_index}_{g_b} + \\sum_{b' < b} n_{g_{b'}}

    where graph :math:`g_b` is the :math:`b`-th of ``idx``. Node and edge counts stay on
    the CPU as well, so cutting a batch needs no device synchronisation.
    """

    def __init__(
        self, graphs: Sequence, inputs: Sequence[str] = (), device: torch.device | str = "cpu"
    ) -> None:
        self.device = torch.device(device)
        self.num_graphs = len(graphs)
        self._nodes = torch.tensor([g.num_nodes for g in graphs], dtype=torch.long)
        self._edges = torch.tensor([g.num_edges for g in graphs], dtype=torch.long)
        if any(g.y is None or g.y.numel() != 1 for g in graphs):
            raise ValueError("PackedGraphs needs one label y per graph (graph classification).")
        dev = self.device
        self._node_ptr = (self._nodes.cumsum(0) - self._nodes).to(dev)
        self._edge_ptr = (self._edges.cumsum(0) - self._edges).to(dev)
        empty = not graphs
        self.x = torch.empty(0, device=dev) if empty else torch.cat([g.x for g in graphs]).to(dev)
        edge_index = (
            torch.empty(2, 0, dtype=torch.long)
            if empty
            else torch.cat([g.edge_index for g in graphs], 1)
        )
        self._src, self._dst = (
            edge_index[0].contiguous().to(dev),
            edge_index[1].contiguous().to(dev),
        )
        self.y = (
            torch.empty(0, dtype=torch.long, device=dev)
            if empty
            else torch.cat([g.y.reshape(1) for g in graphs]).to(dev)
        )
        self.inputs = (
            {k: torch.cat([g[k] for g in graphs]).to(dev) for k in inputs} if graphs else {}
        )

    def __len__(self) -> int:
        return self.num_graphs

    def batch(self, idx: Tensor) -> GraphBatch:
        """The graphs ``idx`` (a CPU index tensor [B]) as one :class:`GraphBatch`."""
        nodes, edges = self._nodes[idx], self._edges[idx]
        total_n, total_e = int(nodes.sum()), int(edges.sum())
        dev = self.device
        # output_size spares CUDA a synchronisation; on the CPU it is the slower path
        sized = dev.type == "cuda"
        idx, nodes, edges = idx.to(dev), nodes.to(dev), edges.to(dev)
        first_node = nodes.cumsum(0) - nodes  # of each graph, in the batch
        first_edge = edges.cumsum(0) - edges

        def repeat(values: Tensor, counts: Tensor, total: int) -> Tensor:
            return torch.repeat_interleave(values, counts, output_size=total if sized else None)

        node_ids = repeat(self._node_ptr[idx] - first_node, nodes, total_n) + torch.arange(
            total_n, device=dev
        )
        edge_ids = repeat(self._edge_ptr[idx] - first_edge, edges, total_e) + torch.arange(
            total_e, device=dev
        )
        shift = repeat(first_node, edges, total_e)
        edge_index = torch.stack(
            [
                self._src.index_select(0, edge_ids) + shift,
                self._dst.index_select(0, edge_ids) + shift,
            ]
        )
        graph_of = repeat(torch.arange(len(idx), device=dev), nodes, total_n)
        # index_select, not x[node_ids]: advanced indexing is ~10x slower on the CPU
        return GraphBatch(
            self.x.index_select(0, node_ids),
            edge_index,
            graph_of,
            self.y.index_select(0, idx),
            {k: v.index_select(0, node_ids) for k, v in self.inputs.items()},
        )

    def batches(self, batch_size: int, shuffle: bool) -> Iterator[GraphBatch]:
        """One pass over the graphs in mini-batches (order from :func:`batch_order`)."""
        for idx in batch_order(self.num_graphs, batch_size, shuffle):
            yield self.batch(idx)

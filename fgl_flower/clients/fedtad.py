r"""FedTAD client (Zhu et al., IJCAI 2024): FedAvg's local training, plus the class-wise
knowledge reliability (CKR) of its subgraph with every upload.

The CKR is computed as the official code computes it (``cal_topo_emb`` and the loop after
it; the paper's text was not available to check it against):

1. A topology embedding from random walks: for each length :math:`L = 1..` ``walk-length``, a
   walk of :math:`L` nodes from every node, each step drawn from
   :math:`\mathrm{softmax}(\mathbf T_{u,:})` with :math:`\mathbf T = (\mathbf A + \mathbf I)
   \odot \mathrm{pinv}(\mathbf D)` (an element-wise product, so :math:`\mathbf T` is diagonal,
   :math:`T_{uu} = 1/d_u`): the walk stays with probability :math:`e^{1/d_u}/(e^{1/d_u} + N -
   1)`, else jumps to any other node uniformly. The visited node *ids* are the embedding,
   ``[N, L(L+1)/2]``, concatenated to the features: :math:`\mathbf h_v = [\mathbf x_v \Vert
   \mathrm{walks}_v]`.
2. Per training node :math:`v`: :math:`r_v = \big(1 + \sum_{u \in N(v)} \cos(\mathbf h_v,
   \mathbf h_u)\big) / (|N(v)| + 1)`.
3. :math:`\mathrm{ckr}_c = \sum_{v \in V_{train}, y_v = c} r_v`, ``[C]``.

The walks are drawn from the run seed and the partition id and the sums run on the CPU, so a
client reports the same CKR every round on any device (the official code computes it once and
caches it). The server normalises it over the clients per class.
"""

from __future__ import annotations

import torch
from flwr.app import RecordDict
from torch import Tensor

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.methods.fedtad import RELIABILITY, FedTADOptions
from fgl_flower.records import torch_record
from fgl_flower.seeds import derive_seed


def topology_walks(degree: Tensor, max_length: int, generator: torch.Generator) -> Tensor:
    r"""``[N, L(L+1)/2]`` node ids (float): for each length ``1..max_length``, one walk from
    every node (module docstring), ``degree [N]`` counting the node's own loop."""
    n = degree.numel()
    stay_weight = torch.exp(1.0 / degree.double())
    cols = []
    for length in range(1, max_length + 1):
        cur = torch.arange(n)
        cols.append(cur)
        for _ in range(length - 1):
            stay = torch.rand(n, generator=generator, dtype=torch.float64) < stay_weight[cur] / (
                stay_weight[cur] + n - 1
            )
            other = torch.randint(0, max(n - 1, 1), (n,), generator=generator)
            other = other + (other >= cur).long()  # uniform over the other n - 1 nodes
            cur = torch.where(stay | (n == 1), cur, other)
            cols.append(cur)
    return torch.stack(cols, dim=1).float()


#: Edges per block of the reliability's cosine similarities.
EDGE_CHUNK = 1 << 16


def class_reliability(
    x: Tensor,
    edge_index: Tensor,
    y: Tensor,
    train_mask: Tensor,
    num_classes: int,
    walk_length: int,
    generator: torch.Generator,
) -> Tensor:
    """``[C]``: the CKR of the module docstring, on the CPU (``x [N, F]`` dense, ``edge_index``
    without self-loops, all on the CPU), where its sums are deterministic."""
    n = x.size(0)
    src, dst = edge_index
    degree = torch.bincount(src, minlength=n) + 1  # rows of A + I
    h = torch.cat([x.float(), topology_walks(degree, walk_length, generator)], dim=1)
    h = torch.nn.functional.normalize(h, dim=1, eps=1e-8)
    cos = (
        torch.cat(
            [
                (h[s] * h[d]).sum(dim=1)  # [E], without an [E, F] gather of every edge at once
                for s, d in zip(src.split(EDGE_CHUNK), dst.split(EDGE_CHUNK))
            ]
        )
        if src.numel()
        else h.new_zeros(0)
    )
    total = torch.ones(n).index_add_(0, src, cos)
    r = total / (torch.bincount(src, minlength=n) + 1)
    return torch.zeros(num_classes).index_add_(0, y[train_mask], r[train_mask])


class FedTADClient(FedAvgClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._ckr: Tensor | None = None

    @property
    def options(self) -> FedTADOptions:
        return FedTADOptions.from_config(self.cfg)

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        reply = super().train(content, server_round)
        shape = torch.tensor([self.data.num_features, self.data.num_classes], dtype=torch.int64)
        reply[RELIABILITY] = torch_record({"ckr": self.reliability(), "shape": shape})
        return reply

    def reliability(self) -> Tensor:
        """This client's CKR, computed once per instance (on the CPU: the same numbers each
        time, on any device)."""
        if self._ckr is None:
            g = self.data.data.to("cpu")
            x = g.x.to_dense() if g.x.is_sparse else g.x
            loops = g.edge_index[0] == g.edge_index[1]
            walks = torch.Generator().manual_seed(
                derive_seed(self.cfg.seed, self.partition_id, "fedtad-walks")
            )
            self._ckr = class_reliability(
                x,
                g.edge_index[:, ~loops],
                g.y,
                g.train_mask,
                self.data.num_classes,
                self.options.walk_length,
                walks,
            )
        return self._ckr

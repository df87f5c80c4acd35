r"""FedGTA client (Li et al., VLDB 2024): local training from the personalised model the
server sends, then the topology-aware statistics of the trained model's predictions.

Each round: load the weights received (the client's personalised average of the last
round it trained; round 1, or a client never trained: its own seeded model), train
``local-epochs`` full-batch steps of the run's backbone (FedGTA changes only the
aggregation, so any node model trains), and upload the weights with two statistics of
the *non-parametric label propagation* of its predictions :math:`\mathbf P =
\mathrm{softmax}(f(\mathbf X, \mathbf A))`, ``[N, C]``, as the authors' code computes them
(``NonParaLP``):

.. math::
    \mathbf F^{(0)}_v = \begin{cases}\mathrm{onehot}(y_v) & v \in V_{train}\\
        \mathbf P_v & \text{otherwise}\end{cases}, \qquad
    \mathbf F^{(t+1)} = \alpha\hat{\mathbf A}\mathbf F^{(t)} + (1 - \alpha)\mathbf F^{(0)}
        + \mathbb 1_{V_{train}}\odot\mathbf F^{(0)}

for :math:`t < k`, with :math:`\hat{\mathbf A} = \hat{\mathbf D}^{-1/2}(\mathbf A +
\mathbf I)\hat{\mathbf D}^{-1/2}` (the code's last term adds the training labels again at
every step); then :math:`\hat{\mathbf Y} = \mathrm{softmax}(\mathbf F^{(k)})` and
:math:`\hat{\mathbf Y}^{T} = \mathrm{softmax}(\mathbf F^{(k)} / T)`, training rows set to
their one-hot labels in both.

- **Mixed moments** (``[M, C]`` flattened, :math:`M = K` or :math:`2K`): per class, the
  raw moments :math:`\frac1N\sum_v \hat Y_{vc}^{\,p}` and/or the central ones
  :math:`\frac1N\sum_v (\hat Y_{vc} - \bar Y_c)^p`, :math:`p = 1..K`.
- **Smoothing confidence** :math:`w = \sum_v d_v\big(\frac{C}{e} + \sum_c \hat Y^T_{vc}
  \log \hat Y^T_{vc}\big)` (:math:`d_v` the node's degree): high where the propagated labels
  are sharp, and more so at well-connected nodes. Each term is :math:`\ge 0`, since
  :math:`-p\log p \le 1/e`.

Evaluation (FedAvg's) evaluates the model received, before it trains: the code evaluates
the personalised model right after loading it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from flwr.app import RecordDict
from torch import Tensor

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.methods.fedgta import STATISTICS, FedGTAOptions
from fgl_flower.models.propagate import Adjacency
from fgl_flower.probes import as_metrics
from fgl_flower.records import torch_record


def label_propagation(
    adj: Adjacency, probs: Tensor, y: Tensor, train_mask: Tensor, steps: int, alpha: float
) -> Tensor:
    r""":math:`\mathbf F^{(k)}`, ``[N, C]``, of the module docstring, from the predictions
    ``probs [N, C]`` and the labels ``y [N]`` of the training nodes ``train_mask [N]``."""
    f0 = probs.clone()
    f0[train_mask] = F.one_hot(y[train_mask], probs.size(1)).to(probs.dtype)
    boost = f0 * train_mask[:, None].to(probs.dtype)
    out = f0
    for _ in range(steps):
        out = alpha * (adj.t @ out) + (1 - alpha) * f0 + boost
    return out


def moments(p: Tensor, orders: int, kind: str) -> Tensor:
    r"""``[M, C]``: per column of ``p [N, C]``, the raw (:math:`E[p^k]`) and/or central
    (:math:`E[(p - E p)^k]`) moments of orders ``1..orders`` (``kind``: raw | central |
    hybrid, raw first)."""
    ks = torch.arange(1, orders + 1, dtype=p.dtype, device=p.device)[:, None, None]
    parts = []
    if kind in ("raw", "hybrid"):
        parts.append(p[None].pow(ks).mean(dim=1))
    if kind in ("central", "hybrid"):
        parts.append((p - p.mean(dim=0))[None].pow(ks).mean(dim=1))
    return torch.cat(parts)


def smoothing_confidence(p: Tensor, degree: Tensor, eps: float = 1e-8) -> Tensor:
    r"""``[]``: :math:`\sum_v d_v\big(\frac{C}{e} + \sum_c p_{vc}\log(p_{vc} + \epsilon)\big)`
    of soft labels ``p [N, C]`` and degrees ``degree [N]`` (the code's ``info_entropy_rev``)."""
    per_node = p.size(1) / math.e + (p * torch.log(p + eps)).sum(dim=1)
    return (degree.to(p.dtype) * per_node).sum()


class FedGTAClient(FedAvgClient):
    @property
    def options(self) -> FedGTAOptions:
        return FedGTAOptions.from_config(self.cfg)

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        self.seed_round(server_round)
        res = self.learner.fit(self.cfg.local_epochs)
        moment_vector, confidence, share = self.statistics()
        reply = self.training_reply({**res, **as_metrics({"fedgta.confidence": share})})
        reply[STATISTICS] = torch_record(
            {"moments": moment_vector, "confidence": confidence.reshape(1)}
        )
        return reply

    @torch.no_grad()
    def statistics(self) -> tuple[Tensor, Tensor, float]:
        """``(moments [M * C], confidence [], confidence as a share of its maximum)`` of the
        trained model's propagated predictions (module docstring)."""
        o, g, model = self.options, self.data.data, self.learner.model
        was_training = model.training
        model.eval()
        try:
            probs = F.softmax(self.learner.logits(), dim=1)
        finally:
            model.train(was_training)
        adj = Adjacency.gcn(g.edge_index, g.num_nodes)
        out = label_propagation(adj, probs, g.y, g.train_mask, o.lp_steps, o.lp_alpha)
        onehot = F.one_hot(g.y[g.train_mask], probs.size(1)).to(probs.dtype)
        raw, soft = F.softmax(out, dim=1), F.softmax(out / o.temperature, dim=1)
        raw[g.train_mask] = onehot
        soft[g.train_mask] = onehot
        degree = torch.bincount(g.edge_index[1], minlength=g.num_nodes)
        confidence = smoothing_confidence(soft, degree)
        ceiling = float(degree.sum()) * probs.size(1) / math.e
        share = float(confidence) / ceiling if ceiling > 0 else 0.0
        return moments(raw, o.num_moments, o.moment_type).flatten().cpu(), confidence.cpu(), share

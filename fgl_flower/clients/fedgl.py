r"""FedGL client (Chen, Hu, Xu and Zheng, Information Sciences 2024): FedAvg's local training
plus a cross-entropy on the global pseudo-labels.

.. math::
    \ell = \mathrm{CE}(f(X)_T, y_T) + w\, \mathrm{CE}(f(X)_P, \hat y_P),

:math:`T` the client's training nodes and :math:`P` its other nodes that carry a global
pseudo-label :math:`\hat y` (:data:`~fgl_flower.methods.fedgl.PSEUDO`, from round 2),
:math:`w` = ``fedgl.ssl-weight``; the logits are those of the step's forward pass. After
training the client uploads its model (FedAvg) and the eval-mode class probabilities and
logits (the pseudo-graph's embeddings) of all its nodes with their global ids
(:data:`~fgl_flower.methods.fedgl.PREDICTIONS`).

A message with a pseudo-graph block (:data:`~fgl_flower.methods.fedgl.GRAPH`, train or
evaluate, ``fedgl.graph-weight > 0``, from round 2) makes every forward pass of that message
(training, evaluation, the upload) run on the local edges with weight 1 plus the block's
weighted edges (:attr:`~fgl_flower.clients.learner.NodeLearner.edges`), so the backbone
normalises :math:`A + \lambda S` as it normalises :math:`A`; a message without one runs on
the local edges alone.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, RecordDict
from torch import Tensor, nn

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.methods.fedgl import GRAPH, PREDICTIONS, PSEUDO, FedGLOptions
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import METRICS
from fgl_flower.records import get_record, record_torch, torch_record


class FedGLClient(FedAvgClient):
    """FedAvg plus the pseudo-label loss (module docstring)."""

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self._terms: list[float] = []
        self._probes: dict[str, float] = {}
        self._hook = None
        self.use_graph(content, probe=True)
        try:
            reply = super().train(content, server_round)
        finally:
            if self._hook is not None:
                self._hook.remove()
        g = self.data.data
        self.learner.model.eval()
        with torch.no_grad():
            logits = self.learner.logits()
        reply[PREDICTIONS] = torch_record(
            {
                "probs": F.softmax(logits, dim=1),
                "embeddings": logits,
                "nodes": g.global_id.to(logits.device),
            }
        )
        if self._terms:
            ssl = sum(self._terms) / len(self._terms)
            sup = float(reply[METRICS]["train_loss"])
            self._probes["fedgl.ssl-share"] = ssl / (sup + ssl) if sup + ssl > 0 else 0.0
        for name, value in as_metrics(self._probes).items():
            reply[METRICS][name] = value
        return reply

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        self.use_graph(content)
        return super().evaluate(content, server_round)

    def use_graph(self, content: RecordDict, probe: bool = False) -> None:
        """Train or evaluate on the local edges (weight 1) plus the message's pseudo-graph
        block (:data:`~fgl_flower.methods.fedgl.GRAPH`), or on the local edges alone (the
        learner's default) where the message has none."""
        record = get_record(content, GRAPH, ArrayRecord)
        self.learner.edges = None
        if record is None or not len(record):
            return
        g = self.data.data
        block = record_torch(record)
        edges = block["edges"].to(g.edge_index.device, torch.long)
        weight = block["weight"].to(g.edge_index.device, torch.float32)
        local = g.edge_index.size(1)
        self.learner.edges = (
            torch.cat([g.edge_index, edges], dim=1),
            torch.cat([weight.new_ones(local), weight]),
        )
        if probe:
            self._probes["fedgl.graph-edges"] = edges.size(1) / max(local, 1)
            self._probes["fedgl.graph-mass"] = float(weight.sum()) / max(local, 1)

    def extra_loss(self, content: RecordDict):
        o = FedGLOptions.from_config(self.cfg)
        record = get_record(content, PSEUDO, ArrayRecord)
        if record is None or not len(record):
            return None
        g, model = self.data.data, self.learner.model
        labels = record_torch(record)["labels"].to(self.device)
        mask = (labels >= 0) & ~g.train_mask
        unlabelled = int((~g.train_mask).sum())
        self._probes["fedgl.pseudo-share"] = float(mask.sum()) / max(unlabelled, 1)
        with torch.no_grad():  # the received global model's own predictions
            was = model.training
            model.eval()
            own = self.learner.logits().argmax(dim=1)
            model.train(was)
        if mask.any():
            self._probes["fedgl.agreement"] = float((own[mask] == labels[mask]).float().mean())
        if o.ssl_weight == 0 or not mask.any():
            return None
        seen: dict[str, Tensor] = {}
        self._hook = model.register_forward_hook(lambda _, __, out: seen.__setitem__("logits", out))

        def pseudo_loss(_: nn.Module) -> Tensor:
            term = o.ssl_weight * F.cross_entropy(seen["logits"][mask], labels[mask])
            self._terms.append(float(term.detach()))
            return term

        return pseudo_loss

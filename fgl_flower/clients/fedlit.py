r"""FedLit client (Xie, Xiong and Yang, WWW 2023): a multi-channel GCN whose channels follow
latent link types found by clustering the edges (:mod:`fgl_flower.models.fedlit`).

Each round: load what the server sends (the projection, the classifier, for each of the
client's types the channel and centre of the global type it matched; round 1: the seeded
model, whose first step seeds the centroids by k-means), then ``local-epochs`` full-batch
steps, each an E-M step of the clustering on the current projection followed by a
cross-entropy step of the whole model on that assignment. The reply carries every parameter,
the centroids, and per type the number of training nodes its subgraph holds
(``fedlit.centroids``: ``train-counts``), which the server needs to leave untrained channels
out of their average.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from flwr.app import RecordDict

from fgl_flower.clients.base import LearnerClient
from fgl_flower.clients.learner import ModelBuilder
from fgl_flower.datasets import NodeClientData
from fgl_flower.methods.fedlit import CENTROIDS, FedLitOptions
from fgl_flower.probes import as_metrics
from fgl_flower.records import torch_record


def train_counts(
    types: torch.Tensor, edge_index: torch.Tensor, train_mask: torch.Tensor, k: int
) -> torch.Tensor:
    """``[K]``: per type, the training nodes incident to an edge of that type (the official
    ``cluster_train_size``)."""
    counts = torch.zeros(k, dtype=torch.float64)
    for t in range(k):
        present = torch.zeros_like(train_mask)
        present[edge_index[:, types == t].reshape(-1)] = True
        counts[t] = float((present & train_mask).sum())
    return counts


def type_shares(types: torch.Tensor, k: int) -> torch.Tensor:
    """``[K]``: the share of edges of each type (zeros for a graph without edges)."""
    counts = torch.bincount(types, minlength=k).double()
    return counts / counts.sum().clamp(min=1)


class FedLitClient(LearnerClient):
    data: NodeClientData

    @property
    def options(self) -> FedLitOptions:
        return FedLitOptions.from_config(self.cfg)

    def model_builder(self) -> ModelBuilder:
        from fgl_flower.models.fedlit import build_fedlit

        o, c = self.options, self.cfg
        return lambda num_features, num_classes: build_fedlit(
            num_features,
            num_classes,
            c.hidden,
            o.num_types,
            c.num_layers,
            c.dropout,
            o.em_iters,
            c.seed,
            c.model_init,
        )

    def shared_prefixes(self) -> tuple[str, ...]:
        return ("feature1.", "channels.", "classifier.", "centroids")

    def load_global(self, content: RecordDict) -> dict[str, torch.Tensor]:
        tensors = super().load_global(content)
        if "centroids" in tensors:  # the server's centres: the clustering goes on from them
            self.learner.model.initialized.fill_(1)
        return tensors

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        self.seed_round(server_round)
        g, model, opt = self.data.data, self.learner.model, self.learner.optimizer
        mask, y = g.train_mask, g.y[g.train_mask]
        model.train()
        start = None
        if bool(model.initialized):
            with torch.no_grad():
                start = model.types_of(model.project(g.x), g.edge_index)
        loss, types = torch.zeros(()), None
        for _ in range(self.cfg.local_epochs):
            opt.zero_grad()
            h = model.project(g.x)
            types = model.em_step(h, g.edge_index)
            loss = F.cross_entropy(model.classify(h, g.edge_index, types)[mask], y)
            loss.backward()
            opt.step()
        metrics = {"train_loss": loss.item()}
        if start is not None:
            with torch.no_grad():
                end = model.types_of(model.project(g.x), g.edge_index)
            metrics.update(
                as_metrics(
                    {
                        "fedlit.reassigned": float((start != end).double().mean())
                        if end.numel()
                        else 0.0
                    }
                )
            )
        counts = (
            train_counts(types.cpu(), g.edge_index.cpu(), mask.cpu(), model.num_types)
            if types is not None
            else torch.zeros(model.num_types, dtype=torch.float64)
        )
        reply = self.training_reply(metrics)
        reply[CENTROIDS] = torch_record({"train-counts": counts})
        return reply

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        return self.evaluation_reply(server_round)

    def probe_metrics(self) -> dict[str, float]:
        """The link types of the evaluation just made: their entropy and how many are used."""
        types = self.learner.model.last_types
        if types is None or types.numel() == 0:
            return {}
        k = self.learner.model.num_types
        shares = type_shares(types.cpu(), k)
        nz = shares[shares > 0]
        entropy = float(-(nz * nz.log()).sum()) / math.log(k) if k > 1 else 0.0
        return {"fedlit.type-entropy": entropy, "fedlit.types-used": float((shares >= 0.01).sum())}

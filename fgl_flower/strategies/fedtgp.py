r"""FedTGP server (Zhang, Liu, Hua and Cao, "FedTGP: Trainable Global Prototypes with
Adaptive-Margin-Enhanced Contrastive Learning for Data and Model Heterogeneity in Federated
Learning", AAAI 2024).

The server holds one trainable prototype per class, :math:`P_c = W_2\,\mathrm{ReLU}(W_1 e_c +
b_1) + b_2` (a class embedding :math:`e_c` and a two-layer map, width :math:`h`; built from the
run seed). Each round, from the uploaded client prototypes :math:`C_i^{(j)}` of the classes
each client has (:data:`~fgl_flower.methods.fedproto.PROTOTYPES`), it computes the adaptive
margin

.. math::
    \delta = \min\Big(\max_j \min_{k \ne j} \lVert \hat C^{(j)} - \hat C^{(k)} \rVert_2,\ \tau\Big)

with :math:`\hat C^{(j)}` the mean of class :math:`j`'s uploads and :math:`\tau` =
``fedtgp.margin-threshold``, then trains the prototypes for ``server-epochs`` epochs of
shuffled batches of ``server-batch`` uploads (SGD at ``server-lr``, a fresh optimizer each
round, as the official code) on

.. math::
    \mathcal L = \mathrm{CE}\big(-(d(C_i^{(j)}, P) + \delta\,\mathbb 1_j),\ j\big),

:math:`d` the Euclidean distances to every class's prototype, the own class's pushed out by
the margin. The trained :math:`P` travel with the next round's train messages (as FedProto's
global prototypes) and the map's parameters are checkpointed.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, Message, MetricRecord
from torch import nn

from fgl_flower.device import cpu_seeded
from fgl_flower.methods.fedtgp import PROTOTYPES, FedTGPOptions
from fgl_flower.records import require_record
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies.fedproto import FedProtoStrategy, spread
from fgl_flower.strategies.screening import values_of


class TrainablePrototypes(nn.Module):
    """``forward() -> [C, h]``: one prototype per class from its embedding through
    ``Linear(h, h) -> ReLU -> Linear(h, h)``."""

    def __init__(self, num_classes: int, dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_classes, dim)
        self.middle = nn.Sequential(nn.Linear(dim, dim), nn.ReLU())
        self.fc = nn.Linear(dim, dim)

    def forward(self) -> torch.Tensor:
        return self.fc(self.middle(self.embedding.weight))


def adaptive_margin(prototypes: torch.Tensor, labels: torch.Tensor, threshold: float) -> float:
    r""":math:`\delta`: the largest over classes of the distance from a class's mean upload to
    the nearest other class's, capped at ``threshold`` (0 with fewer than two classes)."""
    classes = labels.unique()
    if len(classes) < 2:
        return 0.0
    means = torch.stack([prototypes[labels == c].mean(dim=0) for c in classes])
    d = torch.cdist(means, means).fill_diagonal_(float("inf"))
    return float(min(d.min(dim=1).values.max(), threshold))


def contrastive_loss(
    uploads: torch.Tensor, labels: torch.Tensor, prototypes: torch.Tensor, margin: float
) -> torch.Tensor:
    """Cross-entropy of the negative distances of ``uploads [n, h]`` to ``prototypes [C, h]``,
    each upload's own class's distance increased by ``margin``."""
    d = torch.cdist(uploads, prototypes)
    d = d + margin * F.one_hot(labels, prototypes.size(0)).to(d.dtype)
    return F.cross_entropy(-d, labels)


class FedTGPStrategy(FedProtoStrategy):
    """FedProto's rounds; the global prototypes are trained (module docstring)."""

    checkpointed = FedProtoStrategy.checkpointed + ("generator_state",)

    options = FedTGPOptions

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.generator: TrainablePrototypes | None = None
        self.last: dict[str, float] = {}

    @property
    def generator_state(self) -> np.ndarray | None:
        """The trainable prototypes' parameters, flat (checkpointed)."""
        if self.generator is None:
            return None
        return nn.utils.parameters_to_vector(self.generator.parameters()).detach().numpy()

    @generator_state.setter
    def generator_state(self, value: np.ndarray) -> None:
        self._pending_state = value

    def build(self, num_classes: int, dim: int) -> TrainablePrototypes:
        with cpu_seeded(derive_seed(self.cfg.seed, "fedtgp")):
            generator = TrainablePrototypes(num_classes, dim)
        pending = getattr(self, "_pending_state", None)
        if pending is not None:
            nn.utils.vector_to_parameters(
                torch.as_tensor(pending, dtype=torch.float32), generator.parameters()
            )
            self._pending_state = None
        return generator

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        uploads, labels = [], []
        for r in replies:
            record = require_record(r.content, PROTOTYPES, ArrayRecord)
            protos, counts = values_of(record, "prototypes"), values_of(record, "counts")
            has = counts > 0
            uploads.append(torch.as_tensor(protos[has], dtype=torch.float32))
            labels.append(torch.as_tensor(np.nonzero(has)[0], dtype=torch.long))
        x, y = torch.cat(uploads), torch.cat(labels)
        num_classes, dim = values_of(
            require_record(replies[0].content, PROTOTYPES, ArrayRecord), "prototypes"
        ).shape
        if self.generator is None:
            self.generator = self.build(num_classes, dim)
        margin = adaptive_margin(x, y, self.opts.margin_threshold)
        loss = self.train_generator(server_round, x, y, margin)
        with torch.no_grad():
            self.prototypes = self.generator().numpy().astype(np.float32)
        self.present = np.ones(num_classes, dtype=np.int64)
        self.last = {"fedtgp.adaptive-margin": margin, "fedtgp.server-loss": loss}
        return None, self.aggregate_train_metrics(replies)

    def train_generator(
        self, server_round: int, x: torch.Tensor, y: torch.Tensor, margin: float
    ) -> float:
        """``server-epochs`` of shuffled batches (order seeded by run and round); the last
        batch's loss."""
        o, gen = self.opts, self.generator
        optimizer = torch.optim.SGD(gen.parameters(), lr=o.server_lr)
        order_gen = torch.Generator().manual_seed(
            derive_seed(self.cfg.seed, server_round, "fedtgp")
        )
        batch = o.server_batch or len(x)
        loss = torch.zeros(())
        gen.train()
        for _ in range(o.server_epochs):
            order = torch.randperm(len(x), generator=order_gen)
            for start in range(0, len(x), batch):
                idx = order[start : start + batch]
                loss = contrastive_loss(x[idx], y[idx], gen(), margin)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        gen.eval()
        return float(loss.detach())

    def server_probes(self, server_round: int) -> dict[str, float]:
        if self.prototypes is None:
            return {}
        return {"fedtgp.spread": spread(self.prototypes, self.present), **self.last}

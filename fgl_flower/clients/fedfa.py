r"""FedFA client (Zhou & Konukoglu, "FedFA: Federated Feature Augmentation", ICLR 2023).

FedAvg's local training of :class:`~fgl_flower.models.fedfa.FedFANet`: the run's backbone
(built from the run seed exactly as FedAvg's) with one FFA layer on the representations its
classifier reads. Everything travels, the FFA buffers included: the client's running
statistic means go up (the server derives the client-sharing variance from them and sends
it back with the averaged model). With ``fedfa.statistics = reset`` (the paper's Algorithm 1)
they restart from 0 and 1 every round; ``carried`` (the official code) goes on from the
server's average of them. The reply carries the FFA probes of the round's training
forwards. Evaluations are never augmented (``eval-dropout`` keeps dropout alone).
"""

from __future__ import annotations

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.learner import ModelBuilder, seeded_model
from fgl_flower.datasets import NodeClientData
from fgl_flower.methods.fedfa import FedFAOptions
from fgl_flower.probes import as_metrics


class FedFAClient(FedAvgClient):
    data: NodeClientData

    def model_builder(self) -> ModelBuilder:
        from fgl_flower.models.fedfa import FedFANet, FFALayer

        o, c = FedFAOptions.from_config(self.cfg), self.cfg
        return lambda num_features, num_classes: FedFANet(
            seeded_model(c, "node", num_features, num_classes),
            FFALayer(c.hidden, o.prob, o.momentum, o.eps),
        )

    def before_fit(self) -> None:
        ffa = self.learner.model.ffa
        ffa.reset_probes()
        if FedFAOptions.from_config(self.cfg).statistics == "reset":
            ffa.reset_statistics()

    def evaluate_learner(self, learner, server_round: int) -> dict[str, float]:
        """Evaluation never augments, also with ``eval-dropout`` (train mode for dropout only)."""
        with learner.model.ffa.paused():
            return super().evaluate_learner(learner, server_round)

    def after_fit(self) -> dict[str, float]:
        return as_metrics(self.learner.model.ffa.probes())

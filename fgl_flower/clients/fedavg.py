"""FedAvg client (McMahan et al., 2017): local epochs from the global model, upload all."""

from __future__ import annotations

from flwr.app import RecordDict

from fgl_flower.clients.base import LearnerClient


class FedAvgClient(LearnerClient):
    """Start from the global shared parameters, train ``local-epochs``, upload them."""

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        self.seed_round(server_round)
        res = self.learner.fit(self.cfg.local_epochs, extra_loss=self.extra_loss(content))
        return self.training_reply(res)

    def extra_loss(self, content: RecordDict):
        """Regulariser added to the local loss (none for FedAvg)."""
        return None

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        return self.evaluation_reply()

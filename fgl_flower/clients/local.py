"""Local (standalone) client: trains its own model, never communicates parameters."""

from __future__ import annotations

from flwr.app import RecordDict

from fgl_flower.clients.base import LearnerClient


class LocalClient(LearnerClient):
    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.seed_round(server_round)
        res = self.learner.fit(self.cfg.local_epochs)
        return self.training_reply(
            {**res, **self.evaluate_learner(self.learner, server_round)}, upload=False
        )

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        return self.evaluation_reply(server_round)

"""FedAvg client (McMahan et al., 2017): local epochs from the global model, upload all.

With ``<method>.finetune-epochs = E > 0`` every evaluation first fine-tunes a copy of the
global model on the client's training data for ``E`` epochs (fresh Adam, plain
cross-entropy) and evaluates that personalized copy ("FedAvg+ft", the one-shot baseline
of O-pFGL); the copy is discarded, training continues from the global model. Evaluation
never changes the learner, so it may share a message with the next round's training.
"""

from __future__ import annotations

import copy

from flwr.app import RecordDict

from fgl_flower.clients.base import LearnerClient
from fgl_flower.clients.learner import make_adam


class FedAvgClient(LearnerClient):
    """Start from the global shared parameters, train ``local-epochs``, upload them."""

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        reference = self.round_start()
        self.before_fit()
        self.seed_round(server_round)
        res = self.learner.fit(self.cfg.local_epochs, extra_loss=self.extra_loss(content))
        return self.training_reply({**res, **self.after_fit()}, reference=reference)

    def before_fit(self) -> None:
        """Called once the global model is loaded, before local training (nothing for FedAvg)."""

    def after_fit(self) -> dict[str, float]:
        """Metrics measured right after local training, for the reply (none for FedAvg)."""
        return {}

    def extra_loss(self, content: RecordDict):
        """Regulariser added to the local loss (none for FedAvg)."""
        return None

    def finetune_epochs(self) -> int:
        """Epochs of FedAvg+ft's fine-tuned evaluation (0 for methods without the option)."""
        return int(dict(self.cfg.method_options).get("finetune-epochs", 0))

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        epochs = self.finetune_epochs()
        if epochs <= 0:
            return self.evaluation_reply(server_round)
        learner = self.learner
        self.learner = tuned = copy.copy(learner)
        try:
            tuned.model = copy.deepcopy(learner.model)
            tuned.optimizer = make_adam(
                tuned.model.parameters(), self.cfg.lr, self.cfg.weight_decay
            )
            self.seed_round(server_round, "finetune")
            tuned.fit(epochs)
            return self.evaluation_reply(server_round)
        finally:
            self.learner = learner

"""FedNova client (Wang et al., NeurIPS 2020): FedAvg's local training, counting its steps.

The reply's metrics carry :data:`STEPS`, the number of optimizer steps :math:`a_k` the client
took this round (full-batch node tasks: ``local-epochs``; graph tasks: epochs × batches, which
differs with the client's size), for the server's normalized average
(:mod:`fgl_flower.strategies.fednova`). In round 1, when the client built the initial model
itself from the run seed, it also sends that model (:data:`~fgl_flower.protocol.START`):
the server's :math:`w_0`.
"""

from __future__ import annotations

from flwr.app import RecordDict

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.learner import counting_steps
from fgl_flower.methods.fednova import STEPS


class FedNovaClient(FedAvgClient):
    sends_start = True

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        with counting_steps(self.learner.optimizer) as self._count:
            return super().train(content, server_round)

    def after_fit(self) -> dict[str, float]:
        return {STEPS: float(self._count.steps)}

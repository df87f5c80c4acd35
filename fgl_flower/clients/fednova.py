"""FedNova client (Wang et al., NeurIPS 2020): FedAvg's local training, counting its steps.

The reply's metrics carry :data:`STEPS`, the number of optimizer steps :math:`a_k` the client
took this round (full-batch node tasks: ``local-epochs``; graph tasks: epochs × batches, which
differs with the client's size), for the server's normalized average
(:mod:`fgl_flower.strategies.fednova`). In round 1, when the client built the initial model
itself from the run seed, it also sends that model (:data:`START`): the server's :math:`w_0`.
"""

from __future__ import annotations

from flwr.app import RecordDict

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.records import torch_record

STEPS = "fednova.steps"  # metric: local optimizer steps a_k
START = "fednova.start"  # record: the model the client started from, sent in round 1 only


class FedNovaClient(FedAvgClient):
    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        received = self.load_global(content)
        start = None if received else {k: v.detach().clone() for k, v in self.learner.get_shared().items()}
        self.seed_round(server_round)
        steps = 0

        def count(*_) -> None:
            nonlocal steps
            steps += 1

        hook = self.learner.optimizer.register_step_post_hook(count)
        try:
            res = self.learner.fit(self.cfg.local_epochs)
        finally:
            hook.remove()
        reply = self.training_reply({**res, STEPS: float(steps)})
        if start is not None:
            reply[START] = torch_record(start)
        return reply

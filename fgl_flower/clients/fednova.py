"""FedNova client (Wang et al., NeurIPS 2020): FedAvg's local training, counting its steps.

The reply's metrics carry :data:`STEPS`, the number of optimizer steps :math:`a_k` the client
took this round (full-batch node tasks: ``local-epochs``; graph tasks: epochs × batches, which
differs with the client's size), for the server's normalized average
(:mod:`fgl_flower.strategies.fednova`). In round 1, when the client built the initial model
itself from the run seed, it also sends that model (:data:`START`): the server's :math:`w_0`.
"""

from __future__ import annotations

from flwr.app import ArrayRecord, RecordDict

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import get_record, torch_record

STEPS = "fednova.steps"  # metric: local optimizer steps a_k
START = "fednova.start"  # record: the model the client started from, sent in round 1 only


class FedNovaClient(FedAvgClient):
    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        record = get_record(content, ARRAYS, ArrayRecord)
        start = None if record is not None and len(record) else self.shared_snapshot()
        self._steps = 0
        hook = self.learner.optimizer.register_step_post_hook(self._count_step)
        try:
            reply = super().train(content, server_round)
        finally:
            hook.remove()
        if start is not None:
            reply[START] = torch_record(start)
        return reply

    def _count_step(self, *_) -> None:
        self._steps += 1

    def after_fit(self) -> dict[str, float]:
        return {STEPS: float(self._steps)}

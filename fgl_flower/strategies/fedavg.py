r"""FedAvg (McMahan et al., 2017) on the Message API.

.. math::
    w^{t+1} = \sum_{k=1}^{K} \frac{n_k}{\sum_j n_j}\, w_k^{t+1}

with :math:`n_k` the client's number of training examples (``num-examples``).
Clients upload only their shared parameters (see :class:`~fgl_flower.clients.learner.Learner`).
"""

from __future__ import annotations

from collections.abc import Iterable

from flwr.app import ArrayRecord, Message, MetricRecord

from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES
from fgl_flower.records import require_record
from fgl_flower.strategies.aggregation import weighted_mean_arrays
from fgl_flower.strategies.base import FGLStrategy


class FedAvgStrategy(FGLStrategy):
    """Average uploaded arrays weighted by ``num-examples``, in partition-id order.

    The global model of round ``r`` is evaluated in round ``r + 1``'s train message
    (:attr:`~FGLStrategy.evaluate_with_next_train`).
    """

    evaluate_with_next_train = True

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        records = [require_record(r.content, ARRAYS, ArrayRecord) for r in replies]
        weights = self.aggregation_weights(server_round, replies)
        return weighted_mean_arrays(records, weights), self.aggregate_train_metrics(replies)

    def aggregation_weights(self, server_round: int, replies: list[Message]) -> list[float]:
        """The weight of each reply's arrays: its ``num-examples``."""
        return [float(require_record(r.content, METRICS, MetricRecord)[NUM_EXAMPLES]) for r in replies]

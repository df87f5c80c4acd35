r"""FedAvg (McMahan et al., 2017) on the Message API.

.. math::
    w^{t+1} = \sum_{k=1}^{K} \frac{n_k}{\sum_j n_j}\, w_k^{t+1}

with :math:`n_k` the client's number of training examples (``num-examples``).
Clients upload only their shared parameters (see :class:`~fgl_flower.clients.learner.Learner`).
With ``<method>.secure-aggregation`` the server learns only the sums (:mod:`fgl_flower.secagg`);
with ``<method>.dp-clip`` the uploads are clipped updates and the mean gets Gaussian noise
(client-level DP, :mod:`fgl_flower.dp`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from fgl_flower.dp.server import CentralDP
from fgl_flower.errors import FGLError
from fgl_flower.protocol import ARRAYS, METRICS, NUM_EXAMPLES
from fgl_flower.records import array_of, require_record
from fgl_flower.secagg.protocol import SECURE_AGGREGATION, WEIGHT_KEY
from fgl_flower.secagg.server import SecAggPlusRound, SecAggPlusSettings
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies.aggregation import weighted_mean_arrays
from fgl_flower.strategies.base import FGLStrategy


class FedAvgStrategy(FGLStrategy):
    """Average uploaded arrays weighted by ``num-examples``, in partition-id order.

    The global model of round ``r`` is evaluated in round ``r + 1``'s train message
    (:attr:`~FGLStrategy.evaluate_with_next_train`).
    """

    evaluate_with_next_train = True

    checkpointed = ("dp_releases",)

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        #: ``<method>.secure-aggregation`` (methods that declare it: FedAvg, FedProx, FedStar,
        #: FedDense): the uploaded arrays through SecAgg+, the server learns only their sum
        self.secure = bool(dict(cfg.method_options).get(SECURE_AGGREGATION, False))
        self._secagg: SecAggPlusRound | None = None
        self._secure_mean: ArrayRecord | None = None
        #: ``<method>.dp-clip`` > 0: noise on the mean and its accountant
        self.dp = CentralDP.from_config(cfg)
        #: the global arrays of this round's train messages (what the clients started from)
        self.sent = ArrayRecord()

    @property
    def dp_releases(self) -> np.ndarray | None:
        """The DP releases so far (checkpointed: the accountant resumes from them)."""
        return None if self.dp is None else self.dp.releases

    @dp_releases.setter
    def dp_releases(self, value: np.ndarray) -> None:
        if self.dp is not None:
            self.dp.load(value)

    def round_content(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord) -> RecordDict:
        self.sent = arrays
        return super().round_content(server_round, arrays, config)

    def prepare_round(self, server_round: int, config: ConfigRecord,
                      send: Callable[[list[Message]], list[Message]]) -> None:
        """With secure aggregation: SecAgg+'s key exchange among the round's clients."""
        if self.secure:
            self._secagg = SecAggPlusRound(self.node_ids, SecAggPlusSettings(),
                                           derive_seed(self.cfg.seed, server_round, "secagg"))
            self._secagg.share_keys(send)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid) -> Iterable[Message]:
        messages = super().configure_train(server_round, arrays, config, grid)
        if not self.secure:
            return messages
        # each train message also asks for the masked, weighted upload; none goes to a client
        # that failed in the key exchange
        return [self._secagg.collect_message(m.metadata.dst_node_id, m.content, ARRAYS, weight=NUM_EXAMPLES,
                                             message_type=m.metadata.message_type)
                for m in messages if m.metadata.dst_node_id in self._secagg.shared]

    def finish_round(self, server_round: int, replies: list[Message],
                     send: Callable[[list[Message]], list[Message]]) -> None:
        """With secure aggregation: unmask the sum of ``n_k w_k`` and of ``n_k``; the mean."""
        if self.secure:
            total = self._secagg.unmask(replies, ARRAYS, send).total
            weight = float(total.pop(WEIGHT_KEY)[0])
            if weight <= 0:  # as the clear mean (weighted_mean_arrays) stops
                raise FGLError("Aggregation weights sum to zero (no client has training examples).")
            self._secure_mean = ArrayRecord({k: array_of((v / weight).float().numpy()) for k, v in total.items()})
            self._secagg = None

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        if self.secure:
            mean, self._secure_mean = self._secure_mean, None
        else:
            records = [require_record(r.content, ARRAYS, ArrayRecord) for r in replies]
            mean = weighted_mean_arrays(records, self.aggregation_weights(server_round, replies))
        if self.dp is not None and replies:
            mean = self.dp.privatize(server_round, mean, len(replies))
            if mean is None:  # fewer clients than the cohort: nothing is released
                if not len(self.sent):
                    raise FGLError(f"Round {server_round}: differential privacy cannot release round 1 "
                                   "without all its clients (each built the start model itself); start again.")
                mean = self.sent
        return mean, self.aggregate_train_metrics(replies)

    def round_record(self, server_round: int) -> dict:
        """With DP: the budget spent after this round and its noise (``dp``)."""
        return {} if self.dp is None else {"dp": self.dp.record()}

    def aggregation_weights(self, server_round: int, replies: list[Message]) -> list[float]:
        """The weight of each reply's arrays: its ``num-examples``."""
        return [float(require_record(r.content, METRICS, MetricRecord)[NUM_EXAMPLES]) for r in replies]

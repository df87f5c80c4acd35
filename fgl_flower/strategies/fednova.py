r"""FedNova (Wang et al., "Tackling the Objective Inconsistency Problem in Heterogeneous
Federated Optimization", NeurIPS 2020): the normalized average.

Client :math:`k` starts from :math:`w`, takes :math:`a_k` local steps (plain SGD: its
:math:`\lVert\mathbf a_k\rVert_1 = \tau_k`) and uploads :math:`w_k`; with
:math:`p_k = n_k / \sum_j n_j`,

.. math::
    d_k = \frac{w - w_k}{a_k}, \qquad \tau_{\mathrm{eff}} = \sum_k p_k a_k, \qquad
    w^{+} = w - \tau_{\mathrm{eff}} \sum_k p_k d_k,

so a client that took more steps does not pull the model further than one that took fewer
(FedAvg is the case :math:`a_k` all equal). The server keeps :math:`w` from the arrays it
sent; in round 1, when clients build :math:`w_0` themselves from the run seed, they send it
back once (:data:`~fgl_flower.clients.fednova.START`), and the copies must agree. Integer arrays
(counters) take FedAvg's mean.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from flwr.app import ArrayRecord, Message, MetricRecord

from fgl_flower.clients.fednova import START, STEPS
from fgl_flower.errors import FGLError
from fgl_flower.protocol import ARRAYS, METRICS, PARTITION_ID
from fgl_flower.records import array_numpy, array_of, require_record
from fgl_flower.strategies.aggregation import weighted_mean_arrays
from fgl_flower.strategies.fedavg import FedAvgStrategy


def nova_average(current: dict[str, np.ndarray], uploads: Sequence[dict[str, np.ndarray]],
                 weights: Sequence[float], steps: Sequence[float]) -> dict[str, np.ndarray]:
    """:math:`w - \\tau_{eff} \\sum_k p_k (w - w_k) / a_k` per array (float64, cast back to
    each array's dtype; a client that took no step adds no update, its a_k = 0 counts in
    :math:`\\tau_{eff}`)."""
    p = np.asarray(weights, dtype=np.float64)
    if p.sum() <= 0:
        raise FGLError("FedNova: the clients' weights sum to zero.")
    p = p / p.sum()
    a = np.asarray(steps, dtype=np.float64)
    tau_eff = float((p * a).sum())
    out = {}
    for key, w in current.items():
        w64 = w.astype(np.float64)
        acc = np.zeros_like(w64)
        for pk, ak, up in zip(p, a, uploads):
            if ak > 0:
                acc += (pk / ak) * (w64 - up[key].astype(np.float64))
        out[key] = (w64 - tau_eff * acc).astype(w.dtype)
    return out


class FedNovaStrategy(FedAvgStrategy):
    """FedAvg's rounds; :meth:`aggregate_train` is the normalized average."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.spread = 1.0

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        start = self.sent if len(self.sent) else self.start_model(replies)
        records = [require_record(r.content, ARRAYS, ArrayRecord) for r in replies]
        weights = self.aggregation_weights(server_round, replies)
        steps = [float(require_record(r.content, METRICS, MetricRecord)[STEPS]) for r in replies]
        floats = [k for k in start.keys() if np.issubdtype(array_numpy(start[k]).dtype, np.floating)]
        mean = weighted_mean_arrays(records, weights)  # integer arrays: FedAvg's mean
        nova = nova_average({k: array_numpy(start[k]) for k in floats},
                            [{k: array_numpy(rec[k]) for k in floats} for rec in records], weights, steps)
        out = ArrayRecord({k: array_of(nova[k]) if k in nova else mean[k] for k in start.keys()})
        moved = [s for s in steps if s > 0]
        self.spread = max(moved) / min(moved) if moved else 1.0
        return out, self.aggregate_train_metrics(replies)

    @staticmethod
    def start_model(replies: list[Message]) -> ArrayRecord:
        """Round 1's :math:`w_0`: the model every client built from the run seed and sent back
        (:data:`~fgl_flower.clients.fednova.START`); they must agree, or the update
        :math:`w - w_k` of some client is measured from a model it did not start from."""
        starts = [require_record(r.content, START, ArrayRecord) for r in replies]
        pids = [int(require_record(r.content, METRICS, MetricRecord)[PARTITION_ID]) for r in replies]
        first = {k: array_numpy(v) for k, v in starts[0].items()}
        for pid, other in zip(pids[1:], starts[1:]):
            if other.keys() != first.keys() or any(not np.array_equal(first[k], array_numpy(other[k]))
                                                   for k in first):
                raise FGLError(f"FedNova: the clients started round 1 from different models (partition "
                               f"{pid} differs from partition {pids[0]}); each builds it from the run seed, "
                               "so run every client with the same code and run config.")
        return starts[0]

    def server_probes(self, server_round: int) -> dict[str, float]:
        return {"steps.spread": self.spread}

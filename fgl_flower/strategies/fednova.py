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
back once (:data:`~fgl_flower.protocol.START`), and a strict majority of the copies must agree
(:meth:`~fgl_flower.strategies.fedavg.FedAvgStrategy.agreed_start`; a client whose copy
differs is refused). Integer arrays (counters) take FedAvg's mean.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from flwr.app import ArrayRecord, Message, MessageType, MetricRecord

from fgl_flower.errors import FGLError
from fgl_flower.methods.fednova import STEPS
from fgl_flower.protocol import ARRAYS, METRICS
from fgl_flower.records import array_numpy, array_of, require_record
from fgl_flower.strategies.aggregation import weighted_mean_arrays
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.grid import reply_partition_id
from fgl_flower.strategies.screening import local_steps_problem


def nova_average(
    current: dict[str, np.ndarray],
    uploads: Sequence[dict[str, np.ndarray]],
    weights: Sequence[float],
    steps: Sequence[float],
) -> dict[str, np.ndarray]:
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

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        start = self.start_of_round(server_round, replies)
        records = [require_record(r.content, ARRAYS, ArrayRecord) for r in replies]
        weights = self.aggregation_weights(server_round, replies)
        steps = [float(require_record(r.content, METRICS, MetricRecord)[STEPS]) for r in replies]
        floats = [
            k for k in start.keys() if np.issubdtype(array_numpy(start[k]).dtype, np.floating)
        ]
        mean = weighted_mean_arrays(records, weights)  # integer arrays: FedAvg's mean
        nova = nova_average(
            {k: array_numpy(start[k]) for k in floats},
            [{k: array_numpy(rec[k]) for k in floats} for rec in records],
            weights,
            steps,
        )
        out = ArrayRecord({k: array_of(nova[k]) if k in nova else mean[k] for k in start.keys()})
        moved = [s for s in steps if s > 0]
        self.spread = max(moved) / min(moved) if moved else 1.0
        return out, self.aggregate_train_metrics(replies)

    def screen(
        self, server_round: int, messages: list[Message], replies: list[Message]
    ) -> dict[int, str]:
        """FedAvg's checks, and each train reply's step count :math:`a_k` (it scales every
        client's update through :math:`\tau_{eff}`): on node tasks (full batch) exactly
        ``local-epochs``; on graph tasks ``local-epochs`` times the batches of the client's
        training examples where ``agg-weight = train`` reports them, else a whole multiple of
        ``local-epochs`` up to that of :data:`~fgl_flower.strategies.screening.MAX_EXAMPLES`
        examples (the client's word)."""
        refused = super().screen(server_round, messages, replies)
        for r in replies:
            pid = reply_partition_id(r)
            if pid in refused or r.metadata.message_type != MessageType.TRAIN:
                continue
            if (
                why := local_steps_problem(
                    require_record(r.content, METRICS, MetricRecord), STEPS, self.cfg
                )
            ) is not None:
                refused[pid] = why
        return refused

    def needs_start(self) -> bool:
        """:math:`w` is what every update is measured from: always needed."""
        return True

    def server_probes(self, server_round: int) -> dict[str, float]:
        return {"steps.spread": self.spread}

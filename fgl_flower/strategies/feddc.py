r"""FedDC server (Gao et al., CVPR 2022): SCAFFOLD's (:mod:`fgl_flower.strategies.scaffold`:
the control variate :math:`c`, each :math:`\Delta c_i` checked against its upload) with the
local drifts added back to the global model:

.. math::
    h_i \leftarrow h_i + (\theta_i - w) \ \ (i \in S), \qquad
    w \leftarrow \bar\theta + \frac{1}{N} \sum_{i=1}^{N} h_i,

:math:`\bar\theta` FedAvg's mean of the uploads :math:`\theta_i` and the drift mean over every
client that exists (the official code's ``parameter_drifts``). The server tracks each
client's :math:`h_i` from the uploads and the models it sent, as each client does, so no
client reports it; the ``[N, P]`` drifts are checkpointed.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, Message, MetricRecord

from fgl_flower.protocol import ARRAYS
from fgl_flower.records import array_numpy, array_of, require_record
from fgl_flower.strategies.grid import reply_partition_id
from fgl_flower.strategies.scaffold import ScaffoldStrategy, flat, float_keys, unflat


class FedDCStrategy(ScaffoldStrategy):
    """SCAFFOLD's rounds; the global model is the clients' mean plus their mean drift."""

    checkpointed = ScaffoldStrategy.checkpointed + ("drifts",)

    probe_prefix = "feddc"

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        #: ``[N, P]``: every client's drift :math:`h_i` (float32), ``None`` before round 1
        self.drifts: np.ndarray | None = None
        self.drift_share = 0.0

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        mean, metrics = super().aggregate_train(server_round, replies)
        start = self.start_of_round(server_round, replies)
        keys = float_keys(start)
        w = flat(start, keys)
        population = max(len(self.nodes), 1 + max(reply_partition_id(r) for r in replies))
        if self.drifts is None:
            self.drifts = np.zeros((population, len(w)), dtype=np.float32)
        for r in replies:
            theta = flat(require_record(r.content, ARRAYS, ArrayRecord), keys)
            row = reply_partition_id(r)
            self.drifts[row] = (self.drifts[row].astype(np.float64) + theta - w).astype(np.float32)
        shift = self.drifts.astype(np.float64).mean(axis=0)
        model = flat(mean, keys) + shift
        self.drift_share = float(np.linalg.norm(shift) / max(np.linalg.norm(model), 1e-12))
        parts = unflat(model, start, keys)
        out = ArrayRecord(
            {
                k: array_of(parts[k].astype(array_numpy(start[k]).dtype)) if k in parts else mean[k]
                for k in mean.keys()
            }
        )
        return out, metrics

    def server_probes(self, server_round: int) -> dict[str, float]:
        return {**super().server_probes(server_round), "feddc.drift-share": self.drift_share}

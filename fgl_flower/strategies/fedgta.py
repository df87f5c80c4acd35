r"""FedGTA server (Li et al., VLDB 2024): personalised averages over the clients whose
propagated soft labels have similar moments, weighted by their smoothing confidence.

Each round, from the uploads :math:`\mathbf W_j`, moment vectors :math:`\mathbf m_j` and
smoothing confidences :math:`w_j` (:mod:`fgl_flower.clients.fedgta`) of the clients that
trained, client :math:`i`'s model is

.. math::
    A_i = \{j : \cos(\mathbf m_i, \mathbf m_j) > \theta\} \cup \{i\}, \qquad
    \bar{\mathbf W}_i = \sum_{j\in A_i}\frac{w_j}{\sum_{l\in A_i} w_l}\mathbf W_j

(:math:`\theta` = ``fedgta.accept``; the authors' code lets a client in through its own
similarity of 1, here it is in by construction). A client trains and is evaluated next
with its :math:`\bar{\mathbf W}_i` of the last round it trained; one that has not trained
yet receives nothing and keeps its seeded model (there is no global model). The models
travel in one :class:`ArrayRecord` under ``client<i>.<key>``, so a checkpoint holds them.
Each round's record keeps the similarities, the aggregation sets and the confidences
(``fedgta``); the probes ``fedgta.accepted`` and ``fedgta.similarity-spread`` say how far
the selection is from local training (nobody else accepted) and from one FedAvg (all).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, Message, MessageType, MetricRecord

from fgl_flower.config import RunConfig
from fgl_flower.errors import FGLError
from fgl_flower.methods.fedgta import STATISTICS, FedGTAOptions
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import array_numpy, get_record, prefixed, require_record, sub_record
from fgl_flower.strategies.aggregation import weighted_mean_arrays
from fgl_flower.strategies.grid import reply_partition_id
from fgl_flower.strategies.multi_model import MultiModelStrategy, client_owner
from fgl_flower.strategies.screening import nonnegative_problem, values_of


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """``[m, m]`` cosine similarities of the rows of ``vectors [m, d]`` (0 for a zero row)."""
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1)
    return (v @ v.T) / np.maximum(np.outer(norms, norms), 1e-12)


def aggregation_sets(similarity: np.ndarray, accept: float) -> list[list[int]]:
    """Row ``i``: the indices ``j`` with ``similarity[i, j] > accept``, and ``i`` itself."""
    return [
        sorted(set(np.flatnonzero(row > accept).tolist()) | {i}) for i, row in enumerate(similarity)
    ]


class FedGTAStrategy(MultiModelStrategy):
    """Topology-aware personalised averaging (module docstring)."""

    checked_uploads = {MessageType.TRAIN: (ARRAYS, STATISTICS)}

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        """The smoothing confidence (the clients' averaging weight) must be at least 0; its
        size is the client's word (it grows with the client's degrees, which the server
        does not know)."""
        if reply.metadata.message_type != MessageType.TRAIN:
            return None
        return nonnegative_problem(
            values_of(get_record(reply.content, STATISTICS, ArrayRecord), "confidence"),
            f"{STATISTICS}/confidence",
        )

    #: Round ``r``'s evaluation of client ``i`` is of the model its round ``r + 1`` train
    #: message carries, :math:`\bar{\mathbf W}_i`, loaded before it trains.
    evaluate_with_next_train = True

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.opts = FedGTAOptions.from_config(cfg)
        self.last: dict = {}  # this round's similarities, sets and confidences (for the record)

    def model_for(self, arrays: ArrayRecord, partition_id: int) -> ArrayRecord:
        """The client's own average (nothing before it first trained: its seeded model)."""
        return sub_record(arrays, client_owner(partition_id))

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        uploads = [require_record(r.content, ARRAYS, ArrayRecord) for r in replies]
        stats = [require_record(r.content, STATISTICS, ArrayRecord) for r in replies]
        moments = np.stack([array_numpy(s["moments"]) for s in stats])
        confidence = np.array([float(array_numpy(s["confidence"])[0]) for s in stats])
        pids = [reply_partition_id(r) for r in replies]
        sim = cosine_matrix(moments)
        sets = aggregation_sets(sim, self.opts.accept)
        out = dict(self.models.items())
        for i, members in enumerate(sets):
            weights = confidence[members]
            if not weights.sum() > 0:
                raise FGLError(
                    f"Round {server_round}: FedGTA cannot weight client {pids[i]}'s average: the "
                    f"smoothing confidence of every client in it ({', '.join(str(pids[j]) for j in members)}) "
                    f"is zero, which happens only when their subgraphs have no edges. Use a "
                    f"partition that leaves each client some edges."
                )
            out.update(
                prefixed(
                    weighted_mean_arrays([uploads[j] for j in members], weights.tolist()),
                    client_owner(pids[i]),
                )
            )
        self.models = ArrayRecord(out)
        self.last = {
            "clients": pids,
            "similarity": np.round(sim, 6).tolist(),
            "sets": [[pids[j] for j in s] for s in sets],
            "confidence": [round(float(c), 6) for c in confidence],
        }
        return self.models, self.aggregate_train_metrics(replies)

    def round_record(self, server_round: int) -> dict:
        return {"fedgta": self.last} if self.last else {}

    def server_probes(self, server_round: int) -> dict[str, float]:
        m = len(self.last.get("clients", ()))
        if m < 2:  # one client: nobody else to accept
            return {}
        sim = np.array(self.last["similarity"])
        pairs = sim[~np.eye(m, dtype=bool)]
        accepted = np.mean([(len(s) - 1) / (m - 1) for s in self.last["sets"]])
        return {
            "fedgta.accepted": float(accepted),
            "fedgta.similarity-spread": float(pairs.max() - pairs.min()),
        }

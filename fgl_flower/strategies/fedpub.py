r"""FED-PUB server (Baek et al., ICML 2023): personalised weighted averaging by the
similarity of the clients' functional embeddings.

Each round, from the uploads :math:`\mathbf W_j` and functional embeddings
:math:`\mathbf h_j` of the :math:`m` clients that trained (in partition-id order):

.. math::
    S_{ij} = \cos(\mathbf h_i, \mathbf h_j), \qquad
    \alpha_{ij} = \frac{\exp(\tau S_{ij})}{\sum_k \exp(\tau S_{ik})}, \qquad
    \bar{\mathbf W}_i = \sum_j \alpha_{ij}\mathbf W_j

(``fedpub.agg-norm = "cosine"``: :math:`\alpha_{ij} = S_{ij} / \sum_k S_{ik}`, the code's
other choice), :math:`\tau` = ``fedpub.norm-scale``; and the global model
:math:`\sum_j \frac{n_j}{\sum_k n_k}\mathbf W_j` (:math:`n_j` training nodes). A client
trains next from its personalised :math:`\bar{\mathbf W}_i` of the last round it trained,
or from the global model if it has none yet (the official server's
``personalized_<id>``/``global``). The models travel in one :class:`ArrayRecord` under
``global.<key>`` and ``client<i>.<key>``, so a checkpoint holds them. Each round's record
keeps the similarity and weight matrices (``fedpub``), and the probes
``fedpub.weight-spread``, ``fedpub.self-weight`` and ``fedpub.similarity-spread`` say how
far the personalisation is from a plain average.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, Message, MessageType, MetricRecord

from fgl_flower.config import RunConfig
from fgl_flower.errors import FGLError
from fgl_flower.methods.fedpub import EMBEDDING, FedPubOptions
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import array_numpy, prefixed, require_record, sub_record
from fgl_flower.strategies.aggregation import weighted_mean_arrays
from fgl_flower.strategies.grid import reply_partition_id
from fgl_flower.strategies.multi_model import MultiModelStrategy, client_owner

GLOBAL = "global"


def personalization_weights(
    embeddings: np.ndarray, tau: float, norm: str = "exp"
) -> tuple[np.ndarray, np.ndarray]:
    r"""``(S, alpha)``, both ``[m, m]``, of the rows of ``embeddings [m, H]``: cosine
    similarities (SciPy's ``1 - cosine``, as the official server computes them) and the
    row-normalised :math:`\exp(\tau S)` (``norm="exp"``) or :math:`S` (``"cosine"``)."""
    e = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(e, axis=1)
    sim = (e @ e.T) / np.maximum(np.outer(norms, norms), 1e-12)  # a zero embedding: 0
    weights = np.exp(tau * sim) if norm == "exp" else sim
    sums = weights.sum(axis=1, keepdims=True)
    if norm == "cosine" and (sums <= 0).any():  # the official code divides by it regardless
        raise FGLError(
            "fedpub.agg-norm=cosine: a client's similarities sum to zero or less (its "
            "functional embedding points away from the others'), so they cannot be "
            "its averaging weights; use fedpub.agg-norm=exp."
        )
    return sim, weights / sums


class FedPubStrategy(MultiModelStrategy):
    """Personalised averages by functional-embedding similarity (module docstring)."""

    checked_uploads = {MessageType.TRAIN: (ARRAYS, EMBEDDING)}

    evaluates_in_train = True  # a client evaluates the model it trained (the code's log)
    #: ``fedpub.evaluate = "received"``: round ``r``'s evaluation is of the personalised model
    #: round ``r + 1``'s train message carries (the last round's: an evaluate message).
    evaluate_with_next_train = True

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.opts = FedPubOptions.from_config(cfg)
        self.evaluates_in_train = self.opts.evaluate == "trained"
        self.last: dict = {}  # this round's similarities and weights (for the record)

    def model_for(self, arrays: ArrayRecord, partition_id: int) -> ArrayRecord:
        """The client's personalised model, else the global one (round 1: none, the clients
        start from the seeded model)."""
        return sub_record(arrays, client_owner(partition_id)) or sub_record(arrays, GLOBAL)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        uploads = [require_record(r.content, ARRAYS, ArrayRecord) for r in replies]
        sizes = [self.reply_weight(r) for r in replies]
        embeddings = np.stack(
            [
                array_numpy(require_record(r.content, EMBEDDING, ArrayRecord)["embedding"])
                for r in replies
            ]
        )
        sim, alpha = personalization_weights(embeddings, self.opts.norm_scale, self.opts.agg_norm)
        pids = [reply_partition_id(r) for r in replies]
        out = {k: v for k, v in self.models.items() if not k.startswith(f"{GLOBAL}.")}
        out.update(prefixed(weighted_mean_arrays(uploads, sizes), GLOBAL))
        for i, pid in enumerate(pids):
            out.update(
                prefixed(weighted_mean_arrays(uploads, alpha[i].tolist()), client_owner(pid))
            )
        self.models = ArrayRecord(out)
        self.last = {
            "clients": pids,
            "similarity": np.round(sim, 6).tolist(),
            "weights": np.round(alpha, 6).tolist(),
        }
        return self.models, self.aggregate_train_metrics(replies)

    def round_record(self, server_round: int) -> dict:
        return {"fedpub": self.last} if self.last else {}

    def server_probes(self, server_round: int) -> dict[str, float]:
        if len(self.last.get("clients", ())) < 2:  # one client: nothing to personalise
            return {}
        sim, alpha = np.array(self.last["similarity"]), np.array(self.last["weights"])
        pairs = sim[~np.eye(len(sim), dtype=bool)]  # two different clients
        return {
            "fedpub.weight-spread": float((alpha.max(axis=1) - alpha.min(axis=1)).mean()),
            "fedpub.self-weight": float(np.diag(alpha).mean()),
            "fedpub.similarity-spread": float(pairs.max() - pairs.min()),
        }

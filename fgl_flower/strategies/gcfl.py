r"""GCFL server (Xie et al., NeurIPS 2021): clustered FL driven by the clients' updates.

The server keeps a partition of the clients into clusters (one cluster of all at first)
and one model :math:`W_c` per cluster. Each round every client trains from its cluster's
model; with :math:`W_i` its upload, :math:`dW_i = W_i - W_{c(i)}`. A cluster :math:`c` is
split in two when

.. math::
    \Big\lVert \tfrac{1}{|c|}\textstyle\sum_{i\in c} dW_i \Big\rVert < \varepsilon_1,\quad
    \max_{i\in c}\lVert dW_i\rVert > \varepsilon_2,\quad |c| \ge 3,\quad t > 20

(the clients' updates cancel out although some are large: they pull apart), by a
Stoer-Wagner minimum cut of the complete graph on :math:`c` with edge weights
:math:`\cos(dW_i, dW_j) + 1`. Then every cluster averages its clients' uploads,

.. math::
    W_c \leftarrow W_c + \sum_{j\in c} \frac{n_j}{n_c}\, dW_j = \sum_{j\in c} \frac{n_j}{n_c}\, W_j .

GCFL+ (``gcfl.variant = "gcfl+"``, the same paper's sequence-based variant) keeps, per
client, the sequence of the norms of its last local gradient of the shared parameters
(``gcfl.sequence = "grad"``; ``"update"``: of :math:`dW_i`), one entry per round it
trains. Its split needs, besides the criterion above, ``gcfl.seq-length`` entries for every
client of the cluster; it cuts the complete graph on :math:`c` with edge weights
:math:`\max D - D_{ij}`, :math:`D` the DTW distances (:func:`dtw`) of the clients' last
``seq-length`` entries; after a split every client's sequence starts afresh (so at most one
split per round). Node tasks use ``gcfl.eps1-node``/``gcfl.eps2-node`` instead of
``gcfl.eps1``/``gcfl.eps2`` (docs/methods/gcfl.md: the graph values never fire there).

GCFL reports, per client, the best of the test accuracies cached at its cluster's splits
(those of the last evaluation before the split) and the final one: ``test_acc_gcfl``
beside the usual final accuracy (spec §12 item 15); graph regression likewise the lowest
test MSE, ``test_mse_gcfl``. The cluster models travel in one
:class:`ArrayRecord` under ``cluster<k>.<key>``, so a checkpoint holds them with the
assignment; each round's record lists the clusters, each cluster's mean and largest update
norm (``update_norms``, what the split rule reads) and the splits (GCFL+: also each
client's sequence entry of the round, ``seq_norms``, and a split's DTW distances). The
probe ``clusters`` counts the clusters after each round.
"""

from __future__ import annotations

from collections.abc import Iterable
from logging import INFO

import numpy as np
from flwr.app import ArrayRecord, Message, MetricRecord
from flwr.supercore import log

from fgl_flower.config import RunConfig
from fgl_flower.methods.gcfl import GRAD_NORM, GCFLOptions, run_level
from fgl_flower.protocol import ARRAYS, METRICS
from fgl_flower.records import array_numpy, prefixed, require_record, sub_record
from fgl_flower.strategies.aggregation import weighted_mean_arrays
from fgl_flower.strategies.base import client_metrics
from fgl_flower.strategies.grid import reply_partition_id
from fgl_flower.strategies.multi_model import MultiModelStrategy
from fgl_flower.tasks import lower_is_better


def cluster_owner(cluster: int) -> str:
    return f"cluster{cluster}"


def flat_update(upload: ArrayRecord, base: ArrayRecord) -> np.ndarray:
    """:math:`dW = W - W_c`, flattened over the keys in order (float64)."""
    return np.concatenate(
        [
            (
                array_numpy(upload[k]).astype(np.float64) - array_numpy(base[k]).astype(np.float64)
            ).ravel()
            for k in upload
        ]
    )


def similarity(updates: np.ndarray) -> np.ndarray:
    r"""``[m, m]`` :math:`\cos(dW_i, dW_j) + 1` of the rows of ``updates [m, P]`` (GCFL's
    ``pairwise_angles``: norms' product clipped below at 1e-12)."""
    norms = np.linalg.norm(updates, axis=1)
    return updates @ updates.T / np.maximum(np.outer(norms, norms), 1e-12) + 1.0


def min_cut_split(weights: np.ndarray) -> tuple[list[int], list[int]]:
    """The two sides (row indices, ascending) of a Stoer-Wagner minimum cut of the complete
    graph with edge weights ``weights [m, m]``."""
    import networkx as nx

    g = nx.Graph()
    m = weights.shape[0]
    g.add_nodes_from(range(m))
    g.add_weighted_edges_from(
        (i, j, float(weights[i, j])) for i in range(m) for j in range(i + 1, m)
    )
    _, (a, b) = nx.stoer_wagner(g)
    a, b = sorted(a), sorted(b)
    return (a, b) if a[0] < b[0] else (b, a)


def dtw(a: np.ndarray, b: np.ndarray) -> float:
    r"""Dynamic-time-warping distance of the 1-d sequences ``a`` (length :math:`n`) and ``b``
    (length :math:`m`), as the GCFL code's ``dtaidistance.dtw`` computes it by default (no
    window, no penalty): with :math:`C_{0,0} = 0`, :math:`C_{i,0} = C_{0,j} = \infty` and

    .. math::
        C_{i,j} = (a_i - b_j)^2 + \min(C_{i-1,j-1},\ C_{i-1,j},\ C_{i,j-1}),

    the distance is :math:`\sqrt{C_{n,m}}` (the Euclidean distance along the cheapest
    monotone alignment; equal-length sequences give at most their Euclidean distance)."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        raise ValueError("dtw needs two non-empty sequences.")
    cost = np.full((n + 1, m + 1), np.inf)
    cost[0, 0] = 0.0
    sq = (a[:, None] - b[None, :]) ** 2
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost[i, j] = sq[i - 1, j - 1] + min(cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1])
    return float(np.sqrt(cost[n, m]))


def dtw_distances(seqs: np.ndarray, standardize: bool = False) -> np.ndarray:
    """``[m, m]`` pairwise :func:`dtw` distances of the rows of ``seqs [m, L]`` (zero
    diagonal); ``standardize`` first divides each row by its standard deviation (the GCFL
    code's ``--standardize``: compare trends, not levels; a constant row stays as is)."""
    seqs = np.asarray(seqs, dtype=np.float64)
    if standardize:
        std = seqs.std(axis=1, keepdims=True)
        seqs = seqs / np.where(std > 0, std, 1.0)
    m = seqs.shape[0]
    d = np.zeros((m, m))
    for i in range(m):
        for j in range(i + 1, m):
            d[i, j] = d[j, i] = dtw(seqs[i], seqs[j])
    return d


class GCFLStrategy(MultiModelStrategy):
    """Clustered FedAvg with GCFL's split rule (spec §10), or GCFL+'s (``gcfl.variant``)."""

    evaluate_with_next_train = True
    checkpointed = ("clusters", "cached_acc", "last_acc", "seqs", "seq_count")

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        #: the test metric GCFL caches at splits (accuracy; regression: MSE, lower is better)
        self.primary = "test_" + self.task.select_by.removeprefix("val_")
        self.best = np.nanmin if lower_is_better(self.primary) else np.nanmax
        self.eval_metrics[f"{self.primary}_gcfl"] = "num-test"
        self.opts = GCFLOptions.from_config(cfg)
        self.plus = self.opts.variant == "gcfl+"
        self.level = run_level(cfg)
        self.eps1, self.eps2 = self.opts.thresholds(self.level)
        n = cfg.num_clients
        self.clusters = np.zeros(n, dtype=np.int64)  # cluster id of each partition
        self.cached_acc = np.full(n, np.nan)  # best test value cached at a split (primary)
        self.last_acc = np.full(n, np.nan)  # test value of the last evaluation
        self.splits: list[dict] = []  # this round's splits (for the round record)
        self.norms: list[dict] = []  # this round's update norms per cluster (ditto)
        # GCFL+: each client's last seq-length sequence entries (oldest first) and how many
        # it has had since the last split
        self.seqs = np.zeros((n, self.opts.seq_length))
        self.seq_count = np.zeros(n, dtype=np.int64)
        self.seq_now: dict[int, float] = {}  # this round's entries (for the round record)
        self.dtw_last = np.zeros((0, 0))  # the DTW distances of the last split (ditto)

    def summary(self) -> None:
        super().summary()
        o = self.opts
        log(
            INFO,
            "GCFL variant=%s on a %s task: split when mean update norm < %g, max > %g, "
            "round > %d, size >= %d%s",
            o.variant,
            self.level,
            self.eps1,
            self.eps2,
            o.split_after,
            o.min_split_size,
            f", {o.seq_length} {o.sequence}-norm entries (DTW)" if self.plus else "",
        )

    # -- per-cluster messages --------------------------------------------------------------
    @staticmethod
    def cluster_arrays(arrays: ArrayRecord, cluster: int) -> ArrayRecord:
        """Cluster ``cluster``'s model from the record of all (empty before round 1's
        aggregation: the clients start from the same seeded model)."""
        return sub_record(arrays, cluster_owner(cluster))

    def model_for(self, arrays: ArrayRecord, partition_id: int) -> ArrayRecord:
        """The model of the client's cluster."""
        return self.cluster_arrays(arrays, int(self.clusters[partition_id]))

    # -- clustering and aggregation --------------------------------------------------------
    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        self.splits, self.norms = [], []
        uploads = {
            reply_partition_id(r): require_record(r.content, ARRAYS, ArrayRecord) for r in replies
        }
        weights = {reply_partition_id(r): self.reply_weight(r) for r in replies}
        if self.plus:
            self._extend_sequences(uploads, replies)
        out: dict = {}
        next_id = int(self.clusters.max()) + 1
        for c in sorted(set(self.clusters.tolist())):
            members = [int(p) for p in np.flatnonzero(self.clusters == c)]
            base = self.cluster_arrays(self.models, c)
            groups = [(c, members)]
            # updates only on a full view of the cluster, once the server holds its model
            if len(base) and all(p in uploads for p in members):
                updates = np.stack([flat_update(uploads[p], base) for p in members])
                mean_norm = float(np.linalg.norm(updates.mean(axis=0)))
                max_norm = float(np.linalg.norm(updates, axis=1).max())
                self.norms.append({"cluster": c, "mean_norm": mean_norm, "max_norm": max_norm})
                if self._splits_now(server_round, members, mean_norm, max_norm):
                    a, b = self._split(c, members, self._cut_weights(members, updates), next_id)
                    groups = [(c, a), (next_id, b)]
                    next_id += 1
            for cid, group in groups:
                self.clusters[group] = cid
                trained = [p for p in group if p in uploads]
                model = (
                    weighted_mean_arrays(
                        [uploads[p] for p in trained], [weights[p] for p in trained]
                    )
                    if trained
                    else base
                )  # a cluster none of whose clients trained keeps its model
                out.update(prefixed(model, cluster_owner(cid)))
        self.models = ArrayRecord(out)
        return self.models, self.aggregate_train_metrics(replies)

    def _extend_sequences(self, uploads: dict[int, ArrayRecord], replies: list[Message]) -> None:
        """GCFL+: append this round's entry to the sequence of every client that trained."""
        self.seq_now = {}
        if self.opts.sequence == "grad":
            key = GRAD_NORM
            for r in replies:
                metrics = require_record(r.content, METRICS, MetricRecord)
                if key not in metrics:
                    raise RuntimeError(f"GCFL+ client {reply_partition_id(r)} sent no {key!r}.")
                self.seq_now[reply_partition_id(r)] = float(metrics[key])
        else:  # the update's norm, known once the server holds the client's cluster model
            for p, upload in uploads.items():
                base = self.cluster_arrays(self.models, int(self.clusters[p]))
                if len(base):
                    self.seq_now[p] = float(np.linalg.norm(flat_update(upload, base)))
        for p, value in self.seq_now.items():
            self.seqs[p] = np.roll(self.seqs[p], -1)
            self.seqs[p, -1] = value
            self.seq_count[p] += 1

    def _splits_now(
        self, server_round: int, members: list[int], mean_norm: float, max_norm: float
    ) -> bool:
        """GCFL's criterion: late enough, big enough, updates cancelling out but large;
        GCFL+ also needs ``seq-length`` entries for every client of the cluster."""
        o = self.opts
        return (
            server_round > o.split_after
            and len(members) >= o.min_split_size
            and mean_norm < self.eps1
            and max_norm > self.eps2
            and (not self.plus or bool(np.all(self.seq_count[members] >= o.seq_length)))
        )

    def _cut_weights(self, members: list[int], updates: np.ndarray) -> np.ndarray:
        """Edge weights of the min cut: GCFL's ``cos + 1`` of the updates, or GCFL+'s
        ``max D - D`` of the DTW distances ``D`` of the clients' sequences."""
        if not self.plus:
            return similarity(updates)
        distances = dtw_distances(self.seqs[members], self.opts.standardize)
        self.dtw_last = distances
        return distances.max() - distances

    def _split(
        self, cluster: int, members: list[int], weights: np.ndarray, new_id: int
    ) -> tuple[list[int], list[int]]:
        a, b = min_cut_split(weights)
        for p in members:  # GCFL caches the accuracies of the last evaluation
            if np.isfinite(self.last_acc[p]):
                self.cached_acc[p] = self.best([self.cached_acc[p], self.last_acc[p]])
        kept, moved = [members[i] for i in a], [members[i] for i in b]
        split = {"cluster": cluster, "kept": kept, "new_cluster": new_id, "moved": moved}
        if self.plus:  # the distances it cut by; every sequence starts afresh
            split["dtw"] = [[round(float(x), 6) for x in row] for row in self.dtw_last]
            self.seq_count[:] = 0
        self.splits.append(split)
        return kept, moved

    def round_record(self, server_round: int) -> dict:
        clusters = [
            [int(p) for p in np.flatnonzero(self.clusters == c)]
            for c in sorted(set(self.clusters.tolist()))
        ]
        return {
            "clusters": clusters,
            **({"update_norms": self.norms} if self.norms else {}),
            **(
                {"seq_norms": {str(p): v for p, v in sorted(self.seq_now.items())}}
                if self.plus
                else {}
            ),
            **({"splits": self.splits} if self.splits else {}),
        }

    def server_probes(self, server_round: int) -> dict[str, float]:
        """``clusters``: the number of clusters after this round's aggregation."""
        return {"clusters": float(len(np.unique(self.clusters)))}

    # -- evaluation ------------------------------------------------------------------------
    def eval_client_metrics(self, replies: Iterable[Message]) -> dict[int, dict[str, float]]:
        """The clients' metrics plus ``test_acc_gcfl`` (regression: ``test_mse_gcfl``): per
        client the best of its cached values and this one (GCFL's reporting rule)."""
        per_client = client_metrics(replies)
        for pid, m in per_client.items():
            m[f"{self.primary}_gcfl"] = float(self.best([self.cached_acc[pid], m[self.primary]]))
        return per_client

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord:
        """The usual metrics plus ``test_acc_gcfl``'s; remembers each client's accuracy for
        the cache of the next split."""
        per_client = self.eval_client_metrics(replies)
        for pid, m in per_client.items():
            self.last_acc[pid] = m[self.primary]
        return MetricRecord(self.aggregate_evaluate_values(list(per_client.values())))

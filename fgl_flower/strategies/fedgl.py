r"""FedGL server (Chen, Hu, Xu and Zheng, "FedGL: Federated Graph Learning Framework with
Global Self-Supervision", Information Sciences 2024): FedAvg of the models, and the global
pseudo-labels.

From the clients' uploaded predictions :math:`p_i(v)` (:data:`~fgl_flower.methods.fedgl.
PREDICTIONS`, by global node id), with :math:`r_i` each client's weight (its aggregation
weight under ``pred-weight = sampling-rate``, 1 under ``mean``) and :math:`\theta` =
``fedgl.threshold``,

.. math::
    q(v) = \frac{\sum_{i \ni v} r_i\, p_i(v)\,[p_i(v) \ge \theta]}{\sum_{i \ni v} r_i},
    \qquad \hat y(v) = \arg\max_c q_c(v) \ \text{ where } \textstyle\sum_c q_c(v) > 0,

so a node gets a pseudo-label where some client that holds it predicts a class with
probability at least :math:`\theta`. Each client receives the labels of its own nodes with
the next round's train message (:data:`~fgl_flower.methods.fedgl.PSEUDO`).

With ``fedgl.graph-weight`` :math:`\lambda > 0`, the pseudo-graph: the uploaded embeddings
(each client's logits) are fused the same way, :math:`e(v) = \sum_{i \ni v} r_i e_i(v) /
\sum_{i \ni v} r_i`, over the uploaded nodes; then (OpenFGL's construction)

.. math::
    Z_{j\cdot} = \frac{\mathrm{top}_k\big(\max(e(j)^\top e(\cdot), 0)\big)}
    {\sum \mathrm{top}_k(\ldots)}, \qquad Z_{jj} \leftarrow 1, \qquad
    r_j = \textstyle\sum_i Z_{ji}, \qquad
    w_{j \to i} = \lambda\, \frac{Z_{ji}}{\sqrt{r_j r_i}} \quad (i \ne j),

an edge from every node to each of its ``fedgl.k`` most similar nodes (OpenFGL's
:math:`D^{-1/2} Z^\top D^{-1/2}`: the graph is not symmetric). The similarities are computed
a block of rows at a time, so memory is O(K k), K the nodes uploaded. Each client receives the
block among its own nodes (:data:`~fgl_flower.methods.fedgl.GRAPH`, without the diagonal: its
backbone adds its own self-loops) with the next round's train messages and with evaluate
messages, so a model is evaluated on the graph that the next round trains on (the fused
evaluation sends the same). The labels, the graph and each client's node ids are checkpointed.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)

from fgl_flower.methods.fedgl import GRAPH, PREDICTIONS, PSEUDO, FedGLOptions
from fgl_flower.records import get_record, require_record
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.grid import reply_partition_id
from fgl_flower.strategies.screening import counts_problem, values_of


def fuse_mean(
    values: list[np.ndarray], nodes: list[np.ndarray], rates: list[float]
) -> tuple[np.ndarray, np.ndarray]:
    r"""``(ids [K], mean [K, d])``: the distinct global node ids of the uploads (sorted) and
    :math:`\sum_{i \ni v} r_i x_i(v) / \sum_{i \ni v} r_i` of each, from each client's
    ``values [n_i, d]`` of its global ``nodes [n_i]`` and its ``rates``. Memory grows with the
    nodes uploaded, not with the largest id."""
    ids, inverse = np.unique(np.concatenate(nodes), return_inverse=True)
    total = np.zeros((len(ids), values[0].shape[1]))
    weight = np.zeros(len(ids))
    start = 0
    for x, n, r in zip(values, nodes, rates):
        rows = inverse[start : start + len(n)]
        start += len(n)
        np.add.at(total, rows, r * x)
        np.add.at(weight, rows, r)
    return ids, total / np.maximum(weight, 1e-12)[:, None]


def fuse(
    probs: list[np.ndarray], nodes: list[np.ndarray], rates: list[float], threshold: float
) -> np.ndarray:
    """``[2, K]``: the distinct global node ids of the uploads (sorted) and their pseudo-labels
    (-1: none), from each client's ``probs [n_i, C]`` of its global ``nodes [n_i]`` and its
    ``rates`` (module docstring)."""
    ids, q = fuse_mean([np.where(p >= threshold, p, 0.0) for p in probs], nodes, rates)
    labels = np.where(q.sum(axis=1) > 0, q.argmax(axis=1), -1)
    return np.stack([ids, labels]).astype(np.int64)


def pseudo_graph(
    emb: np.ndarray, k: int, block_entries: int = 1 << 23
) -> tuple[np.ndarray, np.ndarray]:
    r"""The pseudo-graph over the rows of ``emb [K, d]`` (module docstring): ``(edges [2, E],
    weight [E])``, edge ``(j, i)`` from source row ``j`` to target row ``i``, for every
    :math:`i \ne j` among the ``k`` largest positive dot products of row ``j``, with weight
    :math:`Z_{ji} / \sqrt{r_j r_i}`. The similarities are computed ``block_entries`` at a
    time (rows x K), so memory is O(K k) plus one block, never K x K."""
    n = len(emb)
    k = min(k, n)
    nbr = np.empty((n, k), dtype=np.int64)
    val = np.empty((n, k))
    step = max(1, block_entries // max(n, 1))
    for s in range(0, n, step):
        sim = np.maximum(emb[s : s + step] @ emb.T, 0.0)
        idx = (
            np.argpartition(-sim, k - 1, axis=1)[:, :k]
            if k < n
            else np.tile(np.arange(n), (len(sim), 1))
        )
        nbr[s : s + step] = idx
        val[s : s + step] = np.take_along_axis(sim, idx, axis=1)
    total = val.sum(axis=1, keepdims=True)
    z = np.divide(val, total, out=np.zeros_like(val), where=total > 0)  # rows of Z sum to 1
    rows = np.repeat(np.arange(n), k).reshape(n, k)
    off = nbr != rows
    r = 1.0 + np.where(off, z, 0.0).sum(axis=1)  # Z's row sums once its diagonal is 1
    keep = off & (z > 0)
    src, dst = rows[keep], nbr[keep]
    return np.stack([src, dst]), z[keep] / np.sqrt(r[src] * r[dst])


def block_of(
    edges: np.ndarray, weight: np.ndarray, nodes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The edges of ``(edges [2, E], weight [E])`` (global node ids) between two of ``nodes``
    (a client's global ids, in its node order), as positions in ``nodes``, and their weights."""
    if not len(nodes) or not edges.shape[1]:
        return np.zeros((2, 0), dtype=np.int64), np.zeros(0)
    order = np.argsort(nodes, kind="stable")
    ordered = nodes[order]
    at = np.minimum(np.searchsorted(ordered, edges), len(nodes) - 1)
    local = np.where(ordered[at] == edges, order[at], -1)
    keep = (local >= 0).all(axis=0)
    return local[:, keep].astype(np.int64), weight[keep]


def labels_of(fused: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The pseudo-labels of ``nodes`` (global ids) in ``fused`` (:func:`fuse`), -1 where none."""
    ids, labels = fused
    if not len(ids):
        return np.full(len(nodes), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(ids, nodes), len(ids) - 1)
    return np.where(ids[at] == nodes, labels[at], -1).astype(np.int64)


def classes_of(reply: Message) -> tuple[int, ...]:
    """The class dimension of a reply's uploaded probabilities (every client's must agree)."""
    return tuple(
        np.shape(values_of(get_record(reply.content, PREDICTIONS, ArrayRecord), "probs"))[1:]
    )


class FedGLStrategy(FedAvgStrategy):
    """FedAvg plus the pseudo-label fusion (module docstring)."""

    checkpointed = FedAvgStrategy.checkpointed + (
        "labels",
        "client_node_ids",
        "client_node_offsets",
        "graph_edges",
        "graph_weight",
    )

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = FedGLOptions.from_config(cfg)
        self.labels: np.ndarray | None = None  # [2, K]: node ids and their pseudo-labels
        self.client_nodes: dict[int, np.ndarray] = {}  # partition id -> its global node ids
        # the pseudo-graph (graph-weight > 0): edges [2, E] (global ids) and weights [E]
        self.graph_edges: np.ndarray | None = None
        self.graph_weight: np.ndarray | None = None

    # -- the client node lists, checkpointed as one array and offsets ----------------------------
    @property
    def client_node_ids(self) -> np.ndarray | None:
        if not self.client_nodes:
            return None
        return np.concatenate([self.client_nodes[p] for p in sorted(self.client_nodes)])

    @client_node_ids.setter
    def client_node_ids(self, value) -> None:
        self._flat_nodes = value

    @property
    def client_node_offsets(self) -> np.ndarray | None:
        """``[[partition id, start, end], ...]`` of :attr:`client_node_ids` (restored after it:
        :attr:`checkpointed` lists it second)."""
        if not self.client_nodes:
            return None
        rows, start = [], 0
        for p in sorted(self.client_nodes):
            rows.append([p, start, start + len(self.client_nodes[p])])
            start += len(self.client_nodes[p])
        return np.asarray(rows, dtype=np.int64)

    @client_node_offsets.setter
    def client_node_offsets(self, value) -> None:
        flat = self.__dict__.pop("_flat_nodes", None)
        if value is not None and flat is not None:
            self.client_nodes = {int(p): np.asarray(flat[s:e]) for p, s, e in np.asarray(value)}

    # -- messages ------------------------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid):
        """FedAvg's train messages, each with the pseudo-labels of its client's nodes and the
        pseudo-graph's block among them."""
        messages = super().configure_train(server_round, arrays, config, grid)
        return self.with_own(messages, labels=True)

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid
    ):
        """FedAvg's evaluate messages, each with the pseudo-graph's block among its client's
        nodes: the model is evaluated on the graph it will train on next."""
        messages = super().configure_evaluate(server_round, arrays, config, grid)
        return self.with_own(messages, labels=False)

    def with_own(self, messages: Iterable[Message], labels: bool) -> list[Message]:
        """``messages``, each with its client's pseudo-labels (if ``labels``) and pseudo-graph
        block, where the server has them and knows the client's nodes."""
        messages = list(messages)
        if self.labels is None and self.graph_edges is None:
            return messages
        partition_of = {node: pid for pid, node in self.nodes.items()}
        out = []
        for m in messages:
            own = self.client_nodes.get(partition_of.get(m.metadata.dst_node_id))
            extra = {}
            if own is not None and labels and self.labels is not None:
                extra[PSEUDO] = ArrayRecord({"labels": Array(labels_of(self.labels, own))})
            if own is not None and self.graph_edges is not None:
                edges, weight = block_of(self.graph_edges, self.graph_weight, own)
                extra[GRAPH] = ArrayRecord(
                    {"edges": Array(edges), "weight": Array(weight.astype(np.float32))}
                )
            if extra:
                m = Message(
                    content=RecordDict({**dict(m.content.items()), **extra}),
                    dst_node_id=m.metadata.dst_node_id,
                    message_type=m.metadata.message_type,
                )
            out.append(m)
        return out

    def screen(
        self, server_round: int, messages: list[Message], replies: list[Message]
    ) -> dict[int, str]:
        """FedAvg's checks; every client's predictions must have the classes of the others."""
        refused = super().screen(server_round, messages, replies)
        refused.update(
            self.screen_agreement(
                replies,
                refused,
                MessageType.TRAIN,
                lambda r: tuple(
                    np.shape(values_of(get_record(r.content, PREDICTIONS, ArrayRecord), "probs"))[
                        1:
                    ]
                ),
                f"{PREDICTIONS}/probs' classes",
            )
        )
        return refused

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        """Probabilities must be rows of shares, embeddings finite and one row per node like
        them; node ids whole, distinct, one per row."""
        if reply.metadata.message_type != MessageType.TRAIN:
            return None
        record = get_record(reply.content, PREDICTIONS, ArrayRecord)
        probs, nodes = values_of(record, "probs"), values_of(record, "nodes")
        emb = values_of(record, "embeddings")
        if probs is None or nodes is None or probs.ndim != 2 or nodes.shape != (probs.shape[0],):
            return f"{PREDICTIONS}: not probs [n, C] with nodes [n]"
        if emb is None or emb.shape != probs.shape:
            return f"{PREDICTIONS}: not embeddings [n, C] like probs"
        if not (np.isfinite(probs).all() and np.isfinite(emb).all()):
            return f"{PREDICTIONS}: probs or embeddings not finite"
        if (why := counts_problem(nodes, f"{PREDICTIONS}/nodes")) is not None:
            return why
        if len(np.unique(nodes)) != nodes.size:
            return f"{PREDICTIONS}: node ids repeat"
        if probs.size and (
            probs.min() < 0 or probs.max() > 1 or np.abs(probs.sum(axis=1) - 1).max() > 1e-3
        ):
            return f"{PREDICTIONS}: probs are not rows of probabilities"
        return None

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        arrays, metrics = super().aggregate_train(server_round, replies)
        records = [require_record(r.content, PREDICTIONS, ArrayRecord) for r in replies]
        probs = [values_of(rec, "probs") for rec in records]
        nodes = [values_of(rec, "nodes").astype(np.int64) for rec in records]
        rates = (
            [self.reply_weight(r) for r in replies]
            if self.opts.pred_weight == "sampling-rate"
            else [1.0] * len(replies)
        )
        total = sum(rates) or 1.0
        rates = [r / total for r in rates]
        self.labels = fuse(probs, nodes, rates, self.opts.threshold)
        if self.opts.graph_weight > 0:
            emb = [values_of(rec, "embeddings").astype(np.float64) for rec in records]
            ids, fused = fuse_mean(emb, nodes, rates)
            edges, weight = pseudo_graph(fused, self.opts.k)
            self.graph_edges, self.graph_weight = ids[edges], self.opts.graph_weight * weight
        for r, n in zip(replies, nodes):
            self.client_nodes[reply_partition_id(r)] = n
        return arrays, metrics

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
the next round's train message (:data:`~fgl_flower.methods.fedgl.PSEUDO`). The global labels
and each client's node ids are checkpointed.
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

from fgl_flower.methods.fedgl import PREDICTIONS, PSEUDO, FedGLOptions
from fgl_flower.records import get_record, require_record
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.grid import reply_partition_id
from fgl_flower.strategies.screening import counts_problem, values_of


def fuse(
    probs: list[np.ndarray], nodes: list[np.ndarray], rates: list[float], threshold: float
) -> np.ndarray:
    """``[2, K]``: the distinct global node ids of the uploads (sorted) and their pseudo-labels
    (-1: none), from each client's ``probs [n_i, C]`` of its global ``nodes [n_i]`` and its
    ``rates`` (module docstring). Memory grows with the nodes uploaded, not with the largest id."""
    ids, inverse = np.unique(np.concatenate(nodes), return_inverse=True)
    c = probs[0].shape[1]
    total = np.zeros((len(ids), c))
    weight = np.zeros(len(ids))
    start = 0
    for p, n, r in zip(probs, nodes, rates):
        rows = inverse[start : start + len(n)]
        start += len(n)
        np.add.at(total, rows, r * np.where(p >= threshold, p, 0.0))
        np.add.at(weight, rows, r)
    q = total / np.maximum(weight, 1e-12)[:, None]
    labels = np.where(q.sum(axis=1) > 0, q.argmax(axis=1), -1)
    return np.stack([ids, labels]).astype(np.int64)


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
    )

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = FedGLOptions.from_config(cfg)
        self.labels: np.ndarray | None = None  # [2, K]: node ids and their pseudo-labels
        self.client_nodes: dict[int, np.ndarray] = {}  # partition id -> its global node ids

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
        """FedAvg's train messages, each with the pseudo-labels of its client's nodes."""
        messages = list(super().configure_train(server_round, arrays, config, grid))
        if self.labels is None:
            return messages
        partition_of = {node: pid for pid, node in self.nodes.items()}
        out = []
        for m in messages:
            own = self.client_nodes.get(partition_of.get(m.metadata.dst_node_id))
            if own is not None:
                labels = labels_of(self.labels, own)
                content = RecordDict(dict(m.content.items()))
                content[PSEUDO] = ArrayRecord({"labels": Array(labels)})
                m = Message(
                    content=content,
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
        """Probabilities must be rows of shares; node ids whole, distinct, one per row."""
        if reply.metadata.message_type != MessageType.TRAIN:
            return None
        record = get_record(reply.content, PREDICTIONS, ArrayRecord)
        probs, nodes = values_of(record, "probs"), values_of(record, "nodes")
        if probs is None or nodes is None or probs.ndim != 2 or nodes.shape != (probs.shape[0],):
            return f"{PREDICTIONS}: not probs [n, C] with nodes [n]"
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
        self.labels = fuse(probs, nodes, [r / total for r in rates], self.opts.threshold)
        for r, n in zip(replies, nodes):
            self.client_nodes[reply_partition_id(r)] = n
        return arrays, metrics

r"""FGGP server (Wan et al., AAAI 2024): FedAvg of the GCN and the augmentor, and the
clients' class prototypes clustered into a memory of domain-specific prototypes.

Each round, from the uploads (:mod:`fgl_flower.clients.fggp`):

1. the weights by FedAvg's rule (the classifier layer only under ``fggp.head=aggregate``);
2. for each class :math:`c`, the prototypes :math:`\{\pi^k_c\}` of the clients that have it,
   clustered by FINCH (:func:`finch`, cosine first neighbours, the coarsest partition);
   the cluster means are the class's :math:`K_c` prototypes;
3. every cluster prototype, L2-normalised and labelled, enters a FIFO memory of
   ``fggp.memory-size`` :math:`\times C` prototypes (the official code's queue; it starts
   empty here, not with random vectors labelled 0).

The memory travels with the global weights (:data:`~fgl_flower.methods.fggp.MEMORY`), so
clients classify by a k-NN vote of its prototypes; it is checkpointed with the run.
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
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from fgl_flower.methods.fggp import MEMORY, PROTOTYPES, FGGPOptions
from fgl_flower.records import array_numpy, get_record, require_record
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.screening import counts_problem, values_of


def first_neighbour_partition(points: np.ndarray) -> np.ndarray:
    r"""``[n]`` cluster labels ``0..K-1`` of FINCH's clustering equation (Sarfraz et al.,
    CVPR 2019): :math:`i` and :math:`j` are linked when one is the other's first (cosine)
    neighbour or they share it; the clusters are the connected components, which the first
    two cases span already (sharing a neighbour connects through it)."""
    n = len(points)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    unit = points / np.maximum(np.linalg.norm(points, axis=1, keepdims=True), 1e-12)
    distance = 1.0 - unit @ unit.T
    np.fill_diagonal(distance, np.inf)
    first = np.argmin(distance, axis=1)
    graph = coo_matrix((np.ones(n), (np.arange(n), first)), shape=(n, n))
    return connected_components(graph, directed=True, connection="weak")[1].astype(np.int64)


def cluster_means(points: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``[K, d]``: the mean of ``points [n, d]`` in each cluster ``0..K-1`` of ``labels [n]``."""
    k = int(labels.max()) + 1
    sums = np.zeros((k, points.shape[1]))
    np.add.at(sums, labels, points)
    return sums / np.bincount(labels, minlength=k)[:, None]


def finch(points: np.ndarray) -> list[np.ndarray]:
    """FINCH's hierarchy of partitions of ``points [n, d]``, finest first: the first-neighbour
    partition, then the same equation on the cluster means (of the original points), for as
    long as it merges clusters and leaves more than one (a merge into a single cluster is
    not a partition FINCH returns)."""
    points = np.asarray(points, dtype=np.float64)
    labels = first_neighbour_partition(points)
    partitions = [labels]
    while labels.max() > 0:
        merged = first_neighbour_partition(cluster_means(points, labels))[labels]
        if merged.max() == 0 or merged.max() >= labels.max():
            break
        labels = np.unique(merged, return_inverse=True)[1].astype(np.int64)
        partitions.append(labels)
    return partitions


def class_clusters(prototypes: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(centroids [Q, d], classes [Q])``: per class (ascending), the means of the coarsest
    FINCH partition of its prototypes (one prototype stays as it is)."""
    out, labels = [], []
    for c in np.unique(classes):
        members = prototypes[classes == c].astype(np.float64)
        means = cluster_means(members, finch(members)[-1]) if len(members) > 1 else members
        out.append(means)
        labels.extend([int(c)] * len(means))
    return np.concatenate(out).astype(np.float32), np.asarray(labels, dtype=np.int64)


def enqueue(
    memory: np.ndarray | None,
    labels: np.ndarray | None,
    new: np.ndarray,
    new_labels: np.ndarray,
    capacity: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The FIFO memory after adding ``new [q, d]`` (L2-normalised here) with ``new_labels
    [q]``: the last ``capacity`` rows of the old and the new."""
    unit = new / np.maximum(np.linalg.norm(new, axis=1, keepdims=True), 1e-12)
    if memory is not None:
        unit, new_labels = np.concatenate([memory, unit]), np.concatenate([labels, new_labels])
    return unit[-capacity:].astype(np.float32), new_labels[-capacity:].astype(np.int64)


class FGGPStrategy(FedAvgStrategy):
    """FedAvg plus the prototype memory (module docstring)."""

    checkpointed = ("memory", "memory_classes")

    def screen(
        self, server_round: int, messages: list[Message], replies: list[Message]
    ) -> dict[int, str]:
        """FedAvg's checks; every client must report the number of classes alike, and its
        prototypes must be one row per distinct class below it."""
        refused = super().screen(server_round, messages, replies)
        refused.update(
            self.screen_agreement(
                replies,
                refused,
                MessageType.TRAIN,
                lambda r: tuple(
                    values_of(
                        get_record(r.content, PROTOTYPES, ArrayRecord), "num-classes"
                    ).tolist()
                ),
                f"{PROTOTYPES}/num-classes",
            )
        )
        return refused

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        if reply.metadata.message_type != MessageType.TRAIN:
            return None
        record = get_record(reply.content, PROTOTYPES, ArrayRecord)
        classes, protos, num = (
            values_of(record, k) for k in ("classes", "prototypes", "num-classes")
        )
        if (
            classes is None
            or protos is None
            or num is None
            or num.shape != (1,)
            or protos.ndim != 2
        ):
            return f"{PROTOTYPES}: not prototypes [classes, d], classes and num-classes [1]"
        if (why := counts_problem(classes, f"{PROTOTYPES}/classes")) is not None:
            return why
        if (
            len(np.unique(classes)) != classes.size
            or classes.size != protos.shape[0]
            or (classes.size and classes.max() >= num[0])
        ):
            return f"{PROTOTYPES}: classes are not {protos.shape[0]} distinct ids below num-classes={num[0]:g}"
        return None

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = FGGPOptions.from_config(cfg)
        self.memory: np.ndarray | None = None  # [Q, d], L2-normalised; None before round 1 ends
        self.memory_classes: np.ndarray | None = None  # [Q]
        self.last: dict = {}

    def round_content(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> RecordDict:
        content = super().round_content(server_round, arrays, config)
        if self.memory is not None:
            content[MEMORY] = ArrayRecord(
                {"prototypes": Array(self.memory), "classes": Array(self.memory_classes)}
            )
        return content

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        arrays, metrics = super().aggregate_train(server_round, replies)
        uploads = [require_record(r.content, PROTOTYPES, ArrayRecord) for r in replies]
        prototypes = np.concatenate([array_numpy(u["prototypes"]) for u in uploads])
        classes = np.concatenate([array_numpy(u["classes"]) for u in uploads])
        num_classes = max(int(array_numpy(u["num-classes"])[0]) for u in uploads)
        centroids, labels = class_clusters(prototypes, classes)
        self.memory, self.memory_classes = enqueue(
            self.memory, self.memory_classes, centroids, labels, self.opts.memory_size * num_classes
        )
        per_class = {int(c): int((labels == c).sum()) for c in np.unique(labels)}
        self.last = {"clusters": per_class, "uploaded": len(prototypes), "memory": len(self.memory)}
        return arrays, metrics

    def round_record(self, server_round: int) -> dict:
        return {"fggp": self.last} if self.last else {}

    def server_probes(self, server_round: int) -> dict[str, float]:
        if not self.last:
            return {}
        return {
            "fggp.memory": float(self.last["memory"]),
            "fggp.clusters": float(np.mean(list(self.last["clusters"].values()))),
        }

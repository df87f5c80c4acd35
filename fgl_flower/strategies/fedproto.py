r"""FedProto server (Tan et al., AAAI 2022): no model is averaged; the clients' class
prototypes become global ones.

For each class :math:`j`, from the uploads :math:`C_i^{(j)}` (:data:`~fgl_flower.methods.
fedproto.PROTOTYPES`) of the clients :math:`N_j` that have training nodes of it,

.. math::
    \bar C^{(j)} = \frac{1}{|N_j|} \sum_{i \in N_j} C_i^{(j)}

(``fedproto.aggregate = official``, the official code's ``proto_aggregation``), or OpenFGL's
:math:`\sum_i \frac{n_i}{\sum_k n_k} C_i^{(j)}` over every client (``openfgl``; :math:`n_i`
its weight as ``agg-weight`` says, OpenFGL's node counts under ``local``; a client without
the class adds zeros). The global prototypes travel with the
next round's train messages (:data:`~fgl_flower.methods.fedproto.GLOBAL`) and are
checkpointed; the clients' models never leave them, so each evaluates its own after training.
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

from fgl_flower.methods.fedproto import GLOBAL, PROTOTYPES, FedProtoOptions
from fgl_flower.records import get_record, require_record
from fgl_flower.strategies.base import FGLStrategy
from fgl_flower.strategies.screening import counts_problem, values_of


def global_prototypes(
    prototypes: list[np.ndarray], counts: list[np.ndarray], weights: list[float], rule: str
) -> tuple[np.ndarray, np.ndarray]:
    """``(prototypes [C, h], present [C])`` from the clients' ``prototypes [C, h]``, their
    per-class ``counts [C]`` and node-count ``weights`` (``openfgl`` only), by ``rule``."""
    p = np.stack(prototypes).astype(np.float64)  # [M, C, h]
    has = np.stack(counts) > 0  # [M, C]
    present = has.any(axis=0)
    if rule == "openfgl":
        w = np.asarray(weights, dtype=np.float64)
        out = np.einsum("m,mch->ch", w / w.sum(), p * has[..., None])
    else:
        out = (p * has[..., None]).sum(axis=0) / np.maximum(has.sum(axis=0), 1)[:, None]
    return out.astype(np.float32), present.astype(np.int64)


def spread(prototypes: np.ndarray, present: np.ndarray) -> float:
    """Mean distance between the present classes' prototypes over their mean norm."""
    p = prototypes[present.astype(bool)].astype(np.float64)
    if len(p) < 2:
        return float("nan")
    d = np.linalg.norm(p[:, None] - p[None], axis=-1)
    mean_distance = d[~np.eye(len(p), dtype=bool)].mean()
    return float(mean_distance / max(np.linalg.norm(p, axis=1).mean(), 1e-12))


class FedProtoStrategy(FGLStrategy):
    """Prototype exchange (module docstring); every client reports its evaluation with its
    training."""

    evaluates_in_train = True

    checkpointed = ("prototypes", "present")

    checked_uploads = {MessageType.TRAIN: (PROTOTYPES,)}

    #: the method's options (FedTGP's server is this one with its own)
    options = FedProtoOptions

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = self.options.from_config(cfg)
        self.prototypes: np.ndarray | None = None  # [C, h]; None before round 1 ends
        self.present: np.ndarray | None = None  # [C]

    def round_content(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> RecordDict:
        content = super().round_content(server_round, arrays, config)
        if self.prototypes is not None:
            content[GLOBAL] = ArrayRecord(
                {"prototypes": Array(self.prototypes), "present": Array(self.present)}
            )
        return content

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        """Counts must be counts, one per prototype row."""
        if reply.metadata.message_type != MessageType.TRAIN:
            return None
        record = get_record(reply.content, PROTOTYPES, ArrayRecord)
        counts, protos = values_of(record, "counts"), values_of(record, "prototypes")
        if (why := counts_problem(counts, f"{PROTOTYPES}/counts")) is not None:
            return why
        if protos is None or protos.ndim != 2 or counts.shape != (protos.shape[0],):
            return f"{PROTOTYPES}: not prototypes [C, h] with counts [C]"
        return None

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        uploads = [require_record(r.content, PROTOTYPES, ArrayRecord) for r in replies]
        weights = [self.reply_weight(r) for r in replies]
        self.prototypes, self.present = global_prototypes(
            [values_of(u, "prototypes") for u in uploads],
            [values_of(u, "counts") for u in uploads],
            weights,
            self.opts.aggregate,
        )
        return None, self.aggregate_train_metrics(replies)

    def server_probes(self, server_round: int) -> dict[str, float]:
        if self.prototypes is None:
            return {}
        return {"fedproto.spread": spread(self.prototypes, self.present)}

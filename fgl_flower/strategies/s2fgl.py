r"""S2FGL server (Tan et al., ICML 2025; spec ``s2fgl.md`` §3.5-3.6).

Each round the server

1. averages the uploaded models weighted by ``num-examples`` (FedAvg, Eq. of spec §3.6;
   the client's node count with ``agg-weight=local``, as the paper's code intends);
2. rebuilds the global knowledge repository of NLIR from the uploaded class prototypes:
   for each of ``anchors`` anchors a random subset of :math:`\lfloor 0.7M\rfloor` clients,
   and per class the count-weighted mean of their prototypes
   (:func:`~fgl_flower.models.s2fgl.build_repository`);
3. sends the repository with the next round's model (record ``s2fgl.repository``).

The anchor subsets are drawn from a generator seeded by (run seed, round), so a run is
reproducible. The FedAvg weights are those of the clients' own models; with
``shuffle-weights=true`` they are randomly permuted against the models every round, as the
official code does by an indexing bug (spec §3.6).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid

from fgl_flower.config import RunConfig
from fgl_flower.methods.s2fgl import PROTOTYPES, REPOSITORY, S2FGLOptions
from fgl_flower.models.s2fgl import anchor_subsets, build_repository
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import get_record, require_record
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.screening import counts_problem, values_of


class S2FGLStrategy(FedAvgStrategy):
    """FedAvg plus the NLIR knowledge repository, rebuilt every round."""

    checkpointed = ("repository",)

    checked_uploads = {MessageType.TRAIN: (ARRAYS, PROTOTYPES)}

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        """The prototypes' class counts (their weights in the repository) must be counts."""
        if reply.metadata.message_type != MessageType.TRAIN:
            return None
        return counts_problem(
            values_of(get_record(reply.content, PROTOTYPES, ArrayRecord), "counts"),
            f"{PROTOTYPES}/counts",
        )

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.opts = S2FGLOptions.from_config(cfg)
        self.repository: torch.Tensor | None = None  # [anchors * C, d], None in round 1

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        content = self.round_content(server_round, arrays, config)
        if self.repository is not None:
            content[REPOSITORY] = ArrayRecord({"anchors": self.repository})
        return self.broadcast(content, MessageType.TRAIN)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)  # in partition-id order
        arrays, metrics = super().aggregate_train(server_round, replies)
        self.repository = self.repository_from(server_round, [r.content for r in replies])
        return arrays, metrics

    def idle_probes(self, server_round: int) -> tuple[str, ...]:
        """Before ``start-round`` the auxiliary losses are off by design: their shares (0)
        are recorded but not watched."""
        return ("nlir.share", "fgma.share") if server_round < self.opts.start_round else ()

    def aggregation_weights(self, server_round: int, replies: list[Message]) -> list[float]:
        weights = super().aggregation_weights(server_round, replies)
        if not self.opts.shuffle_weights:
            return weights
        rng = np.random.default_rng(derive_seed(self.cfg.seed, server_round, "shuffle-weights"))
        return [weights[i] for i in rng.permutation(len(weights))]

    def repository_from(self, server_round: int, contents: list[RecordDict]) -> torch.Tensor:
        """The repository :math:`\\mathcal H` ``[anchors * C, d]`` from the replies' prototypes."""
        uploads = [
            require_record(c, PROTOTYPES, ArrayRecord).to_torch_state_dict() for c in contents
        ]
        protos = torch.stack([u["prototypes"] for u in uploads])
        counts = torch.stack([u["counts"] for u in uploads])
        rng = np.random.default_rng(derive_seed(self.cfg.seed, server_round, "anchors"))
        subsets = anchor_subsets(len(contents), self.opts.anchors, self.opts.anchor_fraction, rng)
        return build_repository(protos, counts, subsets)

r"""AdaFGL server (Li et al., ICDE 2024): FedAvg for the first ``adafgl.fed-rounds`` rounds
(step 1, the federated knowledge extractor), then nothing to aggregate (step 2).

Step 1's last aggregate is the extractor: the global arrays stay at it for the rest of the
run. In step 2 a client receives it with its first train message (it builds its own modules
on it, :mod:`~fgl_flower.clients.adafgl`) and nothing afterwards; its replies carry no model
(an upload is refused, as in any round that averages none). The partitions that have
received it are checkpointed. Evaluation is FedAvg's, riding in the next train message;
from step 2 on each client evaluates its own modules (a client that has not trained in step
2 yet evaluates the extractor).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from fgl_flower.methods.adafgl import AdaFGLOptions
from fgl_flower.protocol import ARRAYS
from fgl_flower.strategies.base import FGLStrategy
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.grid import reply_partition_id


class AdaFGLStrategy(FedAvgStrategy):
    """FedAvg, then the extractor once to each client (module docstring)."""

    checkpointed = FedAvgStrategy.checkpointed + ("personalized_ids",)

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = AdaFGLOptions.from_config(cfg)
        #: partition ids that hold the extractor and train their own modules
        self.personalized: set[int] = set()

    @property
    def personalized_ids(self) -> np.ndarray | None:
        return np.asarray(sorted(self.personalized), dtype=np.int64) if self.personalized else None

    @personalized_ids.setter
    def personalized_ids(self, value) -> None:
        self.personalized = set() if value is None else {int(p) for p in np.asarray(value)}

    def personal_round(self, server_round: int) -> bool:
        return server_round > self.opts.fed_rounds

    def uploads_model(self, server_round: int) -> bool:
        """Step 2's clients keep their modules: no model to average."""
        return not self.personal_round(server_round)

    def without_extractor(self, messages: Iterable[Message]) -> list[Message]:
        """``messages`` with empty arrays for the clients that hold the extractor already."""
        partition_of = {node: pid for pid, node in self.nodes.items()}
        out = []
        for m in messages:
            if partition_of.get(m.metadata.dst_node_id) in self.personalized:
                content = RecordDict(dict(m.content.items()))
                content[ARRAYS] = ArrayRecord()
                m = Message(
                    content=content,
                    dst_node_id=m.metadata.dst_node_id,
                    message_type=m.metadata.message_type,
                )
            out.append(m)
        return out

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid
    ) -> Iterable[Message]:
        messages = super().configure_train(server_round, arrays, config, grid)
        if not self.personal_round(server_round):
            return messages
        return self.without_extractor(messages)

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid
    ) -> Iterable[Message]:
        messages = super().configure_evaluate(server_round, arrays, config, grid)
        if not self.personal_round(server_round):
            return messages
        return self.without_extractor(messages)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        if not self.personal_round(server_round):
            return super().aggregate_train(server_round, replies)
        self.personalized.update(reply_partition_id(r) for r in replies)
        return FGLStrategy.aggregate_train(self, server_round, replies)

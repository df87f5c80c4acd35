r"""FedSage+ server (Zhang et al., NeurIPS 2021): generator rounds, then FedAvg of the classifier.

Rounds ``1..G`` (``fedsageplus.gen-rounds``) train every client's missing-neighbour generator
(:mod:`fgl_flower.clients.fedsageplus`); each is three exchanges, all metered into the round's
record:

1. ``query.generate`` to the round's clients: each replies the features its generator makes for
   its training nodes, with the predicted and true missing-neighbour counts;
2. ``query.cross_grad`` to each client ``j``: the other clients' generated features; ``j``
   returns the gradient of each one's feature loss against targets from its own subgraph;
3. ``train`` to each client ``i``: :math:`\sum_{j\neq i}` of those gradients for its features;
   it steps its generator on its own loss and theirs. No model is averaged.

Generators stay on the clients (none is aggregated, as in every code), and no classifier is
evaluated in these rounds. From round ``G + 1`` each client trains the classifier on its
mended subgraph and the server is FedAvg's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from fgl_flower.methods.fedsageplus import (
    CLASSIFIER_PROBES,
    CROSS,
    GENERATED,
    GENERATOR_PROBES,
    GRADIENTS,
    ROUND_CLIENTS,
    FedSagePlusOptions,
)
from fgl_flower.protocol import CONFIG, SERVER_ROUND
from fgl_flower.records import record_torch, require_record, torch_record
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.grid import reply_partition_id


class FedSagePlusStrategy(FedAvgStrategy):
    """Generator rounds with the cross-client feature gradients, then FedAvg.

    The record names, the options (with ``gen_rounds`` and ``cross``) and the probes of each
    phase are class attributes, so that a method with the same exchange on other payloads
    (FedDEP's embeddings, :mod:`fgl_flower.strategies.feddep`) sets its own."""

    OPTIONS: type = FedSagePlusOptions
    GENERATED, CROSS, GRADIENTS, ROUND_CLIENTS = GENERATED, CROSS, GRADIENTS, ROUND_CLIENTS
    GENERATOR_PROBES, CLASSIFIER_PROBES = GENERATOR_PROBES, CLASSIFIER_PROBES

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = self.OPTIONS.from_config(cfg)
        self._gradients: dict[
            int, torch.Tensor
        ] = {}  # this round's summed gradients by partition id

    def generator_round(self, server_round: int) -> bool:
        return server_round <= self.opts.gen_rounds

    def uploads_model(self, server_round: int) -> bool:
        """The generators stay on the clients: generator rounds upload no model."""
        return not self.generator_round(server_round)

    def evaluates(self, server_round: int) -> bool:
        """The classifier is evaluated from its first round on: in the generator rounds it is
        the untrained initial model, whose numbers would take part in the best-validation
        choice."""
        return not self.generator_round(server_round)

    def prepare_round(
        self,
        server_round: int,
        config: ConfigRecord,
        send: Callable[[list[Message]], list[Message]],
    ) -> None:
        self._gradients = {}
        if not (self.generator_round(server_round) and self.opts.cross and len(self.selected) > 1):
            return
        config = ConfigRecord(
            {**config, SERVER_ROUND: server_round}
        )  # with a resumed run's resume-round
        replies = send(
            self.broadcast(RecordDict({CONFIG: config}), f"{MessageType.QUERY}.generate")
        )
        generated = {
            reply_partition_id(r): record_torch(
                require_record(r.content, self.GENERATED, ArrayRecord)
            )
            for r in replies
        }
        messages = []
        for pid, node in zip(self.selected, self.node_ids):
            if pid not in generated:
                continue
            others = {
                f"{key}.{i}": value
                for i, payload in sorted(generated.items())
                if i != pid
                for key, value in payload.items()
            }
            messages.append(
                Message(
                    content=RecordDict({CONFIG: config, self.CROSS: torch_record(others)}),
                    message_type=f"{MessageType.QUERY}.cross_grad",
                    dst_node_id=node,
                )
            )
        for reply in send(messages):
            for key, grad in record_torch(
                require_record(reply.content, self.GRADIENTS, ArrayRecord)
            ).items():
                i = int(key.removeprefix("grad."))
                self._gradients[i] = self._gradients[i] + grad if i in self._gradients else grad

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid
    ) -> Iterable[Message]:
        if not self.generator_round(server_round):
            return super().configure_train(server_round, arrays, config, grid)
        config = ConfigRecord({**config, self.ROUND_CLIENTS: len(self.selected)})
        messages = []
        for pid, node in zip(self.selected, self.node_ids):
            content = self.round_content(server_round, arrays, config)
            if pid in self._gradients:
                content[self.GRADIENTS] = torch_record({"grad": self._gradients[pid]})
            messages.append(
                Message(content=content, message_type=MessageType.TRAIN, dst_node_id=node)
            )
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        if self.generator_round(server_round):  # the generators stay on the clients
            return None, self.aggregate_train_metrics(replies)
        return super().aggregate_train(server_round, replies)

    def idle_probes(self, server_round: int) -> tuple[str, ...]:
        if self.generator_round(server_round):
            return self.CLASSIFIER_PROBES + (() if self.opts.cross else self.GENERATOR_PROBES)
        return self.GENERATOR_PROBES

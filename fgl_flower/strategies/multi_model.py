"""Strategies that keep several models and send each client its own.

GCFL's cluster models and FED-PUB's and FedGTA's personalised ones live in one
:class:`ArrayRecord` under ``<owner>.<key>`` (:func:`~fgl_flower.records.sub_record`,
:func:`~fgl_flower.records.prefixed`), so the run's checkpoint holds them all; each train and
evaluate message carries the one model :meth:`MultiModelStrategy.model_for` picks for its
client.
"""

from __future__ import annotations

from collections.abc import Iterable

from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType
from flwr.serverapp import Grid

from fgl_flower.config import RunConfig
from fgl_flower.protocol import ARRAYS
from fgl_flower.strategies.base import FGLStrategy


def client_owner(partition_id: int) -> str:
    """The owner prefix of client ``partition_id``'s own model (``client<i>``)."""
    return f"client{partition_id}"


class MultiModelStrategy(FGLStrategy):
    """Per-client messages from the record of every model (module docstring). Each client's
    upload must have the layout of the model it was sent (:meth:`~FGLStrategy.screen`)."""

    checked_uploads = {MessageType.TRAIN: (ARRAYS,)}

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.models = ArrayRecord()  # every model after the last aggregation, <owner>.<key>

    def model_for(self, arrays: ArrayRecord, partition_id: int) -> ArrayRecord:
        """The model client ``partition_id`` receives of ``arrays`` (all models; empty before
        the first aggregation, when the clients start from the seeded model)."""
        raise NotImplementedError

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.per_client(
            server_round, config, MessageType.TRAIN, lambda pid: self.model_for(arrays, pid)
        )

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.per_client(
            server_round, config, MessageType.EVALUATE, lambda pid: self.model_for(arrays, pid)
        )

    def restore(self, records):
        done, arrays, pending = super().restore(records)
        self.models = arrays
        return done, arrays, pending

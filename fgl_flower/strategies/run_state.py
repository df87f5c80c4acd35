"""What one run of :meth:`FGLStrategy.start <fgl_flower.strategies.base.FGLStrategy.start>`
carries from round to round (:class:`RunState`), so that its steps are methods of their own:
:meth:`~fgl_flower.strategies.base.FGLStrategy.open_run` makes it, each round's steps read
and update it, and its :attr:`RunState.result` is what ``start`` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
from flwr.serverapp.strategy import Result

from fgl_flower.checkpoint import Checkpointer
from fgl_flower.results import RunRecorder
from fgl_flower.strategies.grid import MeteredGrid


@dataclass
class RunState:
    """One run's state between its rounds."""

    #: the grid every exchange of the run goes through
    metered: MeteredGrid
    #: the global arrays after the last round (the initial ones before round 1)
    arrays: ArrayRecord
    #: the run's last round
    num_rounds: int
    #: seconds each exchange waits for its replies
    timeout: float
    #: what every train message's config carries (plus the round, and an evaluated round)
    train_config: ConfigRecord
    #: what every evaluate message's config carries (plus the round)
    evaluate_config: ConfigRecord
    #: the first round to run (after a resumed checkpoint's round)
    first_round: int = 1
    #: whether a round's evaluation rides in the next round's train messages
    fused: bool = False
    #: the record of the round whose evaluation the next train batch brings (fused)
    pending: dict | None = None
    #: a client failed since the last look for new nodes (rediscovery before the next round)
    lost_nodes: bool = False
    #: what ``start`` returns: the global arrays and the aggregated metrics of each round
    result: Result = field(default_factory=Result)
    #: the server-side evaluation of a round's global arrays, if any
    evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None
    #: where finished rounds go, if anywhere
    recorder: RunRecorder | None = None
    #: where the server's checkpoints go, if anywhere
    checkpointer: Checkpointer | None = None

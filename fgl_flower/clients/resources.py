"""Resource accounting of a client: model size, shared parameters, FLOPs of a round.

Reported once per client and run, in its first train reply, as ``res.*`` metrics that the
server gathers into the run summary (``summary["resources"]``).
"""

from __future__ import annotations

import copy

import torch
from torch.utils.flop_counter import FlopCounterMode

from fgl_flower.clients.learner import Learner, make_optimizer
from fgl_flower.protocol import RESOURCES as PREFIX


def round_flops(learner: Learner, epochs: int) -> int:
    """FLOPs of ``epochs`` local epochs, forward and backward, as
    :class:`torch.utils.flop_counter.FlopCounterMode` counts them (2 per multiply-add of
    the matrix products: linear layers, GCN's dense transform; message passing's scatter
    additions and elementwise work are not counted).

    Runs on a copy of the model and optimizer, with the random state restored after, so
    the learner and the run's numbers do not change.
    """
    devices = [learner.device] if learner.device.type == "cuda" else []
    twin = copy.copy(learner)
    twin.model = copy.deepcopy(learner.model)
    twin.optimizer = make_optimizer(twin.model.parameters(), learner.cfg)
    with torch.random.fork_rng(devices=devices), FlopCounterMode(display=False) as counter:
        twin.fit(epochs)
    return int(counter.get_total_flops())


def resource_metrics(learner: Learner, epochs: int, uploads: bool) -> dict[str, float]:
    """``res.params`` (the whole local model), ``res.shared-params`` (parameters uploaded
    each round; 0 if the client uploads none) and ``res.flops`` (:func:`round_flops`)."""
    shared = sum(p.numel() for _, p in learner.shared_parameters()) if uploads else 0
    return {
        f"{PREFIX}params": float(sum(p.numel() for p in learner.model.parameters())),
        f"{PREFIX}shared-params": float(shared),
        f"{PREFIX}flops": float(round_flops(learner, epochs)),
    }

"""Which clients take part in a round: sampled by partition id from the run seed."""

from __future__ import annotations

import math

import numpy as np

from fgl_flower.seeds import derive_seed


def sample_size(num_clients: int, fraction: float, minimum: int) -> int:
    r""":math:`\min(K, \max(m, \lfloor fK \rfloor))` clients (Flower's rule for
    ``fraction_train`` and ``min_train_nodes``)."""
    return min(num_clients, max(minimum, math.floor(fraction * num_clients + 1e-9)))


def sample_clients(
    num_clients: int, fraction: float, minimum: int, seed: int, server_round: int
) -> list[int]:
    """The sorted partition ids that train in ``server_round``.

    A function of the run seed and the round only, so simulation, the in-process grid
    and a deployment sample the same clients (Flower's own sampling draws random node
    ids, which differ between runs). All clients when the sample is all of them.
    """
    k = sample_size(num_clients, fraction, minimum)
    if k == num_clients:
        return list(range(num_clients))
    rng = np.random.default_rng(derive_seed(seed, server_round, "sample-train"))
    return sorted(int(i) for i in rng.choice(num_clients, size=k, replace=False))

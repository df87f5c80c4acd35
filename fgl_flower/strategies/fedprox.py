"""FedProx (Li et al., 2020): the server is FedAvg; the proximal term lives in the client."""

from __future__ import annotations

from fgl_flower.strategies.fedavg import FedAvgStrategy


class FedProxStrategy(FedAvgStrategy):
    """Identical aggregation to FedAvg; ``fedprox.mu`` is read by the clients."""

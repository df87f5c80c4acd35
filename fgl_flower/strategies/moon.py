"""MOON (Li, He and Song, CVPR 2021): the server is FedAvg; the contrast lives in the client."""

from __future__ import annotations

from fgl_flower.strategies.fedavg import FedAvgStrategy


class MoonStrategy(FedAvgStrategy):
    """Identical aggregation to FedAvg; ``moon.*`` is read by the clients."""

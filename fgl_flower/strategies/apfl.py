"""APFL server (Deng, Kamani and Mahdavi, 2020): FedAvg of the clients' copies of the global
model :math:`w`; the local models :math:`v` and the mixing weights :math:`\\alpha` never
leave the clients."""

from __future__ import annotations

from fgl_flower.config import RunConfig
from fgl_flower.methods.apfl import APFLOptions
from fgl_flower.strategies.fedavg import FedAvgStrategy


class APFLStrategy(FedAvgStrategy):
    """FedAvg's aggregation. ``apfl.evaluate = "trained"``: the clients evaluate their
    personalized (mixed) model with their own trained ``w`` at the end of their round, in the
    train reply (:attr:`evaluates_in_train`); ``"received"``: with the averaged ``w`` of the
    next message (FedAvg's evaluation schedule)."""

    evaluates_in_train = True  # the default option's (``trained``); set per run below

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.evaluates_in_train = APFLOptions.from_config(cfg).evaluate == "trained"

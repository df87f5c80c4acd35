"""APFL server (Deng, Kamani and Mahdavi, 2020): FedAvg of the clients' copies of the global
model :math:`w`; the local models :math:`v` and the mixing weights :math:`\\alpha` never
leave the clients."""

from __future__ import annotations

from fgl_flower.strategies.fedavg import FedAvgStrategy


class APFLStrategy(FedAvgStrategy):
    """FedAvg's aggregation; the clients evaluate their personalized (mixed) model at the end
    of their round, which aggregation does not change (:attr:`evaluates_in_train`)."""

    evaluates_in_train = True

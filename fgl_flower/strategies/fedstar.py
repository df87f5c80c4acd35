r"""FedStar server (Tan et al., AAAI 2023): FedAvg over the structure encoder only.

.. math::
    \bar w_s^{t+1} = \sum_{i} \frac{|d_i|}{\sum_j |d_j|}\, w_{s,i}^{t}

with :math:`w_s` the ``struct.*`` parameters (the only ones clients upload) and
:math:`|d_i|` the client's training graphs. Every client starts from the same structure
encoder (built first from the run seed; FedStar's server broadcasts its own).
"""

from __future__ import annotations

from fgl_flower.strategies.fedavg import FedAvgStrategy


class FedStarStrategy(FedAvgStrategy):
    """:class:`FedAvgStrategy` on the uploaded structure encoders."""

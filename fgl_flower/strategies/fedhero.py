r"""FedHERO server (spec §2.6): FedAvg over the clients' global channels.

.. math::
    \bar w_g = \sum_i \frac{N_i}{\sum_j N_j}\, w_g^i

with :math:`w_g` the structure learner and the latent-graph layers (``struct.*``,
``gconv.*``, or what ``fedhero.share`` selects) and :math:`N_i` client :math:`i`'s number of
nodes, which its client reports as ``num-examples``. Local channels never leave the clients.
"""

from __future__ import annotations

from fgl_flower.strategies.fedavg import FedAvgStrategy


class FedHEROStrategy(FedAvgStrategy):
    """:class:`FedAvgStrategy` on the uploaded global channels, weighted by client nodes."""

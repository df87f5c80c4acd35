r"""FedDense server (Wang et al., 2024; spec §4): Eq. 9, the train-size weighted mean of
the structural channels,

.. math::
    \bar w_s^{(t+1)} = \sum_{i=1}^N \frac{|d_i|}{|D|}\, w_{s,i}^{(t)}

applied to every ``struct.*`` tensor (the clients upload nothing else), i.e. FedStar's
server. Its evaluation is the clients' personalized models after the download of
:math:`\bar w_s^{(t+1)}` (spec §6.1 step 12).
"""

from __future__ import annotations

from fgl_flower.strategies.fedstar import FedStarStrategy


class FedDenseStrategy(FedStarStrategy):
    """:class:`FedStarStrategy` (the models differ only on the clients)."""

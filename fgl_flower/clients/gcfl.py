"""GCFL client (Xie et al., NeurIPS 2021): a FedAvg client whose global weights are its
cluster's.

It trains from the shared weights the server sends (its cluster's model) and uploads its
trained shared weights :math:`W_i`; the server derives the update
:math:`dW_i = W_i - W_{c(i)}` from the model it sent (the GCFL code uploads :math:`dW_i`
and keeps :math:`W_{c(i)}` on the client: the same numbers, and the same payload). The
parameters outside the shared set (e.g. a GIN's input and output layers across datasets)
stay local, as in FedAvg.
"""

from __future__ import annotations

from fgl_flower.clients.fedavg import FedAvgClient


class GCFLClient(FedAvgClient):
    pass

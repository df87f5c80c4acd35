"""GCFL client (Xie et al., NeurIPS 2021): a FedAvg client whose global weights are its
cluster's.

It trains from the shared weights the server sends (its cluster's model) and uploads its
trained shared weights :math:`W_i`; the server derives the update
:math:`dW_i = W_i - W_{c(i)}` from the model it sent (the GCFL code uploads :math:`dW_i`
and keeps :math:`W_{c(i)}` on the client: the same numbers, and the same payload). The
parameters outside the shared set (e.g. a GIN's input and output layers across datasets)
stay local, as in FedAvg.

GCFL+ with ``gcfl.sequence = "grad"`` also reports the norm of the gradient of the shared
parameters at its last local step (``gcfl.grad-norm``; the GCFL code's ``convGradsNorm``:
the loss's gradient, without Adam's weight decay), the server's sequence entry.
"""

from __future__ import annotations

import math

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.methods.gcfl import GRAD_NORM, GCFLOptions


class GCFLClient(FedAvgClient):
    def after_fit(self) -> dict[str, float]:
        o = GCFLOptions.from_config(self.cfg)
        return (
            {GRAD_NORM: self.shared_grad_norm()}
            if o.variant == "gcfl+" and o.sequence == "grad"
            else {}
        )

    def shared_grad_norm(self) -> float:
        """L2 norm of the shared parameters' gradients left by the last local step."""
        total = 0.0
        for _, p in self.learner.shared_parameters():
            if p.grad is not None:
                total += float(p.grad.detach().double().pow(2).sum())
        return math.sqrt(total)

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

from flwr.app import RecordDict

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.methods.gcfl import GRAD_NORM, GCFLOptions


class GCFLClient(FedAvgClient):
    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        o = GCFLOptions.from_config(self.cfg)
        if o.variant != "gcfl+" or o.sequence != "grad":
            return super().train(content, server_round)
        self.load_global(content)
        self.seed_round(server_round)
        res = self.learner.fit(self.cfg.local_epochs, extra_loss=self.extra_loss(content))
        res[GRAD_NORM] = self.shared_grad_norm()
        return self.training_reply(res)

    def shared_grad_norm(self) -> float:
        """L2 norm of the shared parameters' gradients left by the last local step."""
        total = 0.0
        for _, p in self.learner.shared_parameters():
            if p.grad is not None:
                total += float(p.grad.detach().double().pow(2).sum())
        return math.sqrt(total)

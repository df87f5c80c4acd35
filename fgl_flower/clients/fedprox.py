r"""FedProx client (Li et al., 2020): FedAvg plus a proximal term.

.. math::
    \mathcal L_k(w) + \frac{\mu}{2}\,\lVert w - w^{t}\rVert_2^2

over the shared parameters, with :math:`w^{t}` the global model received this round.
"""

from __future__ import annotations

import torch
from flwr.app import RecordDict

from fgl_flower.clients.fedavg import FedAvgClient


class FedProxClient(FedAvgClient):
    def extra_loss(self, content: RecordDict):
        mu = float(self.cfg.option("mu"))
        anchor = self.shared_snapshot()
        if mu == 0.0:
            return None

        def proximal(model: torch.nn.Module) -> torch.Tensor:
            terms = [((p - anchor[n]) ** 2).sum() for n, p in self.learner.shared_parameters()]
            return 0.5 * mu * torch.stack(terms).sum()

        return proximal

r"""FedDC client (Gao et al., "FedDC: Federated Learning with Non-IID Data via Local Drift
Decoupling and Correction", CVPR 2022).

SCAFFOLD's client (:mod:`fgl_flower.clients.scaffold`: each step's gradient corrected by
:math:`c - c_i`, :math:`\Delta c_i` by option II, as the official code's ``state_gadient_diffs``)
with the drift penalty added to the local loss,

.. math::
    \ell = \ell_{task}(\theta) + \frac{\alpha}{2} \lVert \theta + h_i - w \rVert_2^2,

over the shared float parameters, :math:`w` the received global model and :math:`h_i` the
client's local drift (state ``feddc.drift``, zero at first), which after training becomes
:math:`h_i + (\theta_i - w)`. The upload is :math:`\theta_i`; the server keeps every client's
drift itself (:mod:`fgl_flower.strategies.feddc`).
"""

from __future__ import annotations

import torch
from flwr.app import RecordDict
from torch import Tensor, nn

from fgl_flower.clients.scaffold import ScaffoldClient

#: Client-state key of :math:`h_i`.
DRIFT = "feddc.drift"


class FedDCClient(ScaffoldClient):
    probe_prefix = "feddc"

    def extra_loss(self, content: RecordDict):
        alpha = float(self.cfg.option("alpha"))
        w = {
            k: v.detach().clone()
            for k, v in self.learner.get_shared().items()
            if v.is_floating_point()
        }
        h = self.state.load_tensors(DRIFT) or {}
        target = {k: w[k] - h[k].to(self.device) if k in h else w[k] for k in w}
        if alpha == 0:
            return None
        params = [(n, p) for n, p in self.learner.shared_parameters() if n in target]

        def drift_penalty(_: nn.Module) -> Tensor:
            return (
                0.5 * alpha * torch.stack([((p - target[n]) ** 2).sum() for n, p in params]).sum()
            )

        return drift_penalty

    def after_round(self, x: dict[str, Tensor], y: dict[str, Tensor]) -> dict[str, float]:
        """:math:`h_i \\leftarrow h_i + (\\theta_i - w)`, saved; the probe ``feddc.drift``."""
        h = self.state.load_tensors(DRIFT) or {}
        new = {
            k: (h[k].to(self.device) if k in h else torch.zeros_like(x[k])) + (y[k] - x[k])
            for k in x
        }
        self.state.save_tensors(DRIFT, {k: v.cpu() for k, v in new.items()})
        drift = torch.sqrt(sum((v**2).sum() for v in new.values()))
        model = torch.sqrt(sum((y[k].float() ** 2).sum() for k in x))
        return {"feddc.drift": float(drift / model) if model > 0 else 0.0}

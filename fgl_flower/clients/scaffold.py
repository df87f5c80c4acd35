r"""SCAFFOLD client (Karimireddy et al., ICML 2020, Algorithm 1, option II).

From the global model :math:`x` and the server control variate :math:`c` (record
:data:`~fgl_flower.methods.scaffold.CONTROL`; :math:`0` in round 1), the client takes its
:math:`K` local steps on the corrected gradient

.. math::
    y_i \leftarrow y_i - \eta_l \big(g_i(y_i) - c_i + c\big),

adding :math:`c - c_i` to every shared parameter's gradient just before each optimizer step
(so an optimizer's weight decay or momentum sees the corrected gradient, as in OpenFGL), then
updates its own control variate and uploads the change:

.. math::
    \Delta c_i = \frac{x - y_i}{K \eta_l} - c, \qquad c_i \leftarrow c_i + \Delta c_i

(option II, :math:`c_i^+ = c_i - c + (x - y_i)/(K\eta_l)`, written as the change so that the
server can recompute it from the upload). :math:`c_i` lives in the client's state
(``scaffold.ci``, zero before its first round). Option II reads :math:`(x - y_i)/(K\eta_l)` as
the mean local gradient, which holds for plain SGD; under Adam it is a scaled update
direction instead (OpenFGL applies it alike).
"""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, RecordDict
from torch import Tensor

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.learner import counting_steps
from fgl_flower.methods.scaffold import CONTROL, DELTA, STEPS
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import METRICS
from fgl_flower.records import get_record, record_torch, torch_record

#: Client-state key of :math:`c_i`.
CLIENT_CONTROL = "scaffold.ci"


class ScaffoldClient(FedAvgClient):
    sends_start = True  # the server checks each Delta c_i against x, so it needs x in round 1

    #: the prefix of its probes (FedDC's client is this one with its own)
    probe_prefix = "scaffold"

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        x = {k: v for k, v in self.shared_snapshot().items() if v.is_floating_point()}
        c = self.received_control(content, x)
        ci = self.state.load_tensors(CLIENT_CONTROL) or {}
        ci = {k: ci[k].to(self.device) if k in ci else torch.zeros_like(v) for k, v in x.items()}
        correction = {k: c[k] - ci[k] for k in x}
        ratios: list[float] = []
        hook = self.learner.optimizer.register_step_pre_hook(
            lambda *_: ratios.append(self.correct(correction))
        )
        try:
            with counting_steps(self.learner.optimizer) as count:
                reply = super().train(content, server_round)
        finally:
            hook.remove()
        y = self.learner.get_shared()
        k, lr = count.steps, float(self.cfg.lr)
        delta = {
            name: (x[name] - y[name]) / (k * lr) - c[name] if k else torch.zeros_like(x[name])
            for name in x
        }
        self.state.save_tensors(CLIENT_CONTROL, {n: (ci[n] + delta[n]).cpu() for n in x})
        reply[DELTA] = torch_record(delta)
        metrics = reply[METRICS]
        metrics[STEPS] = float(k)
        probes = {
            f"{self.probe_prefix}.correction": sum(ratios) / len(ratios) if ratios else 0.0,
            **self.after_round(x, y),
        }
        for name, value in as_metrics(probes).items():
            metrics[name] = value
        return reply

    def after_round(self, x: dict[str, Tensor], y: dict[str, Tensor]) -> dict[str, float]:
        """Probes of what a method built on this client keeps after the round, from the start
        ``x`` and the trained ``y`` (none for SCAFFOLD)."""
        return {}

    def received_control(self, content: RecordDict, x: dict[str, Tensor]) -> dict[str, Tensor]:
        """:math:`c` as sent (float arrays of the global model), zero where none came."""
        record = get_record(content, CONTROL, ArrayRecord)
        sent = record_torch(record) if record is not None and len(record) else {}
        return {
            k: sent[k].to(self.device) if k in sent else torch.zeros_like(v) for k, v in x.items()
        }

    @torch.no_grad()
    def correct(self, correction: dict[str, Tensor]) -> float:
        r"""Add ``correction`` (:math:`c - c_i`) to the shared parameters' gradients; returns
        :math:`\lVert c - c_i\rVert / \lVert g\rVert` over those with a gradient."""
        grad_sq = corr_sq = 0.0
        for name, p in self.learner.shared_parameters():
            if p.grad is None or name not in correction:
                continue
            grad_sq += float(p.grad.pow(2).sum())
            corr_sq += float(correction[name].pow(2).sum())
            p.grad.add_(correction[name])
        return (corr_sq**0.5) / (grad_sq**0.5) if grad_sq > 0 else 0.0

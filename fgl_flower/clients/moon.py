r"""MOON client (Li, He and Song, "Model-Contrastive Federated Learning", CVPR 2021).

Local loss (the paper's Eq. 3-4):

.. math::
    \ell = \ell_{sup} + \mu\,\ell_{con}, \qquad
    \ell_{con} = -\log\frac{e^{\mathrm{sim}(z, z_{glob})/\tau}}
        {e^{\mathrm{sim}(z, z_{glob})/\tau} + e^{\mathrm{sim}(z, z_{prev})/\tau}},

averaged over the contrasted examples, with :math:`z` the representation the local model's
output layer reads (a node backbone's last hidden layer ``[N, h]``, GIN's pooled graph
representation ``[B, h]``), taken from the same forward pass as the logits;
:math:`z_{glob}` the received global model's and :math:`z_{prev}` the client's previous local
model's (its model after its last round of training, kept in its state), both in eval mode
and without gradient; :math:`\mathrm{sim}` the cosine. On node tasks the contrasted examples
are the training nodes (``moon.nodes = train``, the paper's batch of training examples) or
every node (``all``, OpenFGL's); on graph tasks the graphs of each mini-batch. A client with
no previous local model yet (its first round) trains on :math:`\ell_{sup}` alone; in round 1
the official code's pool of previous models is empty and its contrast exactly 0, the same
update (docs/methods/moon.md).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from flwr.app import RecordDict
from torch import Tensor, nn

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.representation import representation, watch_representation
from fgl_flower.methods.moon import MoonOptions
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import METRICS

#: Client-state key of the previous local model.
PREVIOUS = "moon.previous"


def model_contrast(z: Tensor, z_glob: Tensor, z_prev: Tensor, tau: float) -> Tensor:
    r""":math:`\ell_{con}` of ``z [n, h]`` against ``z_glob`` and ``z_prev`` (same shape),
    averaged over the ``n`` rows: cross-entropy of the two cosines over :math:`\tau` with the
    global model's as the positive."""
    logits = torch.stack(
        [F.cosine_similarity(z, z_glob, dim=-1), F.cosine_similarity(z, z_prev, dim=-1)], dim=1
    )
    return F.cross_entropy(logits / tau, torch.zeros(len(z), dtype=torch.long, device=z.device))


class MoonClient(FedAvgClient):
    r"""FedAvg's local training plus :math:`\mu\,\ell_{con}` (module docstring)."""

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self._hooks: list = []
        self._terms: list[float] = []
        self._gap: float | None = None
        try:
            reply = super().train(content, server_round)
        finally:
            for hook in self._hooks:
                hook.remove()
        self.state.save_module(PREVIOUS, self.learner.model)
        if self._terms:  # a client with no previous model reports no probe
            con = sum(self._terms) / len(self._terms)
            sup = float(reply[METRICS]["train_loss"])
            probes = {"moon.contrast-share": con / (sup + con) if sup + con > 0 else 0.0}
            probes["moon.sim-gap"] = self._gap
            for name, value in as_metrics(probes).items():
                reply[METRICS][name] = value
        return reply

    def frozen(self, model: nn.Module) -> nn.Module:
        copy_ = copy.deepcopy(model).eval()
        for p in copy_.parameters():
            p.requires_grad_(False)
        return copy_

    def extra_loss(self, content: RecordDict):
        o = MoonOptions.from_config(self.cfg)
        model = self.learner.model
        if o.mu == 0 or PREVIOUS not in self.state:  # no contrast: copy no model
            return None
        previous = self.frozen(model)
        self.state.load_module(PREVIOUS, previous)
        previous.eval()
        glob = self.frozen(model)  # the global model: loaded just before
        seen: dict[str, object] = {}
        self._hooks = [
            model.register_forward_pre_hook(lambda _, a: seen.__setitem__("args", a)),
            watch_representation(model, lambda z: seen.__setitem__("z", z)),
        ]
        node = self.data.task == "node"
        mask = self.data.data.train_mask if node and o.nodes == "train" else None
        fixed: list[tuple[Tensor, Tensor]] = []  # node tasks: z_glob, z_prev once per round

        def contrast(_: nn.Module) -> Tensor:
            z, args = seen["z"], seen["args"]
            if fixed:
                z_glob, z_prev = fixed[0]
            else:
                with torch.no_grad():
                    z_glob, z_prev = representation(glob, args), representation(previous, args)
                if node:
                    fixed.append((z_glob, z_prev))
            if mask is not None:
                z, z_glob, z_prev = z[mask], z_glob[mask], z_prev[mask]
            term = o.mu * model_contrast(z, z_glob, z_prev, o.tau)
            self._terms.append(float(term.detach()))
            with torch.no_grad():
                self._gap = float(
                    (
                        F.cosine_similarity(z, z_glob, dim=-1)
                        - F.cosine_similarity(z, z_prev, dim=-1)
                    ).mean()
                )
            return term

        return contrast

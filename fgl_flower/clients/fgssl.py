r"""FGSSL client (Huang et al., "Federated Graph Semantic and Structural Learning", IJCAI
2023): FedAvg's round with two regularisers that pull the local model toward the global
model's view of the client's own graph.

Every local step draws a weak view :math:`\tilde G_w` and a strong view :math:`\tilde G_s`
of the subgraph (edges dropped, feature columns masked; :mod:`fgl_flower.models.fgssl`) and
minimises, with :math:`\mathbf h` the local model's representations on :math:`\tilde G_s`
and :math:`\hat{\mathbf h}` those of the frozen received global model on :math:`\tilde G_w`
(``fgssl.variant = "paper"``),

.. math::
    \mathcal L = \mathcal L_{\text{CE}}(G) + \lambda_c\,\mathcal L_{\text{FNSC}}(\mathbf h,
    \hat{\mathbf h}) + \lambda_s\,\mathcal L_{\text{FGSD}}(\mathbf h, \hat{\mathbf h})

``"code"`` trains what the official code trains (its FNSC line is overwritten by a contrast
of the local model's strong view with its own weak view, half-weighted in one direction:
:math:`\tfrac{\lambda_c}{2}\mathcal L_{\text{FNSC}}(\mathbf h, \mathbf h_w)`, so the global
model has no effect); ``"openfgl"`` what OpenFGL trains (cross-entropy plus its edge-difference
distillation from the global model, no contrast). The teacher runs in eval mode without
gradients; the student in train mode. The reply is FedAvg's, with the loss parts and the
probes (:data:`fgl_flower.methods.fgssl.PROBES`).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from flwr.app import RecordDict
from torch import Tensor, nn

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.methods.fgssl import FGSSLOptions
from fgl_flower.models.fgssl import (
    class_margin, drop_edges, edge_difference_distillation, mask_features, semantic_contrast,
    structure_distillation,
)
from fgl_flower.probes import as_metrics


class FGSSLClient(FedAvgClient):
    """FedAvg client with FGSSL's semantic and structural regularisers."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.opts = FGSSLOptions.from_config(self.cfg)

    def view(self, x: Tensor, edge_index: Tensor, edges: float, features: float) -> tuple[Tensor, Tensor]:
        return mask_features(x, features), drop_edges(edge_index, edges)

    def auxiliary(self, model: nn.Module, teacher: nn.Module, x: Tensor, edge_index: Tensor,
                  clean_edges: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """One step's auxiliary loss and its weighted parts (``contrast``, ``structure``, and
        ``teacher``: the part that reads the global model)."""
        o, g = self.opts, self.data.data
        xw, ew = self.view(x, edge_index, o.weak_edges, o.weak_features)
        xs, es = self.view(x, edge_index, o.strong_edges, o.strong_features)
        h = model.embed(xs, es)
        zero = h.new_zeros(())
        if o.variant == "code":
            contrast = 0.5 * o.contrast_weight * semantic_contrast(h, model.embed(xw, ew), g.y, g.train_mask, o.tau)
            return contrast, {"contrast": contrast, "structure": zero, "teacher": zero}
        with torch.no_grad():
            h_teacher = teacher.embed(xw, ew)
        if o.variant == "openfgl":
            structure = o.openfgl_weight * edge_difference_distillation(h, h_teacher, clean_edges, o.openfgl_tau)
            return structure, {"contrast": zero, "structure": structure, "teacher": structure}
        contrast = o.contrast_weight * semantic_contrast(h, h_teacher, g.y, g.train_mask, o.tau)
        structure = o.structure_weight * structure_distillation(h, h_teacher, clean_edges, o.omega)
        return contrast + structure, {"contrast": contrast, "structure": structure, "teacher": contrast + structure}

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        self.seed_round(server_round)
        g, model, optimizer = self.data.data, self.learner.model, self.learner.optimizer
        teacher = copy.deepcopy(model).eval()  # the received global model, frozen
        for p in teacher.parameters():
            p.requires_grad_(False)
        loops = g.edge_index[0] == g.edge_index[1]
        clean_edges = g.edge_index[:, ~loops]
        model.train()
        losses = {"train_loss": 0.0, "contrast_loss": 0.0, "structure_loss": 0.0}  # the last step's
        shares = dict.fromkeys(("fgssl.contrast-share", "fgssl.structure-share", "fgssl.teacher-share"), 0.0)
        steps = max(self.cfg.local_epochs, 1)
        for _ in range(self.cfg.local_epochs):
            optimizer.zero_grad()
            ce = F.cross_entropy(model(g.x, g.edge_index)[g.train_mask], g.y[g.train_mask])
            aux, parts = self.auxiliary(model, teacher, g.x, g.edge_index, clean_edges)
            loss = ce + aux
            loss.backward()
            optimizer.step()
            total = float(loss.detach())
            losses = {"train_loss": float(ce.detach()), "contrast_loss": float(parts["contrast"].detach()),
                      "structure_loss": float(parts["structure"].detach())}
            if total > 0:
                shares["fgssl.contrast-share"] += losses["contrast_loss"] / total / steps
                shares["fgssl.structure-share"] += losses["structure_loss"] / total / steps
                aux_value = float(aux.detach())
                if aux_value > 0:
                    shares["fgssl.teacher-share"] += float(parts["teacher"].detach()) / aux_value / steps
        model.eval()
        with torch.no_grad():
            margin = class_margin(model.embed(g.x, g.edge_index), teacher.embed(g.x, g.edge_index),
                                  g.y, g.train_mask)
        return self.training_reply(losses | as_metrics(shares | {"fgssl.class-margin": margin}))

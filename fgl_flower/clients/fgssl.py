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
of the local model's strong view with its own weak view, :math:`\lambda_c\mathcal
L_{\text{FNSC}}(\mathbf h, \mathbf h_w)`, so the global model has no effect; its weight 3
times the half of its contrast copy is the default :math:`\lambda_c = 1.5`); ``"openfgl"`` what OpenFGL trains (cross-entropy plus its edge-difference
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
    class_margin,
    drop_edges,
    edge_difference_distillation,
    mask_features,
    semantic_contrast,
    structure_distillation,
)
from fgl_flower.models.functional import grad_norm
from fgl_flower.probes import as_metrics


class FGSSLClient(FedAvgClient):
    """FedAvg client with FGSSL's semantic and structural regularisers."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.opts = FGSSLOptions.from_config(self.cfg)

    def views(self, x: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(x_weak, edges_weak, x_strong, edges_strong)``, fresh draws."""
        o = self.opts
        xw, ew = mask_features(x, o.weak_features), drop_edges(edge_index, o.weak_edges)
        xs, es = mask_features(x, o.strong_features), drop_edges(edge_index, o.strong_edges)
        return xw, ew, xs, es

    def terms(self, h: Tensor, target: Tensor, clean_edges: Tensor) -> dict[str, Tensor]:
        """The weighted auxiliary terms of the local strong-view representations ``h``
        against ``target`` (the global model's weak view; under ``code`` the local model's)."""
        o, g = self.opts, self.data.data
        zero = h.new_zeros(())
        if o.variant == "code":
            return {
                "contrast": o.contrast_weight
                * semantic_contrast(h, target, g.y, g.train_mask, o.tau),
                "structure": zero,
            }
        if o.variant == "openfgl":
            return {
                "contrast": zero,
                "structure": o.openfgl_weight
                * edge_difference_distillation(h, target, clean_edges, o.openfgl_tau),
            }
        return {
            "contrast": o.contrast_weight * semantic_contrast(h, target, g.y, g.train_mask, o.tau),
            "structure": o.structure_weight
            * structure_distillation(h, target, clean_edges, o.omega),
        }

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        self.seed_round(server_round)
        g, model, optimizer = self.data.data, self.learner.model, self.learner.optimizer
        teacher = copy.deepcopy(model).eval()  # the received global model, frozen
        for p in teacher.parameters():
            p.requires_grad_(False)
        loops = g.edge_index[0] == g.edge_index[1]
        clean_edges = g.edge_index[:, ~loops]
        params = [p for p in model.parameters() if p.requires_grad]
        model.train()
        losses: dict[str, float] = {}
        probes: dict[str, float] = {}
        for step in range(self.cfg.local_epochs):
            optimizer.zero_grad()
            ce = F.cross_entropy(model(g.x, g.edge_index)[g.train_mask], g.y[g.train_mask])
            xw, ew, xs, es = self.views(g.x, g.edge_index)
            h = model.embed(xs, es)
            if self.opts.variant == "code":
                target = model.embed(xw, ew)
            else:
                with torch.no_grad():
                    target = teacher.embed(xw, ew)
            parts = self.terms(h, target, clean_edges)
            aux = parts["contrast"] + parts["structure"]
            if step == self.cfg.local_epochs - 1:  # the probes, on the round's last step
                probes = self.gradient_probes(model, params, ce, parts, h, (xw, ew), clean_edges)
            (ce + aux).backward()
            optimizer.step()
            losses = {
                "train_loss": float(ce.detach()),
                "contrast_loss": float(parts["contrast"].detach()),
                "structure_loss": float(parts["structure"].detach()),
            }
        model.eval()
        with torch.no_grad():
            margin = class_margin(
                model.embed(g.x, g.edge_index), teacher.embed(g.x, g.edge_index), g.y, g.train_mask
            )
        return self.training_reply(losses | as_metrics(probes | {"fgssl.class-margin": margin}))

    def gradient_probes(
        self,
        model: nn.Module,
        params: list[nn.Parameter],
        ce: Tensor,
        parts: dict[str, Tensor],
        h: Tensor,
        weak: tuple[Tensor, Tensor],
        clean_edges: Tensor,
    ) -> dict[str, float]:
        """Each term's gradient norm relative to the cross-entropy's (0 when a term has no
        gradient, whatever its value), and the global model's effect on the auxiliary
        gradient: ``||grad aux(teacher) - grad aux(local model as teacher)|| / ||grad aux||``
        on the same views (0 under ``code``, where no teacher enters)."""
        base = grad_norm(ce, params) or 1.0
        probes = {
            "fgssl.contrast-grad": grad_norm(parts["contrast"], params) / base,
            "fgssl.structure-grad": grad_norm(parts["structure"], params) / base,
            "fgssl.teacher-effect": 0.0,
        }
        aux = parts["contrast"] + parts["structure"]
        if self.opts.variant != "code" and aux.requires_grad:
            was = model.training
            model.eval()
            with torch.no_grad():
                own = model.embed(*weak)
            model.train(was)
            other = self.terms(h, own, clean_edges)
            diff = grad_norm(aux - (other["contrast"] + other["structure"]), params)
            probes["fgssl.teacher-effect"] = diff / (grad_norm(aux, params) or 1.0)
        return probes

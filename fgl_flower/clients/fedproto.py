r"""FedProto client (Tan et al., "FedProto: Federated Prototype Learning across Heterogeneous
Clients", AAAI 2022).

The client keeps its own model (nothing of it is uploaded). Each round it trains on

.. math::
    \ell = \ell_{CE} + \lambda\,\ell_{proto}, \qquad
    \ell_{proto} = \frac{1}{|T|} \sum_{v \in T} \frac{1}{h} \lVert z_v - \bar C^{(y_v)} \rVert_2^2

(``fedproto.loss = sample``, the official code's mean squared error of each training node's
representation :math:`z_v` against its class's global prototype; ``class``: that error
averaged within each class and summed over the classes, OpenFGL's), over the training nodes
:math:`T` whose class has a global prototype; :math:`z` is the representation the output
layer reads, from the same forward pass as the logits (:mod:`~fgl_flower.clients.
representation`). Before the first global prototypes arrive (round 1) it trains on
:math:`\ell_{CE}` alone. After training it uploads its prototypes, the mean representation
of its training nodes of each class in eval mode, :math:`C_i^{(j)}` (zeros and a count of 0
for a class it has no training node of), and reports the evaluation of its own model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, RecordDict
from torch import Tensor, nn

from fgl_flower.clients.base import LearnerClient
from fgl_flower.clients.representation import representation, watch_representation
from fgl_flower.methods.fedproto import GLOBAL, PROTOTYPES, FedProtoOptions
from fgl_flower.probes import as_metrics
from fgl_flower.records import get_record, record_torch, torch_record


def prototype_loss(z: Tensor, y: Tensor, prototypes: Tensor, form: str) -> Tensor:
    """:math:`\\ell_{proto}` of representations ``z [n, h]`` with labels ``y [n]`` against
    the global ``prototypes [C, h]`` (``form``: ``sample`` or ``class``)."""
    if form == "sample":
        return F.mse_loss(z, prototypes[y])
    return torch.stack(
        [F.mse_loss(z[y == c], prototypes[c].expand_as(z[y == c])) for c in y.unique()]
    ).sum()


@torch.no_grad()
def margin(z: Tensor, y: Tensor, prototypes: Tensor, present: Tensor) -> float:
    """Mean over the rows of ``z`` of (distance to the nearest other present prototype -
    distance to their own class's), over the mean distance between present prototypes."""
    classes = present.nonzero().view(-1)
    if len(classes) < 2 or len(z) == 0:
        return float("nan")
    d = torch.cdist(z, prototypes[classes])  # [n, K]
    own = (classes[None, :] == y[:, None]).float()
    other = d.masked_fill(own.bool(), float("inf")).min(dim=1).values
    between = torch.cdist(prototypes[classes], prototypes[classes])
    scale = between.sum() / (len(classes) * (len(classes) - 1))
    return float(((other - (d * own).sum(dim=1)) / scale).mean())


class FedProtoClient(LearnerClient):
    """Local model, prototype regulariser, prototypes up (module docstring)."""

    #: the method's options (``weight``, ``loss``) and its probes' prefix (FedTGP's client is
    #: this one with its own)
    options = FedProtoOptions
    probe_prefix = "fedproto"

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.check_can_train()
        o = self.options.from_config(self.cfg)
        g, model = self.data.data, self.learner.model
        record = get_record(content, GLOBAL, ArrayRecord)
        received = record_torch(record) if record is not None and len(record) else None
        terms: list[float] = []
        seen: dict[str, Tensor] = {}
        extra, handle = None, None
        present = received["present"].to(self.device).bool() if received is not None else None
        mask = g.train_mask & present[g.y] if present is not None else None
        if mask is not None and mask.any() and o.weight > 0:  # none: no class of ours is global
            protos = received["prototypes"].to(self.device)
            handle = watch_representation(model, lambda z: seen.__setitem__("z", z))

            def extra(_: nn.Module) -> Tensor:
                term = o.weight * prototype_loss(seen["z"][mask], g.y[mask], protos, o.loss)
                terms.append(float(term.detach()))
                return term

        self.seed_round(server_round)
        try:
            res = self.learner.fit(self.cfg.local_epochs, extra_loss=extra)
        finally:
            if handle is not None:
                handle.remove()
        z = self.train_representations()
        own, counts = self.prototypes(z)
        probes: dict[str, float] = {}
        if terms:
            con = sum(terms) / len(terms)
            probes[f"{self.probe_prefix}.loss-share"] = (
                con / (res["train_loss"] + con) if con > 0 else 0.0
            )
        if received is not None:
            probes[f"{self.probe_prefix}.margin"] = margin(
                z,
                g.y[g.train_mask],
                received["prototypes"].to(self.device),
                received["present"].to(self.device),
            )
        evaluation = self.evaluate_learner(self.learner, server_round)
        reply = self.training_reply({**res, **evaluation, **as_metrics(probes)}, upload=False)
        reply[PROTOTYPES] = torch_record({"prototypes": own, "counts": counts})
        return reply

    @torch.no_grad()
    def train_representations(self) -> Tensor:
        """``[T, h]``: the eval-mode representations of the training nodes (the prototypes'
        and the margin probe's input, computed once a round)."""
        model = self.learner.model
        model.eval()
        return representation(model, self.learner.inputs())[self.data.data.train_mask]

    @torch.no_grad()
    def prototypes(self, z: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``(prototypes [C, h], counts [C])``: the mean eval-mode representation of the
        training nodes of each class (zeros for a class without one); ``z``: those
        representations where already computed (:meth:`train_representations`)."""
        g = self.data.data
        z = self.train_representations() if z is None else z
        y = g.y[g.train_mask]
        c = self.data.num_classes
        counts = torch.bincount(y, minlength=c)
        sums = torch.zeros(c, z.size(1), device=z.device).index_add_(0, y, z)
        return sums / counts.clamp(min=1)[:, None], counts

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        return self.evaluation_reply(server_round)

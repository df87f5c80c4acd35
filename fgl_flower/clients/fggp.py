r"""FGGP client (Wan et al., "Federated Graph Learning under Domain Shift with Generalizable
Prototypes", AAAI 2024), as the official code trains it.

Each round, from the global model :math:`f` (the official code's GCN, or S2FGL's ACM-GCN with
``model = acmgcn``) and augmentor (:mod:`fgl_flower.models.fggp`):

1. **Global knowledge.** Every ``fggp.knn-every`` rounds, the global model's features
   :math:`\mathbf Z_g` (eval mode) give each node its ``fggp.knn-k`` cosine nearest
   neighbours; their edges joined with the client's own and self-loops form
   :math:`\mathbf A_{\text{aug}}` (kept until the next rebuild).
2. ``local-epochs`` steps of

   .. math::
       \mathcal L = \mathcal L_{\text{CE}}(G) + \lambda_v\,\mathcal L_{\text{CE}}(\hat G)
       + \lambda_p\,\mathcal L_{\text{PA}}(\boldsymbol\pi', \boldsymbol\pi)
       + \lambda_r\,\mathcal L_{\text{GA}}(\mathbf S, \mathbf A_{\text{aug}})

   with :math:`\hat G` the augmentor's sampled view (hidden layers over the dense
   :math:`\hat{\mathbf A}`, GCN's output layer over :math:`\mathbf A_{\text{aug}}`'s edges),
   :math:`\boldsymbol\pi, \boldsymbol\pi'` the confidence-weighted class prototypes of the
   clean and the sampled view's features, and :math:`\mathcal L_{\text{GA}}` the augmentor's
   graph reconstruction. Under ``fggp.head=reset`` the classifier layer starts every round
   from its seeded initial weights and stays out of the upload.
3. **Upload**: the weights, and the class prototypes of the trained model's features
   (pseudo-labels of the round's last step) with their classes.

Evaluation (``fggp.evaluate=proto``) classifies the global model's features by the k-NN vote
of the server's prototype memory (:func:`~fgl_flower.models.fggp.prototype_scores`); the
scores' logarithm stands for the logits of the metrics.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, RecordDict
from torch import Tensor

from fgl_flower.clients.base import LearnerClient
from fgl_flower.clients.learner import node_metrics
from fgl_flower.device import cpu_seeded
from fgl_flower.errors import FGLError
from fgl_flower.methods.fggp import MEMORY, PROTOTYPES, FGGPOptions
from fgl_flower.models.fggp import (
    Augmentor,
    FGGPNet,
    dense_normalize,
    knn_edges,
    prototype_contrast,
    prototype_scores,
    prototype_weights,
    reconstruction_loss,
    to_dense,
)
from fgl_flower.models.functional import grad_norm
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import METRICS
from fgl_flower.records import get_record, record_torch, torch_record

#: Client state: the global-knowledge edges, and the round they were built with their new share.
GRAPH, GRAPH_META = "fggp.graph", "fggp.graph-meta"


def new_edge_share(edges: Tensor, own: Tensor, num_nodes: int) -> float:
    """Share of ``edges`` (self-loops left out) that are not in ``own``."""
    key = lambda e: (e[0] * num_nodes + e[1]).unique()  # noqa: E731
    ours = key(edges[:, edges[0] != edges[1]])
    return float((~torch.isin(ours, key(own))).float().mean()) if ours.numel() else 0.0


class FGGPClient(LearnerClient):
    """FGGP's local training and prototype evaluation (module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        n = self.data.data.num_nodes
        if n > self.opts.dense_max_nodes:
            raise FGLError(
                f"Client {self.partition_id} has {n} nodes; FGGP's augmented view is a dense "
                f"[N, N] matrix and fggp.dense-max-nodes={self.opts.dense_max_nodes}. Use more "
                f"clients (smaller subgraphs) or raise fggp.dense-max-nodes if the memory allows "
                f"(about 60 N^2 bytes at a local step's peak)."
            )

    @functools.cached_property
    def opts(self) -> FGGPOptions:
        return FGGPOptions.from_config(self.cfg)

    def build(self, num_features: int, num_classes: int) -> FGGPNet:
        c = self.cfg
        return FGGPNet(num_features, c.hidden, num_classes, c.num_layers, c.dropout, c.model)

    def model_builder(self):
        return self.build

    def shared_prefixes(self) -> tuple[str, ...] | None:
        if self.opts.head == "aggregate":
            return None
        return (
            ("body.convs.", "aug.")
            if self.cfg.model == "acmgcn"
            else tuple(f"body.convs.{i}." for i in range(self.cfg.num_layers - 1)) + ("aug.",)
        )

    def reset_head(self) -> None:
        """The classifier layer back at the run's seeded initial weights."""
        with cpu_seeded(self.cfg.seed):
            initial = self.build(self.data.num_features, self.data.num_classes)
        model = self.learner.model
        head = {k: v for k, v in initial.state_dict().items() if k.startswith(model.head)}
        model.load_state_dict(head, strict=False)
        for name, p in model.named_parameters():  # a kept optimizer forgets the old head's moments
            if name.startswith(model.head):
                self.learner.optimizer.state.pop(p, None)

    # -- global knowledge ------------------------------------------------------------------
    def global_graph(self, server_round: int) -> tuple[Tensor, float]:
        """``(edges of A_aug [2, E'], share of them the k-NN graph adds)``, rebuilt from the
        global model (just loaded) every ``knn-every`` rounds, else the last one."""
        g, o = self.data.data, self.opts
        saved = self.state.get_json(GRAPH_META)
        if saved is not None and server_round - saved["round"] < o.knn_every:
            edges = self.state.load_tensors(GRAPH)["edges"].to(self.device)
            return edges, saved["new-share"]
        model = self.learner.model
        was = model.training
        model.eval()
        with torch.no_grad():
            z = model.features(g.x, model.propagation(g.x, g.edge_index))
        model.train(was)
        loops = torch.arange(g.num_nodes, device=self.device).repeat(2, 1)
        edges = torch.cat([g.edge_index, knn_edges(z, o.knn_k), loops], dim=1)
        edges = torch.unique(edges, dim=1)
        share = new_edge_share(edges, g.edge_index, g.num_nodes)
        self.state.save_tensors(GRAPH, {"edges": edges.cpu()})
        self.state.set_json(GRAPH_META, {"round": server_round, "new-share": share})
        return edges, share

    # -- training ----------------------------------------------------------------------------
    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        if self.opts.head == "reset":
            self.reset_head()
        self.seed_round(server_round)
        o, g = self.opts, self.data.data
        model, optimizer = self.learner.model, self.learner.optimizer
        edges, share = self.global_graph(server_round)
        a_aug = to_dense(edges, g.num_nodes)
        a_norm = dense_normalize(a_aug)
        clean, clean_out = (
            model.propagation(g.x, g.edge_index),
            model.output_propagation(g.x, g.edge_index),
        )
        aug_out = model.output_propagation(g.x, edges)
        augmentor = list(model.aug.parameters())
        train, y = g.train_mask, g.y
        model.train()
        losses: dict[str, float] = {}
        ratios = {"fggp.contrast-grad": 0.0, "fggp.view-grad": 0.0}
        last_logits, probed = None, 0
        for step in range(self.cfg.local_epochs):
            optimizer.zero_grad()
            z, logits = model.propagate(g.x, clean, clean_out)
            ce = F.cross_entropy(logits[train], y[train])
            scores = model.aug.scores(g.x, a_norm)
            a_hat = model.dense_propagation(Augmentor.sample(scores, a_aug, o.alpha, o.temperature))
            z_view, logits_view = model.propagate(g.x, a_hat, aug_out)
            ce_view = F.cross_entropy(logits_view[train], y[train])
            weights, _ = prototype_weights(logits, y, train, self.data.num_classes)
            contrast = prototype_contrast(weights @ z_view, weights @ z, o.tau)
            recon = reconstruction_loss(scores, a_aug)
            parts = {
                "view": o.view_weight * ce_view,
                "contrast": o.contrast_weight * contrast,
                "reconstruction": o.reconstruction_weight * recon,
            }
            if step % o.probe_every == 0:
                probed += 1
                for name, value in self.gradient_probes(ce, parts, (z, z_view), augmentor).items():
                    ratios[name] += value
            (ce + sum(parts.values())).backward()
            optimizer.step()
            last_logits = logits.detach()
            losses = {"train_loss": float(ce.detach())} | {
                f"{k}_loss": float(v.detach()) for k, v in parts.items()
            }
        probes = {k: v / max(probed, 1) for k, v in ratios.items()}  # means over the probed steps
        reply = self.training_reply(losses | as_metrics(probes | {"fggp.knn-new-edges": share}))
        reply[PROTOTYPES] = self.prototypes(last_logits)
        return reply

    @staticmethod
    def gradient_probes(
        ce: Tensor,
        parts: dict[str, Tensor],
        features: tuple[Tensor, Tensor],
        augmentor: list[Tensor],
    ) -> dict[str, float]:
        """One step's probes: the contrast's gradient on the two views' features against the
        cross-entropy's on the clean ones (a contrast cut off from the features reads 0 even
        while the prototype weights' confidences pass it on to the classifier), and the view
        loss's gradient on the augmentor against the reconstruction's (the task's pull on the
        edge sampler; absolute when the reconstruction is off)."""
        contrast = grad_norm(parts["contrast"], list(features)) / (
            grad_norm(ce, [features[0]]) or 1.0
        )
        view = grad_norm(parts["view"], augmentor) / (
            grad_norm(parts["reconstruction"], augmentor) or 1.0
        )
        return {"fggp.contrast-grad": contrast, "fggp.view-grad": view}

    @torch.no_grad()
    def prototypes(self, logits: Tensor | None) -> ArrayRecord:
        """The trained model's class prototypes (eval mode), pseudo-labels from ``logits``
        (the round's last step; the trained model's own when it took none)."""
        g, model = self.data.data, self.learner.model
        model.eval()
        z, own = model.on_graph(g.x, g.edge_index)
        weights, classes = prototype_weights(
            own if logits is None else logits, g.y, g.train_mask, self.data.num_classes
        )
        return torch_record(
            {
                "prototypes": weights @ z,
                "classes": classes,
                "num-classes": torch.tensor([self.data.num_classes]),
            }
        )

    # -- evaluation --------------------------------------------------------------------------
    def memory(self, content: RecordDict) -> tuple[Tensor, Tensor] | None:
        record = get_record(content, MEMORY, ArrayRecord)
        if record is None:
            return None
        t = record_torch(record)
        return t["prototypes"].to(self.device), t["classes"].to(self.device)

    @torch.no_grad()
    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        g, o, model = self.data.data, self.opts, self.learner.model
        memory = self.memory(content)
        if self.eval_dropout():
            self.seed_round(server_round, "evaluate")
        model.train(self.eval_dropout())
        z, logits = model.on_graph(g.x, g.edge_index)
        probes: dict[str, float] = {"fggp.proto-margin": float("nan")}
        if memory is not None:
            probes["fggp.proto-margin"] = self.proto_margin(z, *memory)
        if o.evaluate == "proto":
            if memory is None:
                raise FGLError(
                    f"Round {server_round}: FGGP's evaluation received no prototype memory "
                    f"from the server (it comes with every message after round 1)."
                )
            logits = prototype_scores(z, *memory, self.data.num_classes, o.eval_k, o.eval_tau).log()
        res = node_metrics(logits, self.data) | as_metrics(probes)
        return RecordDict({METRICS: self.metrics(res, res["num-test"])})

    def proto_margin(self, z: Tensor, memory: Tensor, classes: Tensor) -> float:
        """Probe ``fggp.proto-margin`` (:data:`~fgl_flower.methods.fggp.PROBES`) of the features
        ``z`` of the training nodes."""
        g = self.data.data
        onehot = F.one_hot(g.y[g.train_mask], self.data.num_classes).to(z.dtype)
        present = onehot.sum(0) > 0
        means = F.normalize((onehot.t() @ z[g.train_mask])[present], dim=1)
        sim = means @ memory.t()  # [P, Q]
        same = classes[None, :] == torch.nonzero(present).flatten()[:, None]
        both = same.any(1) & (~same).any(1)
        if not both.any():
            return float("nan")
        best_same = sim.masked_fill(~same, -2).max(1).values
        best_other = sim.masked_fill(same, -2).max(1).values
        return float((best_same - best_other)[both].mean())

r"""S2FGL client (Tan et al., "S2FGL: Spatial Spectral Federated Graph Learning", ICML 2025).

Every round the client starts from the global model :math:`\theta` and runs ``local-epochs``
full-batch steps of

.. math::
    \mathcal L = \mathcal L_{\text{CE}} + \lambda_1\,\mathcal L_{\text{FKD}}
               + \lambda_2\,\mathcal L_{\text{FGMA}}

(spec §3.4). The two auxiliary terms compare the local model with a frozen copy of the
received global model on the client's own subgraph: FKD over cosine similarities to the
server's knowledge repository (NLIR, spec §3.2), FGMA over the projections of the
representations onto the low/high-frequency eigenvectors of a kNN feature graph (spec
§3.3). Both start once the repository exists (round 2; ``start-round``); before that, and
with :math:`\lambda_1 = \lambda_2 = 0`, a round is exactly a FedAvg round.

The reply carries the model (``arrays``, weighted by ``num-examples``, i.e. the client's
node count under ``agg-weight=local``) and the class prototypes of the SALC-selected
training nodes with their counts (``s2fgl.prototypes``). Options are ``s2fgl.<name>``
run-config keys (:class:`~fgl_flower.methods.s2fgl.S2FGLOptions`). The train metrics
carry the method's probes (``probe.nlir.share``, ``probe.fgma.share``: each auxiliary
term's share of the local loss, mean over the round's steps;
:data:`fgl_flower.methods.s2fgl.PROBES`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, RecordDict
from torch import Tensor

from fgl_flower.clients.base import LearnerClient, derive_seed
from fgl_flower.methods.s2fgl import PROTOTYPES, REPOSITORY, S2FGLOptions
from fgl_flower.models.s2fgl import (
    class_prototypes,
    fgma_loss,
    fkd_loss,
    personalized_pagerank,
    salc,
    spectral_basis,
    top_training_nodes,
)
from fgl_flower.probes import as_metrics
from fgl_flower.records import get_record, torch_record

NODE_SETS = "s2fgl.node-sets"  # client state: SALC-selected node indices


class S2FGLClient(LearnerClient):
    """FedAvg client with the NLIR and FGMA regularisers and prototype upload."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.opts = S2FGLOptions.from_config(self.cfg)

    def selected_nodes(self) -> tuple[Tensor, Tensor]:
        """SALC-ranked training nodes: ``(prototype nodes, FGMA nodes)`` (spec §3.1).

        Static: computed in the first round (a dense ``N x N`` inverse) and kept in the
        client's state.
        """
        saved = self.state.load_tensors(NODE_SETS)
        if saved is None:
            g = self.data.data
            ppr = personalized_pagerank(g.edge_index, g.num_nodes, self.opts.ppr_alpha)
            score = salc(ppr, g.train_mask, self.opts.ppr_alpha)
            saved = {
                "proto": top_training_nodes(score, g.train_mask, self.opts.proto_divisor),
                "fgma": top_training_nodes(score, g.train_mask, self.opts.fgma_divisor),
            }
            self.state.save_tensors(NODE_SETS, saved)
        return saved["proto"].to(self.device), saved["fgma"].to(self.device)

    def basis(self, z: Tensor, server_round: int, step: int) -> tuple[Tensor, Tensor]:
        o = self.opts
        return spectral_basis(
            z,
            o.knn,
            o.eigvecs,
            o.eig_mode,
            seed=derive_seed(self.cfg.seed, self.partition_id, server_round, step),
            cap=o.eig_cap,
        )

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        self.seed_round(server_round)
        o, g = self.opts, self.data.data
        model = self.learner.model
        proto_nodes, fgma_nodes = self.selected_nodes()
        record = get_record(content, REPOSITORY, ArrayRecord)
        active = (
            record is not None
            and server_round >= o.start_round
            and (o.lambda1 > 0 or o.lambda2 > 0)
        )
        if active:
            repository = record.to_torch_state_dict()["anchors"].to(self.device)
            # The frozen global model is only needed for these features: the model itself
            # still holds the received weights, so no copy is made.
            model.eval()
            with torch.no_grad():
                h_global = model.embed(g.x, g.edge_index)
            z_global = h_global[fgma_nodes]
            basis_global = self.basis(z_global, server_round, -1)

        model.train()
        losses = {"train_loss": 0.0, "fkd_loss": 0.0, "fgma_loss": 0.0}  # of the last step
        shares = {"nlir.share": 0.0, "fgma.share": 0.0}  # summed over the steps
        h_last = torch.empty(0)
        for step in range(self.cfg.local_epochs):
            self.learner.optimizer.zero_grad()
            h = model.embed(g.x, g.edge_index)
            ce = F.cross_entropy(model.classifier(h)[g.train_mask], g.y[g.train_mask])
            loss = ce
            losses["train_loss"] = ce.item()
            if active:
                if o.lambda1 > 0:
                    fkd = fkd_loss(h, h_global, repository, o.temperature)
                    loss = loss + o.lambda1 * fkd
                    losses["fkd_loss"] = fkd.item()
                if o.lambda2 > 0:
                    z = h[fgma_nodes]
                    fgma = fgma_loss(z, self.basis(z, server_round, step), z_global, basis_global)
                    loss = loss + o.lambda2 * fgma
                    losses["fgma_loss"] = fgma.item()
                total = loss.item()
                if total > 0:
                    shares["nlir.share"] += (
                        o.lambda1 * losses["fkd_loss"] / total if o.lambda1 > 0 else 0.0
                    )
                    shares["fgma.share"] += (
                        o.lambda2 * losses["fgma_loss"] / total if o.lambda2 > 0 else 0.0
                    )
            h_last = h.detach()
            loss.backward()
            self.learner.optimizer.step()

        # Prototypes from the last step's (train-mode) representations, as the code does.
        protos, counts = class_prototypes(h_last, g.y, proto_nodes, self.data.num_classes)
        steps = max(self.cfg.local_epochs, 1)
        reply = self.training_reply(losses | as_metrics({k: v / steps for k, v in shares.items()}))
        reply[PROTOTYPES] = torch_record({"prototypes": protos, "counts": counts})
        return reply

    def eval_dropout(self) -> bool:
        """``eval-dropout``, or this method's own ``s2fgl.eval-dropout`` (the same switch,
        older; the recorded commands of docs/results/s2fgl.md use it)."""
        return self.cfg.eval_dropout or self.opts.eval_dropout

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        return self.evaluation_reply(server_round)

r"""AdaFGL client (Li et al., ICDE 2024): FedAvg's in step 1; in step 2 its own modules on
the federated knowledge extractor (:mod:`fgl_flower.models.adafgl`).

In its first step-2 round the client keeps the received global model as the extractor (its
learner, never trained again) and builds, once per round from it and the local subgraph
(deterministic, so nothing derived is stored):

* :math:`P`, the extractor's eval-mode class probabilities of every local node;
* :math:`A_P = [S(P) > \tau]` and :math:`\tilde A = \alpha A + (1-\alpha) A_P`, normalized;
  :math:`X_K`, the features propagated :math:`K` steps over it;
* the HCS from label propagation over the original :math:`A` (its halves drawn from the run
  seed and the partition).

It then trains its modules (:class:`~fgl_flower.models.adafgl.AdaFGLModel`; seeded from the
run seed and partition, Adam, both kept in the client state) ``adafgl.epochs`` steps a round
on the training nodes:

.. math::
    \ell = \underbrace{\mathrm{CE}(H_T, y_T) + \mathrm{MSE}(H, P)}_{homo}
         + \underbrace{\mathrm{CE}(H_{loc,T}, y_T) + \mathrm{CE}(H_{smooth,T}, y_T)
         + \mathrm{CE}(O_T, y_T)}_{hete}

(``fusion = mix``: both; ``switch``: only the module the HCS picked) and uploads nothing.
Its prediction is :math:`w\,\hat Y_{homo} + (1 - w)\,\hat Y_{hete}` with :math:`w` the HCS
(``mix``) or 1/0 (``switch``); the reported losses are the negative log of the predicted
class probabilities (OpenFGL reports a cross-entropy of the probabilities taken as logits).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from flwr.app import RecordDict
from torch import Tensor

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.learner import make_adam, node_metrics
from fgl_flower.device import manual_seed
from fgl_flower.errors import FGLError
from fgl_flower.methods.adafgl import AdaFGLOptions
from fgl_flower.models import adafgl as ops
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import METRICS
from fgl_flower.seeds import derive_seed

MODEL = "adafgl.model"
OPTIMIZER = "adafgl.optimizer"


class Knowledge:
    """What step 2 derives from the extractor on one client (module docstring)."""

    def __init__(self, client: AdaFGLClient, o: AdaFGLOptions) -> None:
        g, model = client.data.data, client.learner.model
        n = g.num_nodes
        if n > ops.MAX_NODES:
            raise FGLError(
                f"Partition {client.partition_id} has {n} nodes; AdaFGL's similarity matrices are "
                f"dense [n, n], about a dozen of {4 * n * n / 2**30:.1f} GiB each in a training step "
                f"(the limit is {ops.MAX_NODES} nodes): use more clients."
            )
        model.eval()
        with torch.no_grad():
            self.probs = F.softmax(client.learner.logits(), dim=1)
            adj = ops.dense_adjacency(g.edge_index, n)
            self.edges = ops.knowledge_edges(self.probs, o.threshold)
            topology = ops.normalize(ops.knowledge_adjacency(adj, self.edges, o.alpha), o.r)
            self.x = g.x.to_dense() if g.x.is_sparse else g.x  # [n, F]
            self.x_k = ops.propagated_features(topology, self.x, o.steps)
            generator = torch.Generator().manual_seed(
                derive_seed(client.cfg.seed, client.partition_id, "adafgl-hcs")
            )
            self.hcs = ops.homophily_confidence(
                ops.normalize(adj, o.r),
                g.y,
                g.train_mask,
                client.data.num_classes,
                generator,
                o.lp_steps,
                o.lp_alpha,
            )
            self.added_edges = float(self.edges.sum()) / max(float(adj.sum()), 1.0)
        hcs = 0.0 if self.hcs != self.hcs else self.hcs  # nan (under 2 training nodes): hete
        if o.fusion == "mix":
            self.modules, self.weight = ("homo", "hete"), hcs
        elif hcs >= o.hcs_threshold:
            self.modules, self.weight = ("homo",), 1.0
        else:
            self.modules, self.weight = ("hete",), 0.0


class AdaFGLClient(FedAvgClient):
    """FedAvg, then the personalized modules (module docstring)."""

    _knowledge: Knowledge | None = None

    def refresh(self) -> None:
        super().refresh()
        self._knowledge = None  # derived again from the state for each message

    def personal(self, server_round: int) -> bool:
        return server_round > AdaFGLOptions.from_config(self.cfg).fed_rounds

    def build(self, o: AdaFGLOptions) -> tuple[Knowledge, ops.AdaFGLModel, torch.optim.Optimizer]:
        """The round's knowledge (derived once a message: a fused message evaluates, then
        trains, on the same extractor) and the client's modules and optimizer, as saved (or
        new)."""
        if self._knowledge is None:
            self._knowledge = Knowledge(self, o)
        knowledge = self._knowledge
        manual_seed(derive_seed(self.cfg.seed, self.partition_id, "adafgl-init"), self.device)
        model = ops.AdaFGLModel(
            self.data.num_features,
            o.steps,
            self.cfg.hidden,
            self.data.num_classes,
            self.cfg.dropout,  # both codes: 0.5, their step-1 default
            o.beta,
            knowledge.modules,
        ).to(self.device)
        optimizer = make_adam(model.parameters(), o.lr, o.weight_decay)
        if self.state.load_module(MODEL, model):
            self.state.load_optimizer(OPTIMIZER, optimizer)
        return knowledge, model, optimizer

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        if not self.personal(server_round):
            return super().train(content, server_round)
        o = AdaFGLOptions.from_config(self.cfg)
        if MODEL not in self.state:  # the first step-2 round: the received model is the extractor
            self.load_global(content)
            if not self.global_received:
                raise FGLError(
                    f"Partition {self.partition_id} got no extractor in its first AdaFGL step-2 "
                    "round (its client state was lost?): start the run again."
                )
        knowledge, model, optimizer = self.build(o)
        g = self.data.data
        y, train = g.y, g.train_mask
        kd_terms: list[float] = []
        losses: list[float] = []
        self.seed_round(server_round)
        model.train()
        for _ in range(o.epochs):
            optimizer.zero_grad()
            loss = torch.zeros((), device=self.device)
            if model.homo is not None:
                h = model.homo(knowledge.x_k)
                ce, kd = F.cross_entropy(h[train], y[train]), F.mse_loss(h, knowledge.probs)
                loss = loss + ce + kd
                kd_terms.append(float(kd.detach()) / max(float((ce + kd).detach()), 1e-12))
            if model.hete is not None:
                outs = model.hete(knowledge.x, knowledge.x_k, knowledge.edges)
                loss = loss + sum(F.cross_entropy(out[train], y[train]) for out in outs)
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        self.state.save_module(MODEL, model)
        self.state.save_optimizer(OPTIMIZER, optimizer)
        probes = {
            "adafgl.added-edges": knowledge.added_edges,
            "adafgl.hcs": knowledge.hcs,
            "adafgl.homo-weight": knowledge.weight,
        }
        if kd_terms:
            probes["adafgl.kd-share"] = sum(kd_terms) / len(kd_terms)
        res = {"train_loss": losses[-1]}  # as FedAvg's learner: the last step's
        return self.training_reply({**res, **as_metrics(probes)}, upload=False)

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        if not self.personal(server_round) or MODEL not in self.state:
            return super().evaluate(content, server_round)
        o = AdaFGLOptions.from_config(self.cfg)
        knowledge, model, _ = self.build(o)
        if self.eval_dropout():
            self.seed_round(server_round, "evaluate")
        model.train(self.eval_dropout())
        with torch.no_grad():
            probs = self.predict(model, knowledge)
            res = node_metrics(torch.log(probs.clamp(min=1e-12)), self.data)
            extractor = node_metrics(torch.log(knowledge.probs.clamp(min=1e-12)), self.data)
        res.update(as_metrics({"adafgl.gain": res["val_acc"] - extractor["val_acc"]}))
        return RecordDict({METRICS: self.metrics(res, res["num-test"])})

    def predict(self, model: ops.AdaFGLModel, knowledge: Knowledge) -> Tensor:
        """``[n, C]``: the fused class probabilities (module docstring)."""
        homo = (
            ops.homo_probs(model.homo(knowledge.x_k), knowledge.probs)
            if model.homo is not None
            else None
        )
        hete = (
            ops.hete_probs(model.hete(knowledge.x, knowledge.x_k, knowledge.edges))
            if model.hete is not None
            else None
        )
        return ops.fuse(homo, hete, knowledge.weight)

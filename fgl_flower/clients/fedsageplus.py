r"""FedSage+ client (Zhang et al., NeurIPS 2021): a missing-neighbour generator trained across
clients, then FedAvg of a classifier on the client's subgraph mended with generated neighbours.

**Generator rounds** (``1..fedsageplus.gen-rounds``). The client hides part of its validation
nodes; on the remaining (impaired) graph its generator (:class:`~fgl_flower.models.fedsage.
LocSagePlus`) predicts each node's number of hidden neighbours and their features. Before its
first federated step it trains alone for ``pretrain-epochs``. Each round then:

1. ``query.generate``: it runs the generator (seeded by the round) and replies the features it
   generates for its training nodes, ``[T, K, D]``, with their predicted and true counts;
2. ``query.cross_grad``: it receives the other clients' generated features and returns, for
   each, the gradient of the feature loss against targets drawn from *its own* subgraph
   (centres with replacement, ``K`` neighbours each, as the codes draw them);
3. ``train``: it recomputes the same forward and steps on

   .. math::
       \frac1M\Big[a\,\mathcal L_d + b\,\mathcal L_f + c\,\mathcal L_c + b\sum_{j\neq i}
       \mathcal L_f^{(i\leftarrow j)}\Big]

   with the others' terms entering through the gradients they returned (the chain rule
   through its own generator: the same update as gradients of its parameters, which the paper
   has the clients share, with ``[T, K, D]`` floats per pair instead of the generator's
   millions of parameters; both reveal the same about the targets).

**Classifier rounds.** On the first, the client mends its original subgraph with the generated
neighbours of every non-hidden node (kept in its state), and from then on it is a FedAvg client
of the run's backbone on the mended graph; its evaluation covers its real nodes only.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, ConfigRecord, RecordDict
from torch import Tensor
from torch_geometric.utils import to_undirected

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.learner import NodeLearner, make_adam
from fgl_flower.datasets import NodeClientData
from fgl_flower.device import cpu_seeded
from fgl_flower.methods.fedsageplus import (
    CROSS,
    GENERATED,
    GRADIENTS,
    ROUND_CLIENTS,
    FedSagePlusOptions,
)
from fgl_flower.models.fedsage import (
    LocSagePlus,
    feature_loss,
    hide_nodes,
    impaired_graph,
    mend,
    missing_neighbours,
    neighbour_features,
    owner_fit,
    sample_targets,
)
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import ARRAYS, CONFIG, METRICS, NUM_LOCAL, SERVER_ROUND
from fgl_flower.records import get_record, record_torch, require_record, torch_record
from fgl_flower.seeds import derive_seed

#: Client state: the generator, its optimizer, whether it was pre-trained, the mended graph.
GENERATOR, OPTIMIZER, PRETRAINED, MENDED = (
    "fedsageplus.gen",
    "fedsageplus.gen-optim",
    "fedsageplus.pretrained",
    "fedsageplus.mended",
)


class MendedLearner(NodeLearner):
    """A node learner on a mended graph: the generated nodes are not examples (they carry no
    split), so the client's size (``num-local``, the client-size weight) counts real nodes."""

    def __init__(self, *args, real_nodes: int, **kwargs) -> None:
        self.real_nodes = real_nodes
        super().__init__(*args, **kwargs)

    @property
    def num_local(self) -> int:
        return self.real_nodes

    def evaluate(self, train_mode: bool = False) -> dict[str, float]:
        return {**super().evaluate(train_mode), NUM_LOCAL: float(self.real_nodes)}


class FedSagePlusClient(FedAvgClient):
    def __init__(self, cfg, data: NodeClientData, state, partition_id: int) -> None:
        self.opts = FedSagePlusOptions.from_config(cfg)
        self.original = data
        saved = state.load_tensors(MENDED)
        self.mended = saved is not None
        super().__init__(
            cfg, self.mended_data(data, saved) if self.mended else data, state, partition_id
        )
        if self.mended:  # the learner of a later classifier round: on the mended graph
            self.learner = MendedLearner(
                self.cfg, self.data, self.device, real_nodes=data.data.num_nodes
            )
            self.learner.restore(self.state)
            self.forget_generator()  # a checkpoint written before 2026-12-04 still holds it
        self._impaired: dict[str, Tensor] | None = None
        self._owner_fit: float | None = None

    # -- the classifier's data -------------------------------------------------------------
    @staticmethod
    def mended_data(data: NodeClientData, saved: dict[str, Tensor]) -> NodeClientData:
        """The client's data on the mended graph: its own nodes, then the ``generated`` rows
        (a checkpoint written before 2026-12-04 holds the whole ``x`` instead)."""
        g = data.data
        if "x" in saved:
            x = saved["x"].to(g.y.device)
        else:
            own = g.x.to_dense() if g.x.is_sparse else g.x
            x = torch.cat([own, saved["generated"].to(device=g.y.device, dtype=own.dtype)])
        n, extra = g.num_nodes, x.size(0) - g.num_nodes
        pad = torch.zeros(extra, dtype=torch.bool, device=g.y.device)
        graph = replace(
            g,
            x=x,
            edge_index=saved["edge_index"].to(g.y.device),
            y=torch.cat([g.y, torch.zeros(extra, dtype=g.y.dtype, device=g.y.device)]),
            train_mask=torch.cat([g.train_mask, pad]),
            val_mask=torch.cat([g.val_mask, pad]),
            test_mask=torch.cat([g.test_mask, pad]),
            global_id=torch.cat(
                [g.global_id, torch.full((extra,), -1, dtype=g.global_id.dtype, device=g.y.device)]
            ),
        )
        assert graph.num_nodes == n + extra
        return replace(data, data=graph, _copies={})

    def use_mended_graph(self, saved: dict[str, Tensor]) -> None:
        """Switch the classifier to the mended graph: a fresh learner (the seeded initial
        model, as every client's) whose size counts the real nodes."""
        self.data = self.mended_data(self.original, saved).to(self.device)
        self.learner = MendedLearner(
            self.cfg, self.data, self.device, real_nodes=self.original.data.num_nodes
        )
        self.mended = True

    # -- the generator ---------------------------------------------------------------------
    def impaired(self) -> dict[str, Tensor]:
        """The impaired graph and the generator's targets (deterministic from the run seed)."""
        if self._impaired is None:
            g = self.original.to(self.device).data
            o = self.opts
            hidden = hide_nodes(
                g.val_mask,
                o.hidden_portion,
                torch.Generator().manual_seed(
                    derive_seed(self.cfg.seed, self.partition_id, "fedsage-hide")
                ),
            )
            kept, edges = impaired_graph(g.edge_index, hidden)
            # a neighbour either way, as the codes count them on undirected edge lists
            count, index = missing_neighbours(
                to_undirected(g.edge_index, num_nodes=g.num_nodes), hidden, o.num_pred
            )
            x = g.x.to_dense() if g.x.is_sparse else g.x
            self._impaired = {
                "hidden": hidden,
                "kept": kept,
                "edge_index": edges,
                "x": x[kept],
                "y": g.y[kept],
                "train": g.train_mask[kept],
                "count": count,
                "target": neighbour_features(x, index),
            }
        return self._impaired

    def generator(self) -> LocSagePlus:
        o = self.opts
        with cpu_seeded(derive_seed(self.cfg.seed, "fedsage-generator")):
            model = LocSagePlus(
                self.data.num_features,
                self.data.num_classes,
                o.num_pred,
                o.gen_hidden,
                o.latent,
                o.gen_dropout,
            )
        self.state.load_module(GENERATOR, model)
        return model.to(self.device)

    def generator_loss(
        self, model: LocSagePlus, out: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, dict[str, float]]:
        """:math:`a\\mathcal L_d + b\\mathcal L_f + c\\mathcal L_c` on the impaired graph's
        training nodes, the classifier's on the impaired graph mended with ``out``."""
        o, imp = self.opts, self.impaired()
        pred_count, feats = out
        train = imp["train"]
        loss_d = F.smooth_l1_loss(pred_count[train], imp["count"][train])
        loss_f = feature_loss(
            feats[train], imp["target"][train], pred_count[train], imp["count"][train], o.matching
        )
        n = imp["x"].size(0)
        x2, e2 = mend(
            imp["x"],
            imp["edge_index"],
            torch.arange(n, device=feats.device),
            pred_count,
            feats,
            o.undirected,
        )
        loss_c = F.cross_entropy(model.cls(x2, e2)[:n][train], imp["y"][train])
        total = o.loss_count * loss_d + o.loss_feat * loss_f + o.loss_cls * loss_c
        return total, {
            "count_loss": loss_d.item(),
            "feature_loss": loss_f.item(),
            "gen_cls_loss": loss_c.item(),
        }

    def pretrain(self, model: LocSagePlus) -> None:
        """The local generator epochs before the federated ones (once)."""
        if self.state.get_json(PRETRAINED):
            return
        model.train()
        optimizer = make_adam(model.parameters(), self.opts.gen_lr, self.opts.gen_weight_decay)
        imp = self.impaired()
        for epoch in range(self.opts.pretrain_epochs):
            self.seed_round(0, f"fedsage-pretrain-{epoch}")
            optimizer.zero_grad()
            loss, _ = self.generator_loss(model, model.gen(imp["x"], imp["edge_index"]))
            loss.backward()
            optimizer.step()
        self.state.save_module(GENERATOR, model)
        self.state.set_json(PRETRAINED, True)

    def generate(self, model: LocSagePlus, server_round: int) -> tuple[Tensor, Tensor]:
        """This round's generator forward, seeded so that the query and the train message
        compute the same one."""
        self.seed_round(server_round, "fedsage-generate")
        model.train()
        imp = self.impaired()
        return model.gen(imp["x"], imp["edge_index"])

    def query(self, action: str, content: RecordDict) -> RecordDict:
        server_round = int(require_record(content, CONFIG, ConfigRecord)[SERVER_ROUND])
        if action == "generate":
            model = self.generator()
            self.pretrain(model)
            with torch.no_grad():
                pred_count, feats = self.generate(model, server_round)
            train = self.impaired()["train"]
            return RecordDict(
                {
                    GENERATED: torch_record(
                        {
                            "feats": feats[train],
                            "pred": pred_count[train],
                            "true": self.impaired()["count"][train],
                        }
                    ),
                    METRICS: self.metrics({}, float(train.sum())),
                }
            )
        if action == "cross_grad":
            return self.cross_gradients(
                record_torch(require_record(content, CROSS, ArrayRecord)), server_round
            )
        return super().query(action, content)

    def cross_gradients(self, others: dict[str, Tensor], server_round: int) -> RecordDict:
        """For each other client's generated features: the gradient of the feature loss against
        targets drawn from this client's original subgraph."""
        g = self.original.to(self.device).data
        edges = to_undirected(g.edge_index, num_nodes=g.num_nodes)  # a neighbour either way
        grads, losses = {}, {}
        for key in sorted(k for k in others if k.startswith("feats.")):
            pid = key.removeprefix("feats.")
            feats = others[key].to(self.device).requires_grad_(True)
            draws = torch.Generator().manual_seed(
                derive_seed(
                    self.cfg.seed, self.partition_id, server_round, int(pid), "fedsage-cross"
                )
            )
            targets = sample_targets(g.x, edges, feats.size(0), self.opts.num_pred, draws).to(
                self.device
            )
            loss = feature_loss(
                feats,
                targets,
                others[f"pred.{pid}"].to(self.device),
                others[f"true.{pid}"].to(self.device),
                self.opts.matching,
            )
            grads[f"grad.{pid}"] = torch.autograd.grad(loss, feats)[0]
            losses[pid] = loss.item()
        metrics = self.metrics({"cross_loss": sum(losses.values()) / max(len(losses), 1)}, 1.0)
        return RecordDict({GRADIENTS: torch_record(grads), METRICS: metrics})

    # -- messages --------------------------------------------------------------------------
    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        if server_round <= self.opts.gen_rounds:
            return self.train_generator(content, server_round)
        self.ensure_mended()
        return super().train(content, server_round)

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        """The classifier on the mended graph from the classifier rounds on (mended here if this
        client has not trained since: the same graph its train message would build)."""
        if server_round > self.opts.gen_rounds:
            self.ensure_mended()
        return super().evaluate(content, server_round)

    def ensure_mended(self) -> None:
        """Switch to the mended graph, mending it first if this client has not yet."""
        if not self.mended:
            self.use_mended_graph(self.mend_graph())

    def train_generator(self, content: RecordDict, server_round: int) -> RecordDict:
        o = self.opts
        model = self.generator()
        self.pretrain(model)
        params = model.parameters() if o.trainable == "all" else model.gen.fgen.parameters()
        optimizer = make_adam(list(params), o.gen_lr, o.gen_weight_decay)
        self.state.load_optimizer(OPTIMIZER, optimizer)
        config = require_record(content, CONFIG, ConfigRecord)
        m = max(int(config.get(ROUND_CLIENTS, 1)), 1)
        optimizer.zero_grad()
        out = self.generate(model, server_round)
        own, parts = self.generator_loss(model, out)
        loss = own / m
        probes = {"fedsageplus.cross-grad": 0.0}
        received = get_record(content, GRADIENTS, ArrayRecord)
        if received is not None and o.cross:
            train = self.impaired()["train"]
            cross = record_torch(received)["grad"].to(out[1].device) * (o.loss_feat / m)
            own_grad = torch.autograd.grad(loss, out[1], retain_graph=True)[0][train]
            probes["fedsageplus.cross-grad"] = float(
                cross.norm() / own_grad.norm().clamp_min(1e-12)
            )
            loss = (
                loss + (out[1][train] * cross).sum()
            )  # its gradient: the others' terms, by the chain rule
        loss.backward()
        optimizer.step()
        self.state.save_module(GENERATOR, model)
        self.state.save_optimizer(OPTIMIZER, optimizer)
        metrics = {"gen_loss": own.item(), **parts, **as_metrics(probes)}
        return RecordDict(
            {ARRAYS: ArrayRecord(), METRICS: self.metrics(metrics, self.aggregation_weight())}
        )

    @torch.no_grad()
    def mend_graph(self) -> dict[str, Tensor]:
        """The original subgraph plus every kept node's generated neighbours, from one
        evaluation-mode forward of the trained generator (noise seeded); the generated rows
        and the mended edges are saved in the state, and the generator is dropped from it."""
        model = self.generator()
        with torch.enable_grad():
            self.pretrain(model)  # a client never sampled in the generator rounds: its local epochs
        model.eval()
        imp = self.impaired()
        self.seed_round(self.opts.gen_rounds + 1, "fedsage-mend")
        pred_count, feats = model.gen(imp["x"], imp["edge_index"])
        g = self.original.to(self.device).data
        x, edges = mend(g.x, g.edge_index, imp["kept"], pred_count, feats, self.opts.undirected)
        saved = {"generated": x[g.num_nodes :].cpu(), "edge_index": edges.cpu()}
        self.state.save_tensors(MENDED, saved)
        self.forget_generator()
        return saved

    def forget_generator(self) -> None:
        """Drop the generator from the state once the graph is mended: its weights and Adam
        moments (on Cora 3 x 59 MB, the feature head's 2048 x K*D) would otherwise travel
        with every message and be checkpointed every round; nothing uses them again."""
        for key in (GENERATOR, OPTIMIZER, PRETRAINED):
            self.state.discard(key)

    def after_fit(self) -> dict[str, float]:
        """The classifier-round probes: generated neighbours per real node, whether they
        belong to the node they are attached to, and how much they change the real nodes'
        logits (the trained model, evaluation mode)."""
        model, n = self.learner.model, self.original.data.num_nodes
        g, o = self.data.data, self.original.to(self.device).data
        was = model.training
        model.eval()
        with torch.no_grad():
            mended = model(g.x, g.edge_index)[:n]
            plain = model(o.x, o.edge_index)
        model.train(was)
        effect = float((mended - plain).norm() / plain.norm().clamp_min(1e-12))
        if self._owner_fit is None:  # the mended graph is fixed: once per client instance
            draws = torch.Generator().manual_seed(
                derive_seed(self.cfg.seed, self.partition_id, "fedsage-owner-fit")
            )
            fit = owner_fit(g.x, g.edge_index, n, draws)
            self._owner_fit = float("nan") if fit is None else fit
        return as_metrics(
            {
                "fedsageplus.generated": (g.num_nodes - n) / max(n, 1),
                "fedsageplus.feature-effect": effect,
                "fedsageplus.owner-fit": self._owner_fit,
            }
        )

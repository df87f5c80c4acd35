r"""FedDEP client (Zhang et al., SDM 2024): a generator of missing neighbours' *embeddings*,
trained across clients against *prototypes*, then FedAvg of a classifier fed each node's
generated neighbour embeddings.

**Preparation** (once, seeded, kept in the client's state). An encoder
(:class:`~fgl_flower.models.feddep.EmbeddingEncoder`) trains ``encoder-epochs`` full-batch
epochs on the client's training labels; its embeddings :math:`\mathbf h_v` ``[N, H]`` are
clustered into ``num-protos`` groups by k-means, and each node is represented by its cluster
mean :math:`\mathbf p(v)`. Half of the validation nodes (``hide-portion``) are hidden as in
FedSage+; for each kept node the targets are the number of its hidden neighbours
:math:`n_v` and the prototypes of the first ``K`` of them, ``[N', K, H]``.

**Generator rounds** (``1..feddep.gen-rounds``). The generator
(:class:`~fgl_flower.models.feddep.LocalDGen`) trains alone for ``pretrain-epochs`` before its
first federated step, on

.. math::
    \mathcal L = \beta_d\,\mathcal L_d + \beta_n\,\mathcal L_n + \beta_c\,\mathcal L_c

(smooth-L1 of the counts, the reconstruction loss of the generated embeddings against the
hidden neighbours' prototypes with slots up to the rounded predicted count, and the internal
classifier's cross-entropy; training nodes of the impaired graph). Each round then:

1. ``query.generate``: it runs the generator (seeded by the round) and replies the embeddings
   it generates for every node of its impaired graph with the predicted counts;
2. ``query.cross_grad``: for each other client's embeddings it draws prototype targets from
   its own subgraph (:func:`~fgl_flower.models.feddep.draw_targets`) and returns the gradient
   of the reconstruction loss :math:`\mathcal L_n^{(i\leftarrow j)}` (all ``K`` targets valid,
   slots up to the truncated predicted count) with respect to them;
3. ``train``: it recomputes the same forward and takes one Adam step on
   :math:`\frac1M[\mathcal L + \beta_n\sum_{j\neq i}\mathcal L_n^{(i\leftarrow j)}]`, the
   others' terms entering by the chain rule through its generated embeddings; the step moves
   the embedding head only (``trainable = fgen``, the official code, which freezes the
   encoder, count head and classifier there) or all of the generator (``all``, OpenFGL).

**Classifier rounds.** On the first, the client runs its generator once (evaluation mode) and
stores each node's mended embedding :math:`\mathbf e_v` (the mean of its generated neighbour
embeddings over the ``K`` slots, zero for hidden nodes); from then on it is a FedAvg client of
:class:`~fgl_flower.models.feddep.FedDEPClassifier` on ``[X, E]``.
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
from fgl_flower.methods.feddep import CROSS, GENERATED, GRADIENTS, ROUND_CLIENTS, FedDEPOptions
from fgl_flower.models.feddep import (
    EmbeddingEncoder,
    FedDEPClassifier,
    LocalDGen,
    draw_targets,
    kmeans,
    mended_embedding,
    prototype_gap,
    prototypes,
    slot_counts,
)
from fgl_flower.models.fedsage import (
    feature_loss,
    hide_nodes,
    impaired_graph,
    missing_neighbours,
    neighbour_features,
)
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import ARRAYS, CONFIG, METRICS, SERVER_ROUND
from fgl_flower.records import get_record, record_torch, require_record, torch_record
from fgl_flower.seeds import derive_seed

#: Client state: the prototype targets, the generator, its optimizer, whether it was
#: pre-trained, and the mended embeddings.
PREPARED, GENERATOR, OPTIMIZER, PRETRAINED, MENDED = (
    "feddep.prepared",
    "feddep.gen",
    "feddep.gen-optim",
    "feddep.pretrained",
    "feddep.mended",
)


def with_embedding(data: NodeClientData, emb: Tensor) -> NodeClientData:
    """The client's data with each node's mended embedding ``emb [N, H]`` appended to its
    features: ``x' = [X, E]`` ``[N, D + H]`` (the classifier splits it again)."""
    g = data.data
    x = g.x.to_dense() if g.x.is_sparse else g.x
    graph = replace(g, x=torch.cat([x, emb.to(device=x.device, dtype=x.dtype)], 1))
    return replace(data, data=graph, num_features=x.size(1) + emb.size(1), _copies={})


class FedDEPClient(FedAvgClient):
    def __init__(self, cfg, data: NodeClientData, state, partition_id: int) -> None:
        self.opts = FedDEPOptions.from_config(cfg)
        self.original = data
        saved = state.load_tensors(MENDED)
        self.mended = saved is not None
        super().__init__(
            cfg, with_embedding(data, saved["emb"]) if self.mended else data, state, partition_id
        )
        self._prepared: dict[str, Tensor] | None = None

    # -- the classifier --------------------------------------------------------------------
    def model_builder(self):
        """FedDEP's classifier once the embeddings are mended (``D + H`` inputs); before, the
        run's backbone, which no generator round trains or evaluates."""
        if not self.mended:
            return None
        c = self.cfg

        def build(num_features: int, num_classes: int) -> FedDEPClassifier:
            h = c.hidden
            return FedDEPClassifier(
                num_features - h, h, c.hidden, num_classes, c.num_layers, c.dropout
            )

        return build

    def use_mended(self, saved: dict[str, Tensor]) -> None:
        """Switch to the mended data: a fresh learner (the seeded initial classifier, as every
        client's)."""
        self.mended = True
        self.data = with_embedding(self.original, saved["emb"]).to(self.device)
        self.learner = NodeLearner(self.cfg, self.data, self.device, self.model_builder())

    def ensure_mended(self) -> None:
        if not self.mended:
            self.use_mended(self.mend())

    # -- preparation: prototypes, hiding, targets ------------------------------------------
    def embeddings(self) -> Tensor:
        """``[N, H]``: the trained encoder's embeddings of the client's nodes (eval mode)."""
        g, c, o = self.original.to(self.device).data, self.cfg, self.opts
        with cpu_seeded(derive_seed(c.seed, self.partition_id, "feddep-encoder")):
            encoder = EmbeddingEncoder(
                self.original.num_features,
                c.hidden,
                self.original.num_classes,
                c.num_layers,
                o.gen_dropout,
            )
        encoder = encoder.to(self.device)
        optimizer = make_adam(encoder.parameters(), o.gen_lr, o.gen_weight_decay)
        self.seed_round(0, "feddep-encoder")
        encoder.train()
        for _ in range(o.encoder_epochs):
            optimizer.zero_grad()
            out = encoder(g.x, g.edge_index)
            F.cross_entropy(out[g.train_mask], g.y[g.train_mask]).backward()
            optimizer.step()
        encoder.eval()
        with torch.no_grad():
            return encoder.embed(g.x, g.edge_index)

    def prepared(self) -> dict[str, Tensor]:
        """The impaired graph's targets, computed once and kept in the state: ``kept [N']``,
        ``count [N']``, ``target [N', K, H]`` (prototypes of the hidden neighbours),
        ``own [N', H]`` (each kept node's prototype), ``gap`` (:func:`prototype_gap`)."""
        if self._prepared is None:
            saved = self.state.load_tensors(PREPARED)
            if saved is None:
                saved = self.prepare()
                self.state.save_tensors(PREPARED, saved)
            self._prepared = {k: v.to(self.device) for k, v in saved.items()}
        return self._prepared

    def prepare(self) -> dict[str, Tensor]:
        g, o = self.original.to(self.device).data, self.opts
        emb = self.embeddings()
        draws = torch.Generator().manual_seed(
            derive_seed(self.cfg.seed, self.partition_id, "feddep-kmeans")
        )
        _, node_protos = prototypes(emb, kmeans(emb, o.num_protos, draws, o.kmeans_iters))
        hidden = hide_nodes(
            g.val_mask,
            o.hide_portion,
            torch.Generator().manual_seed(
                derive_seed(self.cfg.seed, self.partition_id, "feddep-hide")
            ),
        )
        kept = (~hidden).nonzero().flatten()
        # a neighbour either way, as the codes count them on undirected edge lists
        count, index = missing_neighbours(
            to_undirected(g.edge_index, num_nodes=g.num_nodes), hidden, o.num_pred
        )
        return {
            "kept": kept.cpu(),
            "count": count.cpu(),
            "target": neighbour_features(node_protos, index).cpu(),
            "own": node_protos[kept].cpu(),
            "gap": torch.tensor(prototype_gap(emb, node_protos)),
        }

    def impaired(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(x [N', D], edge_index [2, E'], y [N'], train [N'])`` of the impaired graph."""
        g, kept = self.original.to(self.device).data, self.prepared()["kept"]
        hidden = torch.ones(g.num_nodes, dtype=torch.bool, device=kept.device)
        hidden[kept] = False
        _, edges = impaired_graph(g.edge_index, hidden)
        x = g.x.to_dense() if g.x.is_sparse else g.x
        return x[kept], edges, g.y[kept], g.train_mask[kept]

    # -- the generator ---------------------------------------------------------------------
    def generator(self) -> LocalDGen:
        o, c = self.opts, self.cfg
        with cpu_seeded(derive_seed(c.seed, "feddep-generator")):
            model = LocalDGen(
                self.original.num_features,
                c.hidden,
                self.original.num_classes,
                o.num_pred,
                c.hidden,
                o.latent,
                o.gen_dropout,
            )
        self.state.load_module(GENERATOR, model)
        return model.to(self.device)

    def generator_loss(self, out: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, dict[str, float]]:
        r""":math:`\beta_d\mathcal L_d + \beta_n\mathcal L_n + \beta_c\mathcal L_c` on the
        impaired graph's training nodes (module docstring)."""
        o, p = self.opts, self.prepared()
        pred_count, gen, logits = out
        _, _, y, train = self.impaired()
        loss_d = F.smooth_l1_loss(pred_count[train], p["count"][train])
        loss_n = feature_loss(
            gen[train], p["target"][train], pred_count[train], p["count"][train], "min", "round"
        )
        loss_c = F.cross_entropy(logits[train], y[train])
        total = o.beta_d * loss_d + o.beta_n * loss_n + o.beta_c * loss_c
        return total, {
            "count_loss": loss_d.item(),
            "rec_loss": loss_n.item(),
            "gen_cls_loss": loss_c.item(),
        }

    def pretrain(self, model: LocalDGen) -> None:
        """The local generator epochs before the federated ones (once)."""
        if self.state.get_json(PRETRAINED):
            return
        model.train()
        optimizer = make_adam(model.parameters(), self.opts.gen_lr, self.opts.gen_weight_decay)
        x, edges, _, _ = self.impaired()
        for epoch in range(self.opts.pretrain_epochs):
            self.seed_round(0, f"feddep-pretrain-{epoch}")
            optimizer.zero_grad()
            loss, _ = self.generator_loss(model(x, edges))
            loss.backward()
            optimizer.step()
        self.state.save_module(GENERATOR, model)
        self.state.set_json(PRETRAINED, True)

    def generate(self, model: LocalDGen, server_round: int) -> tuple[Tensor, Tensor, Tensor]:
        """This round's generator forward, seeded so that the query and the train message
        compute the same one."""
        self.seed_round(server_round, "feddep-generate")
        model.train()
        x, edges, _, _ = self.impaired()
        return model(x, edges)

    def query(self, action: str, content: RecordDict) -> RecordDict:
        server_round = int(require_record(content, CONFIG, ConfigRecord)[SERVER_ROUND])
        if action == "generate":
            model = self.generator()
            self.pretrain(model)
            with torch.no_grad():
                pred_count, gen, _ = self.generate(model, server_round)
            return RecordDict(
                {
                    GENERATED: torch_record({"feats": gen, "pred": pred_count}),
                    METRICS: self.metrics({}, float(gen.size(0))),
                }
            )
        if action == "cross_grad":
            return self.cross_gradients(
                record_torch(require_record(content, CROSS, ArrayRecord)), server_round
            )
        return super().query(action, content)

    def cross_gradients(self, others: dict[str, Tensor], server_round: int) -> RecordDict:
        """For each other client's generated embeddings: the gradient of the reconstruction
        loss against prototype targets drawn from this client's subgraph."""
        p, k = self.prepared(), self.opts.num_pred
        grads, losses = {}, {}
        for key in sorted(x for x in others if x.startswith("feats.")):
            pid = key.removeprefix("feats.")
            feats = others[key].to(self.device).requires_grad_(True)
            draws = torch.Generator().manual_seed(
                derive_seed(
                    self.cfg.seed, self.partition_id, server_round, int(pid), "feddep-cross"
                )
            )
            targets = draw_targets(
                p["target"], p["own"], feats.size(0), k, draws, self.opts.empty_slot
            )
            full = torch.full((feats.size(0),), float(k), device=self.device)
            loss = feature_loss(feats, targets, others[f"pred.{pid}"].to(self.device), full, "min")
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
        """The classifier on the mended embeddings from the classifier rounds on (mended here
        if this client has not trained since: the same embeddings its train message would)."""
        if server_round > self.opts.gen_rounds:
            self.ensure_mended()
        return super().evaluate(content, server_round)

    def train_generator(self, content: RecordDict, server_round: int) -> RecordDict:
        o = self.opts
        model = self.generator()
        self.pretrain(model)
        # the official code freezes all but the embedding head here; OpenFGL trains everything
        params = model.parameters() if o.trainable == "all" else model.gen.fgen.parameters()
        optimizer = make_adam(list(params), o.gen_lr, o.gen_weight_decay)
        self.state.load_optimizer(OPTIMIZER, optimizer)
        config = require_record(content, CONFIG, ConfigRecord)
        m = max(int(config.get(ROUND_CLIENTS, 1)), 1)
        optimizer.zero_grad()
        out = self.generate(model, server_round)
        own, parts = self.generator_loss(out)
        loss = own / m
        probes = {"feddep.cross-grad": 0.0, "feddep.proto-gap": float(self.prepared()["gap"])}
        received = get_record(content, GRADIENTS, ArrayRecord)
        if received is not None and o.cross:
            cross = record_torch(received)["grad"].to(out[1].device) * (o.beta_n / m)
            own_grad = torch.autograd.grad(loss, out[1], retain_graph=True)[0]
            probes["feddep.cross-grad"] = float(cross.norm() / own_grad.norm().clamp_min(1e-12))
            loss = (
                loss + (out[1] * cross).sum()
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
    def mend(self) -> dict[str, Tensor]:
        """Every node's mended embedding from one evaluation-mode forward of the trained
        generator (noise seeded), zero for the hidden nodes, with its number of generated
        neighbours; saved in the state, and the generator and targets dropped from it."""
        model = self.generator()
        with torch.enable_grad():
            self.pretrain(model)  # a client never sampled in the generator rounds
        model.eval()
        self.seed_round(self.opts.gen_rounds + 1, "feddep-mend")
        x, edges, _, _ = self.impaired()
        pred_count, gen, _ = model(x, edges)
        n, kept = self.original.data.num_nodes, self.prepared()["kept"]
        emb = torch.zeros(n, gen.size(2), device=gen.device)
        emb[kept] = mended_embedding(pred_count, gen)
        count = torch.zeros(n, device=gen.device)
        count[kept] = slot_counts(pred_count, gen.size(1), "round").float()
        saved = {"emb": emb.cpu(), "count": count.cpu()}
        self.state.save_tensors(MENDED, saved)
        for key in (PREPARED, GENERATOR, OPTIMIZER, PRETRAINED):
            self.state.discard(key)
        return saved

    def after_fit(self) -> dict[str, float]:
        """The classifier-round probes: generated neighbours per node, and how much the mended
        embeddings change the real nodes' logits (the trained model, evaluation mode)."""
        model, g = self.learner.model, self.data.data
        count = self.state.load_tensors(MENDED)["count"]
        d = self.original.num_features
        was = model.training
        model.eval()
        with torch.no_grad():
            with_emb = model(g.x, g.edge_index)
            without = g.x.clone()
            without[:, d:] = 0
            plain = model(without, g.edge_index)
        model.train(was)
        effect = float((with_emb - plain).norm() / plain.norm().clamp_min(1e-12))
        return as_metrics(
            {
                "feddep.generated": float(count.sum()) / max(g.num_nodes, 1),
                "feddep.emb-effect": effect,
            }
        )

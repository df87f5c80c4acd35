r"""FedLoG client (Kim et al., ICLR 2025), following the official code's ``Client``.

**First round.** (1) Pretrain the neighbour generator :math:`G` (``gen-epochs`` Adam steps at
``gen-lr``, from the same seeded initialisation on every client, as the code's one pickled
client object gives them): the MSE between :math:`G(\mathbf x_v)` and the mean features of :math:`v`'s
neighbours on the training nodes, plus a gradient-matching term: for ``gen-inits`` freshly
initialised GraphSAGE + linear classifiers, the MSE between the cross-entropy gradients of the
GNN's parameters on the real graph and on the graph of pairs :math:`(\mathbf x_v, G(\mathbf
x_v))` (accumulated as the code does, dividing the running sum by ``gen-inits`` after each
init). (2) Pretrain the embedder and the classifier by cross-entropy in mini-batches of
``batch-size`` training nodes (each step embeds the whole graph), at most ``pre-epochs`` epochs,
stopped after ``patience`` epochs without a better validation accuracy.

**Every round.** Local epochs of mini-batches: the metric loss (the negative log of the
degree-mixed branch probabilities, :mod:`fgl_flower.models.fedlog`) plus ``norm-weight``
times the synthetic features' norms; from the round after the first, also ``cd-weight`` times
the same metric loss (branches mixed half and half) on the server's global synthetic nodes,
each paired with a neighbour generated for its class (:data:`CLASS_GENERATORS`) and pulled
toward the global synthetic mean by the client's per-class scaler :math:`s_c`, which grows by
``scaler-step`` while the class's synthetic accuracy exceeds ``scaler-acc`` and shrinks
otherwise (clipped to [0, 1]). Fresh Adam optimizers each round (``lr``, ``weight-decay`` on
the model; ``lr`` without decay on the synthetic features), as in the code.

The reply carries the evaluation of the model just trained (the code evaluates each client's own
weights, not the average), the shared weights (embedder, classifier, branches), its synthetic
nodes and training class rates (:data:`SYNTHETIC`) and, in the first round, its generator
(:data:`GENERATOR`). The last round uploads nothing: no aggregation follows it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, RecordDict
from torch import Tensor
from torch.nn.utils import vector_to_parameters
from torch_geometric.nn.models import GraphSAGE

from fgl_flower.clients.base import LearnerClient
from fgl_flower.clients.learner import ModelBuilder, make_adam
from fgl_flower.datasets import NodeClientData
from fgl_flower.device import cpu_seeded
from fgl_flower.methods.fedlog import CLASS_GENERATORS, GENERATOR, GLOBAL, SYNTHETIC, FedLoGOptions
from fgl_flower.probes import as_metrics
from fgl_flower.records import get_record, record_torch, torch_record
from fgl_flower.seeds import derive_seed

PRETRAINED = "fedlog.pretrained"  # context.state: the first round's pretraining is done
SCALER = "fedlog.scaler"  # context.state: the per-class scaler s (JSON)


def batches(n: int, size: int) -> list[Tensor]:
    """The code's mini-batches of ``n`` training nodes: ``max(n // size, 1)`` disjoint random
    batches of ``size`` (all ``n`` when fewer), the remainder left out."""
    perm = torch.randperm(n)
    if n < size:
        return [perm]
    return [perm[i * size : (i + 1) * size] for i in range(n // size)]


def pair_graph(x: Tensor, generated: Tensor) -> tuple[Tensor, Tensor]:
    """Node ``2i`` = ``x[i]``, node ``2i + 1`` = ``generated[i]``, joined both ways:
    ``(features [2n, F], edge_index [2, 2n])``."""
    n = x.size(0)
    feats = torch.stack([x, generated], dim=1).reshape(2 * n, -1)
    centre = torch.arange(n, device=x.device) * 2
    edges = torch.stack([torch.cat([centre, centre + 1]), torch.cat([centre + 1, centre])])
    return feats, edges


class FedLoGClient(LearnerClient):
    data: NodeClientData

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.opts = FedLoGOptions.from_config(self.cfg)
        saved = self.state.get_json(SCALER) if SCALER in self.state else None
        c = self.data.num_classes
        self.scaler = torch.tensor(saved if saved is not None else [0.0] * c, device=self.device)

    def model_builder(self) -> ModelBuilder:
        from fgl_flower.models.fedlog import FedLoGNet

        o, c = FedLoGOptions.from_config(self.cfg), self.cfg
        return lambda num_features, num_classes: FedLoGNet(
            num_features, c.hidden, num_classes, o.num_proto, o.head_degree, o.adaptation, c.dropout
        )

    def shared_prefixes(self) -> tuple[str, ...]:
        return ("embedder.", "classifier.", "head.", "tail.")

    # -- the round ---------------------------------------------------------------------------
    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        self.seed_round(server_round)
        first = PRETRAINED not in self.state
        generator = None
        if first:
            generator = self.pretrain_generator()
            self.pretrain_model()
            self.state.set_json(PRETRAINED, True)
        metrics = self.fit_round(*self.received_global(content))
        self.state.set_json(SCALER, self.scaler.tolist())
        metrics.update(self.evaluate_learner(self.learner, server_round))
        upload = server_round < self.cfg.num_rounds
        reply = self.training_reply(metrics, upload=upload)
        if upload:
            model, g = self.learner.model, self.data.data
            counts = torch.bincount(g.y[g.train_mask], minlength=self.data.num_classes).double()
            reply[SYNTHETIC] = torch_record(
                {
                    "syn-head": model.syn_head.detach(),
                    "syn-tail": model.syn_tail.detach(),
                    "class-rate": counts / counts.sum().clamp_min(1),
                }
            )
            if generator is not None:
                reply[GENERATOR] = torch_record(generator.state_dict())
        return reply

    def received_global(
        self, content: RecordDict
    ) -> tuple[Tensor | None, Tensor | None, list | None]:
        """The server's global synthetic nodes ``(x, y)`` and the per-class generators (none in
        round 1; ``generators = official``: the code's untrained ones)."""
        record = get_record(content, GLOBAL, ArrayRecord)
        if record is None or not len(record):
            return None, None, None
        t = record_torch(record)
        x, y = t["x"].to(self.device), t["y"].to(self.device)
        return x, y, self.class_generators(content)

    def class_generators(self, content: RecordDict) -> list:
        from fgl_flower.models.fedlog import NeighborGenerator

        f, c = self.data.num_features, self.data.num_classes
        if self.opts.generators == "official":  # built once from the seed, never trained or loaded
            with cpu_seeded(derive_seed(self.cfg.seed, "fedlog-class-generators")):
                return [NeighborGenerator(f).to(self.device) for _ in range(c)]
        flat = record_torch(get_record(content, CLASS_GENERATORS, ArrayRecord))["weights"]
        gens = []
        for (
            row
        ) in flat:  # the server's rows follow the state-dict order, the parameters' (no buffers)
            gen = NeighborGenerator(f)
            vector_to_parameters(row, gen.parameters())
            gens.append(gen.to(self.device))
        return gens

    # -- first-round pretraining -------------------------------------------------------------
    def pretrain_generator(self):
        """The neighbour generator's pretraining (module doc); returns it for the upload (the
        client has no use for it afterwards, nor has the code's)."""
        from fgl_flower.models.fedlog import NeighborGenerator, code_linear, neighbor_mean

        o, g = self.opts, self.data.data
        x = g.x.to_dense() if g.x.is_sparse else g.x
        with cpu_seeded(
            derive_seed(self.cfg.seed, "fedlog-generator")
        ):  # every client starts from the same
            gen = NeighborGenerator(x.size(1)).to(self.device)
        opt = torch.optim.Adam(gen.parameters(), lr=o.gen_lr)
        mask, y = g.train_mask, g.y[g.train_mask]
        true_neighbors = neighbor_mean(x, g.edge_index)
        gen.train()
        for _ in range(o.gen_epochs):
            opt.zero_grad()
            pred = gen(x)
            feats, edges = pair_graph(x, pred)
            grad_loss = torch.zeros((), device=self.device)
            for _ in range(o.gen_inits):  # a fresh random GNN + classifier each time
                gnn = GraphSAGE(
                    x.size(1),
                    2 * self.cfg.hidden,
                    num_layers=2,
                    out_channels=self.cfg.hidden,
                    dropout=0.5,
                ).to(self.device)
                head = code_linear(self.cfg.hidden, self.data.num_classes).to(self.device)
                params = list(gnn.parameters())
                real = torch.autograd.grad(
                    F.cross_entropy(head(gnn(x, g.edge_index))[mask], y), params
                )
                fake = torch.autograd.grad(
                    F.cross_entropy(head(gnn(feats, edges)[0::2])[mask], y),
                    params,
                    create_graph=True,
                )
                grad_loss = (
                    grad_loss + sum(F.mse_loss(a, b.detach()) for a, b in zip(fake, real))
                ) / o.gen_inits
            loss = F.mse_loss(pred[mask], true_neighbors[mask]) + grad_loss
            loss.backward()
            opt.step()
        return gen

    def pretrain_model(self) -> None:
        """Embedder + classifier by cross-entropy, early-stopped on validation accuracy."""
        o, g, model = self.opts, self.data.data, self.learner.model
        opt = make_adam(
            list(model.embedder.parameters()) + list(model.classifier.parameters()),
            self.cfg.lr,
            self.cfg.weight_decay,
        )
        idx = g.train_mask.nonzero().view(-1)
        best, waited = -1.0, 0
        for _ in range(o.pre_epochs):
            model.train()
            for batch in batches(idx.numel(), o.batch_size):
                nodes = idx[batch.to(idx.device)]
                opt.zero_grad()
                F.cross_entropy(
                    model.classifier(model.embed(g.x, g.edge_index)[nodes]), g.y[nodes]
                ).backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                pred = model.classifier(model.embed(g.x, g.edge_index)).argmax(1)
                acc = (
                    float((pred[g.val_mask] == g.y[g.val_mask]).double().mean())
                    if g.val_mask.any()
                    else 0.0
                )
            if acc >= best:
                best, waited = acc, 0
            else:
                waited += 1
                if waited == o.patience:
                    break

    # -- training ----------------------------------------------------------------------------
    def fit_round(
        self, gx: Tensor | None, gy: Tensor | None, gens: list | None
    ) -> dict[str, float]:
        from fgl_flower.models.fedlog import degree_weight, neighbor_mean

        o, g, model = self.opts, self.data.data, self.learner.model
        syn_params = [model.syn_head, model.syn_tail]
        model_params = [p for n, p in model.named_parameters() if not n.startswith("syn_")]
        opt = make_adam(model_params, self.cfg.lr, self.cfg.weight_decay)
        opt_syn = make_adam(syn_params, self.cfg.lr)
        alpha = degree_weight(torch.bincount(g.edge_index[0], minlength=g.num_nodes), o.head_degree)
        idx = g.train_mask.nonzero().view(-1)
        model.train()
        shares, loss_metric, probes = [], torch.zeros(()), {}
        for _ in range(self.cfg.local_epochs):
            for batch in batches(idx.numel(), o.batch_size):
                nodes = idx[batch.to(idx.device)]
                opt.zero_grad()
                opt_syn.zero_grad()
                h = model.embed(g.x, g.edge_index)
                syn = model.synthetic_embeddings()
                head, tail = model.branch_log_probs(
                    h[nodes], neighbor_mean(h, g.edge_index)[nodes], syn
                )
                probes["fedlog.adapt"] = model.head.last_shift
                a = alpha[nodes]
                loss_metric = F.nll_loss(a * head + (1 - a) * tail, g.y[nodes])
                loss = o.metric_weight * loss_metric + o.norm_weight * 0.5 * (
                    model.syn_head.norm() + model.syn_tail.norm()
                )
                if gx is not None:
                    loss_cd, acc = self.global_loss(gx, gy, gens, syn)
                    loss = loss + o.cd_weight * loss_cd
                    shares.append(
                        float(o.cd_weight * loss_cd.detach() / loss.detach().clamp_min(1e-12))
                    )
                    probes["fedlog.syn-acc"] = acc
                    probes["fedlog.syn-gain"] = acc - 1.0 / self.data.num_classes
                loss.backward()
                opt.step()
                opt_syn.step()
        probes["fedlog.cd-share"] = sum(shares) / len(shares) if shares else 0.0
        probes["fedlog.scaler"] = float(self.scaler.mean())
        return {"train_loss": loss_metric.item(), **as_metrics(probes)}

    def global_loss(
        self, gx: Tensor, gy: Tensor, gens: list, syn: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, float]:
        """The metric loss on the global synthetic nodes (branches half and half); updates the
        per-class scaler from their per-class accuracy. Returns ``(loss, accuracy)``."""
        o, model = self.opts, self.learner.model
        x = gx + self.scaler[gy].unsqueeze(1) * (gx.mean(0, keepdim=True) - gx)
        with torch.no_grad():
            generated = torch.empty_like(x)
            for c, gen in enumerate(gens):
                gen.train()  # the code never switches them to eval: dropout stays on
                generated[gy == c] = gen(x[gy == c])
        feats, edges = pair_graph(x, generated)
        h = model.embed(feats, edges)
        head, tail = model.branch_log_probs(h[0::2], h[1::2].detach(), syn)
        log_probs = 0.5 * head + 0.5 * tail
        loss = F.nll_loss(log_probs, gy)
        with torch.no_grad():
            right = log_probs.argmax(1) == gy
            for c in range(self.data.num_classes):
                in_c = gy == c
                up = bool(in_c.any()) and float(right[in_c].double().mean()) > o.scaler_acc
                self.scaler[c] += o.scaler_step if up else -o.scaler_step
            self.scaler.clamp_(0.0, 1.0)
        return loss, float(right.double().mean())

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        return self.evaluation_reply(server_round)

r"""DENSE server (Zhang et al., "DENSE: Data-Free One-Shot Federated Learning", NeurIPS 2022),
on graphs as O-pFGL ran it: the generator makes node features, a kNN graph over them is the
topology (FedTAD's construction).

In its one round the server receives the clients' trained models :math:`f_k`, takes their
ensemble :math:`\bar f = \frac1K\sum_k f_k` (mean logits) as the teacher and distils it into a
freshly initialised global model :math:`f` (the student), ``epochs`` times:

1. **Synthesis.** A reset generator :math:`G` and noise :math:`\mathbf z` (both optimised,
   Adam, ``g-steps``) minimise :math:`\mathrm{oh}\cdot\mathrm{CE}(\bar f(\tilde G), \mathbf y) +
   \mathrm{adv}\cdot\mathcal L_{adv}(f(\tilde G), \bar f(\tilde G))` for random sorted classes
   :math:`\mathbf y`, with :math:`\tilde G` the kNN graph over :math:`G(\mathbf z)` and
   :math:`\mathcal L_{adv}` minus the student-teacher KL on the nodes where they disagree; the
   lowest-loss features join the pool (with their graph and the clients' logits).
2. **Distillation.** As many SGD steps (momentum 0.9) on :math:`T^2\,\mathrm{KL}(\bar f/T
   \,\|\, f/T)` as the pool holds graphs, each on ``num-gen`` nodes drawn from across the pool
   (the official loader's shuffled batches mix images of every epoch's synthesis): the student
   runs on the union of ``batch-graphs`` random pooled graphs and the loss takes ``num-gen`` of
   their nodes (:func:`student_batches`; ``0``: one pass over the pool's nodes in shuffled
   chunks, each step on the union of the graphs its chunk touches).

The student goes back to the clients, which evaluate fine-tuned copies (``finetune-epochs``).
"""

from __future__ import annotations

from collections.abc import Iterable
from logging import INFO

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, Message, MessageType, MetricRecord
from flwr.supercore import log

from fgl_flower.device import cpu_seeded, manual_seed, resolve_device
from fgl_flower.methods.dense import SHAPE, DENSEOptions
from fgl_flower.models import build_run_model
from fgl_flower.models.dense import FeatureGenerator, adversarial_loss, kd_loss
from fgl_flower.models.fedtad import knn_graph
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import get_record, record_torch, require_record, torch_record
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.screening import values_of


def union(pool: list[dict], entries: list[int]) -> dict:
    """The pooled graphs ``entries`` as one graph (their disjoint union): ``x``, ``edges``,
    the clients' logits ``clients`` (along the nodes) and ``targets`` concatenated, edges
    shifted."""
    graphs = [pool[e] for e in entries]
    offsets = torch.tensor([0, *(g["x"].size(0) for g in graphs[:-1])]).cumsum(0).tolist()
    return {
        "x": torch.cat([g["x"] for g in graphs]),
        "edges": torch.cat([g["edges"] + o for g, o in zip(graphs, offsets)], dim=1),
        "clients": torch.cat([g["clients"] for g in graphs], dim=1),
        "targets": torch.cat([g["targets"] for g in graphs]),
        "offsets": dict(zip(entries, offsets)),
    }


def student_batches(pool: list[dict], batch_graphs: int, size: int, order: torch.Generator):
    """``len(pool)`` student batches, each a :func:`union` with ``nodes`` (the ``size`` nodes
    the loss is on; ``pool`` graphs have ``size`` nodes each).

    ``batch_graphs = k > 0``: the union of ``k`` random pooled graphs (all while the pool is
    smaller), ``size`` random nodes of it. ``0``: the pool's nodes in a shuffled order cut into
    chunks of ``size``, each on the union of the graphs its nodes come from (the official
    ``DataLoader(pool, batch_size, shuffle=True)``; a step then costs a forward over about the
    whole pool)."""
    n = len(pool)
    if batch_graphs == 0:
        for chunk in torch.randperm(n * size, generator=order).split(size):
            graphs = chunk.div(size, rounding_mode="floor")
            batch = union(pool, graphs.unique().tolist())
            batch["nodes"] = torch.tensor([batch["offsets"][int(g)] for g in graphs]) + chunk % size
            yield batch
        return
    for _ in range(n):
        graphs = torch.randperm(n, generator=order)[:batch_graphs].sort().values.tolist()
        batch = union(pool, graphs)
        batch["nodes"] = torch.randperm(batch["x"].size(0), generator=order)[:size]
        yield batch


def client_logits(
    teachers: list[torch.nn.Module], x: torch.Tensor, edges: torch.Tensor
) -> torch.Tensor:
    """``[K, n, C]``: every client model's logits on the synthetic graph."""
    return torch.stack([t(x, edges) for t in teachers])


class DENSEStrategy(FedAvgStrategy):
    """One round: the clients' models up, the distilled student down (module docstring). The
    steps a variant changes are methods (Co-Boost: :mod:`fgl_flower.strategies.coboost`)."""

    options_class = DENSEOptions

    checked_uploads = {MessageType.TRAIN: (ARRAYS, SHAPE)}

    def screen(
        self, server_round: int, messages: list[Message], replies: list[Message]
    ) -> dict[int, str]:
        """FedAvg's checks, and every client must report the dataset's shape alike (the
        server builds its generator and student from it)."""
        refused = super().screen(server_round, messages, replies)
        refused.update(
            self.screen_agreement(
                replies,
                refused,
                MessageType.TRAIN,
                lambda r: tuple(
                    values_of(get_record(r.content, SHAPE, ArrayRecord), "shape").tolist()
                ),
                f"{SHAPE}/shape",
            )
        )
        return refused

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.opts = self.options_class.from_config(cfg)
        self.device = resolve_device(cfg.device)
        self.last: dict[str, float] = {}

    def _model(self, shape: tuple[int, int]) -> torch.nn.Module:
        return build_run_model(self.cfg, "node", shape[0], shape[1]).to(self.device)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        shape = tuple(
            int(v)
            for v in record_torch(require_record(replies[0].content, SHAPE, ArrayRecord))["shape"]
        )
        teachers = []
        for r in replies:
            model = self._model(shape)
            model.load_state_dict(record_torch(require_record(r.content, ARRAYS, ArrayRecord)))
            teachers.append(model.eval().requires_grad_(False))
        with cpu_seeded(derive_seed(self.cfg.seed, "dense-student")):
            student = self._model(shape)
        self.distill(server_round, teachers, student, shape)
        out = torch_record({k: v.detach().cpu() for k, v in student.state_dict().items()})
        return out, self.aggregate_train_metrics(replies)

    def combine(self, clients: torch.Tensor) -> torch.Tensor:
        """``[K, n, C]`` client logits -> the teacher's ``[n, C]``: their mean."""
        return clients.mean(0)

    def ensemble(
        self, teachers: list[torch.nn.Module], x: torch.Tensor, edges: torch.Tensor
    ) -> torch.Tensor:
        """The teacher's logits on a graph (:meth:`combine` of the clients')."""
        return self.combine(client_logits(teachers, x, edges))

    def generator_loss(
        self, s_out: torch.Tensor, t_out: torch.Tensor, targets: torch.Tensor
    ) -> torch.Tensor:
        """``oh`` CE to the sampled classes plus ``adv`` times the adversarial term."""
        o = self.opts
        return o.oh * F.cross_entropy(t_out, targets) + o.adv * adversarial_loss(s_out, t_out)

    def kd_loss(
        self, student: torch.nn.Module, teachers: list[torch.nn.Module], batch: dict
    ) -> torch.Tensor:
        """The student's loss on a batch's ``nodes`` (:func:`student_batches`; the clients'
        logits cached)."""
        nodes = batch["nodes"].to(self.device)
        teacher = self.combine(batch["clients"])[nodes]
        return kd_loss(student(batch["x"], batch["edges"])[nodes], teacher, self.opts.temperature)

    def after_synthesis(
        self, epoch: int, teachers: list[torch.nn.Module], pool: list[dict]
    ) -> None:
        """After an epoch's synthesis, before its graph joins ``pool`` (each entry: ``x``,
        ``edges``, ``targets``, the clients' logits ``clients [K, n, C]``) and the distillation
        (DENSE: nothing)."""

    def distill(
        self,
        server_round: int,
        teachers: list[torch.nn.Module],
        student: torch.nn.Module,
        shape: tuple[int, int],
    ) -> None:
        o = self.opts
        manual_seed(derive_seed(self.cfg.seed, "dense", server_round), self.device)
        order = torch.Generator().manual_seed(
            derive_seed(self.cfg.seed, "dense-order", server_round)
        )
        generator = FeatureGenerator(o.noise_dim, shape[0], o.generator_head).to(self.device)
        opt_s = self.student_optimizer(student)
        pool: list[
            dict
        ] = []  # synthetic graphs: x, edges, the classes aimed at, the clients' logits
        fit = torch.zeros(())
        for epoch in range(o.epochs):
            generator.reset()
            z = torch.randn(o.num_gen, o.noise_dim, device=self.device, requires_grad=True)
            targets = torch.randint(0, shape[1], (o.num_gen,), device=self.device).sort().values
            opt_g = torch.optim.Adam([*generator.parameters(), z], lr=o.lr_g, betas=(0.5, 0.999))
            student.eval()
            best, best_loss = None, float("inf")
            for _ in range(o.g_steps):
                opt_g.zero_grad()
                x = generator(z)
                edges = knn_graph(x.detach(), o.topk)
                t_out = self.ensemble(teachers, x, edges)
                loss = self.generator_loss(student(x, edges), t_out, targets)
                if loss.item() < best_loss or best is None:
                    best_loss, best = (
                        loss.item(),
                        (x.detach(), edges, (t_out.argmax(-1) == targets).float().mean()),
                    )
                loss.backward()
                self.clip_generator(generator)
                opt_g.step()
            x, edges, fit = best
            self.after_synthesis(
                epoch, teachers, pool
            )  # on the earlier epochs' graphs (Co-Boost's order)
            with torch.no_grad():
                clients = client_logits(teachers, x, edges)
            pool.append({"x": x, "edges": edges, "targets": targets, "clients": clients})
            student.train()
            for batch in student_batches(pool, o.batch_graphs, o.num_gen, order):
                opt_s.zero_grad()
                kd = self.kd_loss(student, teachers, batch)
                kd.backward()
                self.clip_student(student)
                opt_s.step()
            self.end_epoch(epoch, student, pool)
            if self.cfg.progress and (epoch + 1) % max(o.epochs // 10, 1) == 0:
                log(
                    INFO,
                    "%s distillation: epoch %d/%d, the synthesis hits its classes on %.2f of its nodes, "
                    "the student's last KD loss %.4f",
                    self.cfg.method,
                    epoch + 1,
                    o.epochs,
                    float(fit),
                    kd.item(),
                )
        student.eval()
        with torch.no_grad():
            self.last = self.pool_probes(pool, student, float(fit), shape[1])

    def pool_probes(
        self, pool: list[dict], student: torch.nn.Module, fit: float, classes: int
    ) -> dict[str, float]:
        """The probes after the distillation: ``dense.teacher-fit`` (the last synthesis's share
        of nodes the ensemble puts in their target class, chance 0), ``dense.pool-fit`` (the
        same over every pooled graph, by the final ensemble), ``dense.agreement`` and, for a
        student with hidden layers (``embed``), ``dense.live-units``: the share of its last
        hidden layer's units that are positive on some pooled node."""
        teacher = [self.combine(e["clients"]).argmax(-1) for e in pool]
        agree = torch.cat(
            [(student(e["x"], e["edges"]).argmax(-1) == t).float() for e, t in zip(pool, teacher)]
        )
        hit = torch.cat([(t == e["targets"]).float() for e, t in zip(pool, teacher)])
        chance = 1.0 / classes
        out = {
            "dense.teacher-fit": (fit - chance) / (1.0 - chance),
            "dense.pool-fit": (float(hit.mean()) - chance) / (1.0 - chance),
            "dense.agreement": float(agree.mean()),
        }
        if hasattr(student, "embed"):
            live = torch.stack([(student.embed(e["x"], e["edges"]) > 0).any(0) for e in pool]).any(
                0
            )
            out["dense.live-units"] = float(live.float().mean())
        return out

    def student_optimizer(self, student: torch.nn.Module) -> torch.optim.Optimizer:
        """SGD with momentum 0.9 at ``kd-lr``."""
        return torch.optim.SGD(student.parameters(), lr=self.opts.kd_lr, momentum=0.9)

    def clip_generator(self, generator: torch.nn.Module) -> None:
        """Before each generator step (DENSE: no clipping)."""

    def clip_student(self, student: torch.nn.Module) -> None:
        """Before each student step (DENSE: no clipping)."""

    def end_epoch(self, epoch: int, student: torch.nn.Module, pool: list[dict]) -> None:
        """After epoch ``epoch``'s distillation of ``student`` on ``pool`` (DENSE: nothing;
        ``experiments/opfgl/trace_distillation.py`` records the pool's probes here)."""

    def server_probes(self, server_round: int) -> dict[str, float]:
        return dict(self.last)

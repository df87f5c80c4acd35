r"""FedTAD server (Zhu et al., IJCAI 2024): FedAvg, then data-free distillation of the
clients' class-wise reliable knowledge into the global model on a generated pseudo-graph.

Each round, after the FedAvg average :math:`\bar\theta` of the uploads :math:`\theta_k`
(weighted by ``num-examples``; FedTAD's default ``agg-weight = local``, the clients' node
counts, as the official code), with the clients' CKR normalised per class over the clients
that trained, :math:`\omega_{kc} = \mathrm{ckr}_{kc} / \sum_{k'} \mathrm{ckr}_{k'c}`, and
:math:`D_{kc}(g, l) = \mathrm{mean}_{i: c_i = c}\,\mathrm{mean}_j |g_{ij} - l_{ij}|`, the server
runs ``glb-epochs`` times, each with fresh noise :math:`\mathbf z`:

- ``it-g`` generator steps on
  :math:`\lambda_1\sum_{k,c}\omega_{kc}\,\mathrm{CE}(f_k(\tilde G)_{c}, c) - \sum_{k,c}\omega_{kc}
  D_{kc}(f(\tilde G), \mathrm{sg}[f_k(\tilde G)]) + \lambda_2 K\,\mathcal L_{div}`, with
  :math:`\tilde G` the kNN pseudo-graph (:func:`~fgl_flower.models.fedtad.knn_graph`) over
  the generated features :math:`G(\mathbf z, \mathbf c)`, :math:`f_k` client :math:`k`'s
  model, :math:`f` the global one (the generator seeks where the global model disagrees
  with the reliable clients);
- ``it-d`` global-model steps on :math:`\sum_{k,c}\omega_{kc} D_{kc}(f(\tilde G),
  \mathrm{sg}[f_k(\tilde G)])` on the pseudo-graph of the updated generator (which stays
  fixed during them).

As in the official code, the global model runs once per client in both (in training mode, each
with its own dropout mask).

The generator, its Adam and the global model's Adam (lr ``lr-g``, ``lr-d``; the run's weight
decay) live on the server across rounds and in its checkpoint. Models are in evaluation mode
where the official code calls ``eval()`` (the clients' models throughout, the global model in
the generator steps); with ``fedtad.always-dropout = true`` their dropout stays on, as in the
official GCN, whose dropout ignores the mode. Each round's record keeps the losses and the weights
(``fedtad``).
"""

from __future__ import annotations

import io
from collections.abc import Iterable

import numpy as np
import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, Message, MessageType, MetricRecord

from fgl_flower.config import RunConfig
from fgl_flower.device import manual_seed, resolve_device
from fgl_flower.methods.fedtad import RELIABILITY, FedTADOptions
from fgl_flower.models import build_run_model
from fgl_flower.models.fedtad import ConditionalGenerator, class_labels, diversity_loss, knn_graph
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import get_record, record_torch, require_record, torch_record
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies.fedavg import FedAvgStrategy
from fgl_flower.strategies.screening import nonnegative_problem, values_of


def class_weights(ckr: torch.Tensor) -> torch.Tensor:
    """``[K, C]``: each class's CKR normalised over the clients (a class no client trains
    on weighs 0 everywhere; the official code divides by zero)."""
    total = ckr.sum(dim=0, keepdim=True)
    return torch.where(total > 0, ckr / total.clamp_min(1e-12), torch.zeros_like(ckr))


def divergence(
    global_out: torch.Tensor, local_out: torch.Tensor, weights: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    r""":math:`\sum_c \omega_c D_c`: the weighted per-class mean absolute difference of two
    ``[n, C]`` outputs (classes without generated nodes skipped)."""
    per_node = (global_out - local_out).abs().mean(dim=1)
    total = per_node.new_zeros(())
    for c in labels.unique():
        total = total + weights[c] * per_node[labels == c].mean()
    return total


def semantic(local_out: torch.Tensor, weights: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum_c \omega_c\,\mathrm{CE}(f_k(\tilde G)_c, c)`, the cross-entropy averaged
    within each class's generated nodes."""
    total = local_out.new_zeros(())
    for c in labels.unique():
        rows = labels == c
        total = total + weights[c] * F.cross_entropy(local_out[rows], labels[rows])
    return total


class FedTADStrategy(FedAvgStrategy):
    """FedAvg plus the server's data-free distillation (module docstring)."""

    checkpointed = ("server_state",)

    checked_uploads = {MessageType.TRAIN: (ARRAYS, RELIABILITY)}

    def screen(
        self, server_round: int, messages: list[Message], replies: list[Message]
    ) -> dict[int, str]:
        """FedAvg's checks; the class reliabilities (the distillation's class weights) must be
        at least 0, and every client must report the dataset's shape alike."""
        refused = super().screen(server_round, messages, replies)
        refused.update(
            self.screen_agreement(
                replies,
                refused,
                MessageType.TRAIN,
                lambda r: tuple(
                    values_of(get_record(r.content, RELIABILITY, ArrayRecord), "shape").tolist()
                ),
                f"{RELIABILITY}/shape",
            )
        )
        return refused

    def reply_problem(self, server_round: int, reply: Message) -> str | None:
        if reply.metadata.message_type != MessageType.TRAIN:
            return None
        return nonnegative_problem(
            values_of(get_record(reply.content, RELIABILITY, ArrayRecord), "ckr"),
            f"{RELIABILITY}/ckr",
        )

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.opts = FedTADOptions.from_config(cfg)
        self.device = resolve_device(cfg.device)
        self.shape: tuple[int, int] | None = None  # (features, classes), from the first replies
        self.generator: ConditionalGenerator | None = None
        self.global_model: torch.nn.Module | None = None
        self.opt_g: torch.optim.Optimizer | None = None
        self.opt_d: torch.optim.Optimizer | None = None
        self._restored: dict | None = None  # a checkpoint's state, loaded once the shape is known
        self.last: dict = {}

    # -- the server's modules and their checkpoint ------------------------------------------
    def _model(self) -> torch.nn.Module:
        return build_run_model(self.cfg, "node", self.shape[0], self.shape[1]).to(self.device)

    def _build(self, shape: tuple[int, int]) -> None:
        self.shape = shape
        o, wd = self.opts, self.cfg.weight_decay
        with torch.random.fork_rng(devices=[]):  # the global model's weights come from the clients
            torch.manual_seed(derive_seed(self.cfg.seed, "fedtad-generator"))
            self.generator = ConditionalGenerator(o.noise_dim, shape[1], shape[0]).to(self.device)
            self.global_model = self._model()
        self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=o.lr_g, weight_decay=wd)
        self.opt_d = torch.optim.Adam(self.global_model.parameters(), lr=o.lr_d, weight_decay=wd)
        if self._restored is not None:
            self.generator.load_state_dict(self._restored["generator"])
            self.opt_g.load_state_dict(self._restored["opt_g"])
            self.opt_d.load_state_dict(self._restored["opt_d"])
            self._restored = None

    @property
    def server_state(self) -> np.ndarray | None:
        """The generator and both Adams as bytes (``torch.save``), for the checkpoint."""
        if self.generator is None:
            return None
        buf = io.BytesIO()
        torch.save(
            {
                "shape": self.shape,
                "generator": self.generator.state_dict(),
                "opt_g": self.opt_g.state_dict(),
                "opt_d": self.opt_d.state_dict(),
            },
            buf,
        )
        return np.frombuffer(buf.getvalue(), dtype=np.uint8).copy()

    @server_state.setter
    def server_state(self, value) -> None:
        state = torch.load(
            io.BytesIO(np.asarray(value, dtype=np.uint8).tobytes()), map_location=self.device
        )
        self._restored = state
        self._build(tuple(state["shape"]))

    # -- aggregation ------------------------------------------------------------------------
    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        averaged, metrics = super().aggregate_train(server_round, replies)
        stats = [record_torch(require_record(r.content, RELIABILITY, ArrayRecord)) for r in replies]
        if self.generator is None:
            self._build(tuple(int(v) for v in stats[0]["shape"].tolist()))
        ckr = torch.stack([s["ckr"] for s in stats]).to(self.device)
        locals_ = []
        for r in replies:
            model = self._model()
            model.load_state_dict(record_torch(require_record(r.content, ARRAYS, ArrayRecord)))
            locals_.append(model.requires_grad_(False))
        theta = record_torch(averaged)
        self.global_model.load_state_dict(theta)
        self.distill(server_round, class_weights(ckr), locals_)
        distilled = {k: v.detach().cpu() for k, v in self.global_model.state_dict().items()}
        shift = torch.sqrt(
            sum(((distilled[k].double() - theta[k].double()) ** 2).sum() for k in theta)
        )
        norm = torch.sqrt(sum((theta[k].double() ** 2).sum() for k in theta))
        self.last["distill-shift"] = float(shift / norm.clamp_min(1e-12))
        out = torch_record({k: distilled[k] for k in averaged.keys()})
        return out, metrics

    def distill(
        self, server_round: int, weights: torch.Tensor, local_models: list[torch.nn.Module]
    ) -> None:
        """The generator and global-model steps of one round (module docstring)."""
        o, gen, glob = self.opts, self.generator, self.global_model
        num_classes = self.shape[1]
        labels = class_labels(o.num_gen, num_classes, self.device)
        keep_dropout = o.always_dropout
        for m in local_models:
            m.train(keep_dropout)
        manual_seed(derive_seed(self.cfg.seed, "fedtad-server", server_round), self.device)
        noise = torch.Generator(device="cpu").manual_seed(
            derive_seed(self.cfg.seed, "fedtad-noise", server_round)
        )
        loss_g, loss_d = [], []
        for _ in range(o.glb_epochs):
            z = torch.randn(o.num_gen, o.noise_dim, generator=noise).to(self.device)
            gen.train()
            glob.train(keep_dropout).requires_grad_(False)
            for _ in range(o.it_g):
                self.opt_g.zero_grad()
                x = gen(z, labels)
                edges = knn_graph(x.detach(), o.topk)
                total = o.lam2 * len(local_models) * diversity_loss(z, x)
                for k, model in enumerate(
                    local_models
                ):  # the global model once per client, as the code
                    l_out = model(x, edges)
                    total = (
                        total
                        + o.lam1 * semantic(l_out, weights[k], labels)
                        - divergence(glob(x, edges), l_out.detach(), weights[k], labels)
                    )
                total.backward()
                self.opt_g.step()
                loss_g.append(float(total.detach()))
            gen.eval()
            glob.train().requires_grad_(True)
            with torch.no_grad():
                x = gen(z, labels)
                edges = knn_graph(x, o.topk)
                targets = [model(x, edges) for model in local_models] if not keep_dropout else None
            for _ in range(o.it_d):
                self.opt_d.zero_grad()
                total = x.new_zeros(())
                for k, model in enumerate(
                    local_models
                ):  # a fresh dropout mask per client, as the code
                    l_out = targets[k] if targets is not None else model(x, edges).detach()
                    total = total + divergence(glob(x, edges), l_out, weights[k], labels)
                total.backward()
                self.opt_d.step()
                loss_d.append(float(total.detach()))
        with torch.no_grad():
            hits = [
                float((model(x, edges).argmax(dim=1) == labels).float().mean())
                for model in local_models
            ]
        spread = (weights.max(dim=0).values - weights.min(dim=0).values).mean()
        self.last = {
            "loss_g": [round(v, 6) for v in loss_g],
            "loss_d": [round(v, 6) for v in loss_d],
            "weights": np.round(weights.cpu().numpy(), 6).tolist(),
            "pseudo-acc": float(np.mean(hits)),
            "ckr-spread": float(spread),
        }

    def round_record(self, server_round: int) -> dict:
        return {"fedtad": self.last} if self.last else {}

    def server_probes(self, server_round: int) -> dict[str, float]:
        if not self.last:
            return {}
        return {f"fedtad.{k}": self.last[k] for k in ("distill-shift", "pseudo-acc", "ckr-spread")}

"""Learners: one client's model, optimizer and local data, one per task.

A :class:`Learner` hides the difference between full-batch node classification on a
client subgraph, mini-batch graph classification over a client's graphs, link prediction
inside a subgraph and graph regression, so that a method's client (FedAvg, FedProx, Local,
...) is written once for every task it runs (:data:`LEARNERS`, by task name).
"""

from __future__ import annotations

import contextlib
import copy
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fgl_flower.config import RunConfig
from fgl_flower.datasets import GraphClientData, NodeClientData
from fgl_flower.datasets.client_data import LinkClientData
from fgl_flower.datasets.link_splits import edge_keys, sample_negatives
from fgl_flower.datasets.packed import GraphBatch
from fgl_flower.device import cpu_seeded
from fgl_flower.link_metrics import link_metrics
from fgl_flower.metrics import (
    classification_metrics,
    majority_class,
    minority_metrics,
    regression_metrics,
)
from fgl_flower.models import build_run_model
from fgl_flower.models.link import LinkPredictor, link_loss
from fgl_flower.protocol import NUM_LOCAL
from fgl_flower.registry import Registry
from fgl_flower.seeds import derive_seed
from fgl_flower.tasks import HITS_AT, TASKS

#: ``extra_loss(model) -> scalar``: a method's regulariser added to every local step.
ExtraLoss = Callable[[nn.Module], Tensor]
#: ``build(num_features, num_classes) -> model``: a method's own model (seeded by the learner).
ModelBuilder = Callable[[int, int], nn.Module]
#: ``predict(query) -> outputs`` of one model on a client's data: node logits ``[N, C]``
#: (``query`` unused), or link logits ``[P]`` of the node pairs ``query`` [2, P].
Predict = Callable[..., Tensor]

LEARNERS: Registry[type[Learner]] = Registry("learner")

SPLITS = ("val", "test")


def make_adam(params, lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam with the fused kernel (several times faster on CPU than the per-tensor loop)."""
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=True)


def make_optimizer(params, cfg: RunConfig) -> torch.optim.Optimizer:
    """The run's local optimizer (``optimizer``: ``adam`` or plain ``sgd``) with ``lr`` and
    ``weight-decay``."""
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return make_adam(params, cfg.lr, cfg.weight_decay)


class StepCount:
    """The optimizer steps taken inside :func:`counting_steps` (``.steps``)."""

    steps: int = 0


@contextlib.contextmanager
def counting_steps(optimizer: torch.optim.Optimizer) -> Iterator[StepCount]:
    """Count ``optimizer``'s steps while the block runs (a post-step hook, removed after):
    a client's local step count (FedNova's :math:`a_k`, SCAFFOLD's :math:`K`)."""
    count = StepCount()

    def one_more(*_) -> None:
        count.steps += 1

    hook = optimizer.register_step_post_hook(one_more)
    try:
        yield count
    finally:
        hook.remove()


def seeded_model(cfg: RunConfig, task: str, num_features: int, num_classes: int) -> nn.Module:
    """The run's model for ``task`` (its learner's :meth:`Learner.build`), built on the CPU
    from ``cfg.seed`` without touching the caller's random state (the shared initial model of
    every client): a fresh copy of a model made once per process and run config."""
    return copy.deepcopy(_initial_model(cfg, task, num_features, num_classes))


@functools.lru_cache(maxsize=16)
def _initial_model(cfg: RunConfig, task: str, num_features: int, num_classes: int) -> nn.Module:
    with cpu_seeded(cfg.seed):
        return LEARNERS.get(task).build(cfg, num_features, num_classes)


class Learner(ABC):
    """Model + optimizer (:func:`make_optimizer`) over one client's data.

    The model is built on the CPU under ``torch.manual_seed(cfg.seed)``, so every client
    starts from the same weights for the same seed (the shared initial model of FL) on any
    device, and then moved to ``device``.
    """

    task: str

    @classmethod
    def build(cls, cfg: RunConfig, num_features: int, num_classes: int) -> nn.Module:
        """The task's model from the run's backbone (default: ``num_classes`` outputs at the
        task's level)."""
        return build_run_model(cfg, TASKS.get(cls.task).level, num_features, num_classes)

    def __init__(
        self,
        cfg: RunConfig,
        data: NodeClientData | GraphClientData,
        device: torch.device | None = None,
        build: ModelBuilder | None = None,
        share: tuple[str, ...] | None = None,
    ) -> None:
        self.cfg = cfg
        self.data = data
        self.device = torch.device("cpu") if device is None else device
        if build is None:
            model = seeded_model(cfg, self.task, data.num_features, data.num_classes)
        else:
            with cpu_seeded(cfg.seed):
                model = build(data.num_features, data.num_classes)
        self.model = model.to(self.device)
        self.share = share
        self.optimizer = make_optimizer(self.model.parameters(), cfg)

    # -- what is federated -----------------------------------------------------------------
    def shared_keys(self) -> list[str]:
        """Names of the parameters exchanged with the server: those under the ``share``
        prefixes if given, else all."""
        keys = list(self.model.state_dict())
        return keys if self.share is None else [k for k in keys if k.startswith(self.share)]

    def get_shared(self) -> dict[str, Tensor]:
        sd = self.model.state_dict()
        return {k: sd[k] for k in self.shared_keys()}

    def set_shared(self, tensors: dict[str, Tensor]) -> None:
        """Overwrite the shared parameters with ``tensors`` (e.g. the global model)."""
        self.model.load_state_dict(tensors, strict=False)

    def shared_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        keys = set(self.shared_keys())
        return ((n, p) for n, p in self.model.named_parameters() if n in keys)

    # -- persistence -----------------------------------------------------------------------
    def save(self, state, prefix: str = "learner") -> None:
        state.save_module(f"{prefix}.model", self.model)
        if self.cfg.keep_optimizer_state:
            state.save_optimizer(f"{prefix}.optim", self.optimizer)

    def reset_optimizer(self) -> None:
        """A fresh optimizer, as a rebuilt learner has when the state keeps none."""
        self.optimizer = make_optimizer(self.model.parameters(), self.cfg)

    def restore(self, state, prefix: str = "learner") -> bool:
        """Restore model (and optimizer) from ``state``; ``False`` on the first round."""
        found = state.load_module(f"{prefix}.model", self.model)
        if found and self.cfg.keep_optimizer_state:
            state.load_optimizer(f"{prefix}.optim", self.optimizer)
        return found

    # -- training and evaluation -----------------------------------------------------------
    @property
    @abstractmethod
    def num_train(self) -> int:
        """Number of training examples (nodes or graphs): the FedAvg weight."""

    @property
    @abstractmethod
    def num_local(self) -> int:
        """Number of all local examples (train, val and test)."""

    @property
    def num_examples(self) -> int:
        """The client's weight in FedAvg-style averaging (``agg-weight``: 1 for ``uniform``)."""
        return {"local": self.num_local, "uniform": 1}.get(self.cfg.agg_weight, self.num_train)

    # -- predictions of any model on this client's data (methods that mix models: APFL) ------
    def inputs(self, query: Tensor | None = None) -> tuple:
        """The positional inputs of a model of this task for ``query`` (full-batch tasks)."""
        raise NotImplementedError(f"{type(self).__name__} has no full-batch inputs")

    def predictor(self, model: nn.Module) -> Predict:
        """``query -> outputs`` of ``model`` on this client's data."""
        return lambda query=None: model(*self.inputs(query))

    def loss_of(self, predict: Predict) -> Tensor:
        """The training loss of the predictions ``predict`` makes (one local step's)."""
        raise NotImplementedError(f"{type(self).__name__} has no full-batch loss")

    def metrics_of(self, predict: Predict) -> dict[str, float]:
        """:meth:`evaluate`'s metrics of the predictions ``predict`` makes."""
        raise NotImplementedError(f"{type(self).__name__} has no full-batch metrics")

    @abstractmethod
    def fit(self, epochs: int, extra_loss: ExtraLoss | None = None) -> dict[str, float]:
        """Train for ``epochs`` local epochs; returns ``train_loss`` and ``train_acc``."""

    @abstractmethod
    def evaluate(self, train_mode: bool = False) -> dict[str, float]:
        """Loss/acc/F1 on val and test, keys ``{split}_{metric}``, plus ``num-{split}`` and
        ``num-local`` (all local examples: the client-size weight). ``train_mode`` keeps
        dropout active, as code that never calls ``eval()`` does."""


@LEARNERS.register("node")
class NodeLearner(Learner):
    """Full-batch training on the client's subgraph; loss on its training nodes."""

    task = "node"
    data: NodeClientData
    #: ``(edge_index [2, E], edge_weight [E])`` that every forward pass takes in place of the
    #: subgraph's own unweighted edges (FedGL's local edges plus its pseudo-graph); None (every
    #: other method): the subgraph's ``edge_index`` alone.
    edges: tuple[Tensor, Tensor] | None = None

    @property
    def num_train(self) -> int:
        return self.data.num_train

    @property
    def num_local(self) -> int:
        return self.data.num_local

    def logits(self) -> Tensor:
        return self.model(*self.inputs())

    def inputs(self, query: Tensor | None = None) -> tuple:
        """``(x, edge_index)`` (or ``(x, edge_index, edge_weight)`` under :attr:`edges`): a
        node model's logits ``[N, C]`` of every node."""
        g = self.data.data
        return (g.x, g.edge_index) if self.edges is None else (g.x, *self.edges)

    def loss_of(self, predict: Predict) -> Tensor:
        """Cross-entropy of the logits on the training nodes."""
        g = self.data.data
        return F.cross_entropy(predict()[g.train_mask], g.y[g.train_mask])

    def metrics_of(self, predict: Predict) -> dict[str, float]:
        return node_metrics(predict(), self.data)

    def fit(self, epochs: int, extra_loss: ExtraLoss | None = None) -> dict[str, float]:
        g = self.data.data
        self.model.train()
        loss = torch.zeros(())
        for _ in range(epochs):
            self.optimizer.zero_grad()
            out = self.logits()
            loss = F.cross_entropy(out[g.train_mask], g.y[g.train_mask])
            total = loss + extra_loss(self.model) if extra_loss is not None else loss
            total.backward()
            self.optimizer.step()
        return {"train_loss": loss.item()}

    @torch.no_grad()
    def evaluate(self, train_mode: bool = False) -> dict[str, float]:
        """Per split: loss/acc/F1 and the count; for test also the minority accuracy
        (nodes outside the client's training-majority class) and its count."""
        self.model.train(train_mode)
        return node_metrics(self.logits(), self.data)


def node_metrics(logits: Tensor, data: NodeClientData) -> dict[str, float]:
    """Evaluation metrics of node ``logits [N, C]`` on ``data``'s val and test masks."""
    g = data.data
    res: dict[str, float] = {}
    for split in SPLITS:
        mask = getattr(g, f"{split}_mask")
        for k, v in classification_metrics(logits[mask], g.y[mask], data.num_classes).items():
            res[f"{split}_{k}"] = v
        res[f"num-{split}"] = float(mask.sum())
    majority = majority_class(g.y[g.train_mask], data.num_classes)
    minority = minority_metrics(logits[g.test_mask], g.y[g.test_mask], majority)
    res["test_minority_acc"] = minority["minority_acc"]
    res["num-test-minority"] = minority["minority_count"]
    res[NUM_LOCAL] = float(g.num_nodes)
    return res


@LEARNERS.register("graph")
class GraphLearner(Learner):
    """Mini-batch training over the client's training graphs.

    In cross-dataset settings (one dataset per client) only the backbone's
    ``shared_prefixes`` are federated (unless the method names its own ``share``); input
    and output layers stay local. A model reads per-node ``graph_inputs`` besides ``x``
    (e.g. ``stc_enc``), attached to the client's graphs once
    (:func:`~fgl_flower.datasets.encodings.attach_graph_inputs`).
    """

    task = "graph"
    data: GraphClientData

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.inputs: tuple[str, ...] = tuple(getattr(self.model, "graph_inputs", ()))
        if self.inputs:
            from fgl_flower.datasets.encodings import attach_graph_inputs

            attach_graph_inputs(self.data, self.inputs)

    def forward(self, batch: GraphBatch) -> Tensor:
        """Logits ``[B, C]`` of a mini-batch of graphs."""
        return self.model(batch.x, batch.edge_index, batch.batch, *(batch[k] for k in self.inputs))

    @property
    def num_train(self) -> int:
        return self.data.num_train

    @property
    def num_local(self) -> int:
        return self.data.num_local

    @property
    def cross_dataset(self) -> bool:
        return self.data.dataset.lower() != self.cfg.dataset.lower()

    def shared_keys(self) -> list[str]:
        keys = list(self.model.state_dict())
        prefixes = getattr(self.model, "shared_prefixes", None)
        if self.share is None and self.cross_dataset and prefixes:
            return [k for k in keys if k.startswith(tuple(prefixes))]
        return super().shared_keys()

    def loss(self, out: Tensor, batch: GraphBatch) -> Tensor:
        """The training loss of a mini-batch's outputs (cross-entropy of its classes)."""
        return F.cross_entropy(out, batch.y)

    def _batches(self, split: str, shuffle: bool) -> Iterator[GraphBatch]:
        """One pass over ``split``'s graphs in mini-batches on the learner's device, in
        ``DataLoader(graphs, batch_size, shuffle)``'s order (:mod:`~fgl_flower.datasets.packed`)."""
        return self.data.packed(split, self.device, self.inputs).batches(
            self.cfg.batch_size, shuffle
        )

    def fit(self, epochs: int, extra_loss: ExtraLoss | None = None) -> dict[str, float]:
        self.model.train()
        total_loss, count = 0.0, 0
        for _ in range(epochs):
            for batch in self._batches("train", shuffle=True):
                self.optimizer.zero_grad()
                out = self.forward(batch)
                loss = self.loss(out, batch)
                (loss + extra_loss(self.model) if extra_loss is not None else loss).backward()
                self.optimizer.step()
                total_loss += float(loss.detach()) * batch.num_graphs
                count += batch.num_graphs
        return {"train_loss": total_loss / max(count, 1)}

    def split_metrics(self, out: Tensor, y: Tensor) -> dict[str, float]:
        """The metrics of one split's outputs ``out`` against its targets ``y`` (loss,
        accuracy, macro-F1)."""
        return classification_metrics(out, y, self.data.num_classes)

    @torch.no_grad()
    def evaluate(self, train_mode: bool = False) -> dict[str, float]:
        self.model.train(train_mode)
        res: dict[str, float] = {}
        for split in SPLITS:
            outs, ys = [], []
            for batch in self._batches(split, shuffle=False):
                outs.append(self.forward(batch))
                ys.append(batch.y)
            out = (
                torch.cat(outs)
                if outs
                else torch.zeros(0, self.data.num_classes, device=self.device)
            )
            y = torch.cat(ys) if ys else torch.zeros(0, dtype=torch.long, device=self.device)
            for k, v in self.split_metrics(out, y).items():
                res[f"{split}_{k}"] = v
            res[f"num-{split}"] = float(len(getattr(self.data, split)))
        res[NUM_LOCAL] = float(self.num_local)
        return res


@LEARNERS.register("graph-regression")
class GraphRegressionLearner(GraphLearner):
    """Mini-batch regression over the client's graphs: one output per graph, mean squared
    error (:func:`~fgl_flower.metrics.regression_metrics`)."""

    task = "graph-regression"

    @classmethod
    def build(cls, cfg: RunConfig, num_features: int, num_classes: int) -> nn.Module:
        return build_run_model(cfg, "graph", num_features, 1)

    def forward(self, batch: GraphBatch) -> Tensor:
        """Predictions ``[B]`` of a mini-batch of graphs."""
        return super().forward(batch).view(-1)

    def loss(self, out: Tensor, batch: GraphBatch) -> Tensor:
        return F.mse_loss(out, batch.y.float())

    def split_metrics(self, out: Tensor, y: Tensor) -> dict[str, float]:
        """Mean squared (also the loss) and absolute error; an empty split scores 0."""
        return regression_metrics(out, y)


@LEARNERS.register("link")
class LinkLearner(Learner):
    r"""Full-batch link prediction on the client's subgraph (:mod:`fgl_flower.models.link`).

    Each epoch embeds the nodes over the training edges, scores the training edges and as
    many non-edges drawn anew (uniformly among the pairs that are not training edges; from
    the round-seeded random state, so runs repeat; ``link-negatives = fixed``: one draw per
    client for the whole run), and takes a step on their binary cross-entropy. Evaluation scores each split's held-out edges against its fixed negatives
    (:func:`~fgl_flower.link_metrics.link_metrics`).
    """

    task = "link"
    data: LinkClientData

    @classmethod
    def build(cls, cfg: RunConfig, num_features: int, num_classes: int) -> nn.Module:
        encoder = build_run_model(cfg, "node", num_features, cfg.hidden)
        return LinkPredictor(encoder, cfg.link_decoder, cfg.hidden)

    @property
    def num_train(self) -> int:
        return self.data.num_train

    @property
    def num_local(self) -> int:
        return self.data.num_local

    @functools.cached_property
    def _train_keys(self) -> Tensor:
        e = self.data.edges
        return edge_keys(e.train_pos.cpu(), e.num_nodes)

    def negatives(self) -> Tensor:
        """``[2, E_train]`` non-edges for one epoch: drawn from the current random state, or
        with ``link-negatives = fixed`` the client's one draw for the whole run (seeded by
        ``split-seed`` and the client, as its validation and test non-edges are)."""
        if self.cfg.link_negatives == "fixed":
            return self._fixed_negatives
        gen = torch.Generator().manual_seed(int(torch.randint(2**62, ())))
        return self._draw(gen)

    @functools.cached_property
    def _fixed_negatives(self) -> Tensor:
        seed = derive_seed(self.cfg.split_seed, self.data.partition_id, "link-negatives")
        return self._draw(torch.Generator().manual_seed(seed))

    def _draw(self, gen: torch.Generator) -> Tensor:
        e = self.data.edges
        neg = sample_negatives(e.num_nodes, self._train_keys, e.train_pos.size(1), gen)
        return neg.to(self.device)

    def inputs(self, query: Tensor | None = None) -> tuple:
        """``(x, message edges, pairs)``: a link model's logits ``[P]`` of the pairs ``query``."""
        g = self.data.data
        return g.x, g.edge_index, query

    def loss_of(self, predict: Predict) -> Tensor:
        """Binary cross-entropy of the training edges against as many new non-edges."""
        pos = self.data.edges.train_pos
        scores = predict(torch.cat([pos, self.negatives()], dim=1))
        return link_loss(scores[: pos.size(1)], scores[pos.size(1) :])

    def fit(self, epochs: int, extra_loss: ExtraLoss | None = None) -> dict[str, float]:
        self.model.train()
        predict = self.predictor(self.model)
        loss = torch.zeros(())
        for _ in range(epochs):
            self.optimizer.zero_grad()
            loss = self.loss_of(predict)
            total = loss + extra_loss(self.model) if extra_loss is not None else loss
            total.backward()
            self.optimizer.step()
        return {"train_loss": loss.item()}

    def metrics_of(self, predict: Predict) -> dict[str, float]:
        """Per split: loss, AUC, AP, MRR and Hits@K of its edges against its negatives, and
        the count of its edges."""
        e = self.data.edges
        res: dict[str, float] = {}
        for split in SPLITS:
            pos, neg = getattr(e, f"{split}_pos"), getattr(e, f"{split}_neg")
            scores = predict(torch.cat([pos, neg], dim=1))
            got = link_metrics(scores[: pos.size(1)], scores[pos.size(1) :], HITS_AT)
            for k, v in got.items():
                res[f"{split}_{k}"] = v
            res[f"num-{split}"] = float(pos.size(1))
        res[NUM_LOCAL] = float(self.num_local)
        return res

    @torch.no_grad()
    def evaluate(self, train_mode: bool = False) -> dict[str, float]:
        self.model.train(train_mode)
        return self.metrics_of(self.predictor(self.model))


def make_learner(
    cfg: RunConfig,
    data: NodeClientData | GraphClientData | LinkClientData,
    device: torch.device | None = None,
    build: ModelBuilder | None = None,
    share: tuple[str, ...] | None = None,
) -> Learner:
    """The learner for ``data``'s task, on ``device`` (default: the CPU), with the run's
    model or ``build``'s, federating the ``share`` prefixes (default: all, or the
    backbone's ``shared_prefixes`` across datasets)."""
    return LEARNERS.get(data.task)(cfg, data, device, build, share)

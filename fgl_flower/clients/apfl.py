r"""APFL client (Deng, Kamani and Mahdavi, "Adaptive Personalized Federated Learning", 2020).

The client keeps a local model :math:`v` and a mixing weight :math:`\alpha \in [0, 1]`
besides its copy :math:`w` of the global model (the learner, the only thing uploaded). In each
local step, with :math:`f` the task's training loss (node tasks: the cross-entropy on the
training nodes; link prediction: the cross-entropy of the training edges against new
non-edges):

.. math::
    w \leftarrow w - \eta \nabla f(w), \qquad
    v \leftarrow v - \eta \nabla_v f(\bar v), \qquad
    \alpha \leftarrow \Pi_{[0,1]}\bigl(\alpha - \eta_\alpha \nabla_\alpha f(\bar v)\bigr)

with the personalized model :math:`\bar v = \alpha v + (1 - \alpha) w` (Algorithm 1), so
:math:`\nabla_v f(\bar v) = \alpha \nabla f(\bar v)` and
:math:`\nabla_\alpha f(\bar v) = \langle v - w, \nabla f(\bar v)\rangle` (both by autograd
through the mixed parameters). The optimizers are the run's (``optimizer``); ``apfl.variant =
official`` mixes the outputs instead, :math:`\alpha v(x) + (1 - \alpha) w(x)` (link
prediction: the pairs' logits), and steps
:math:`\alpha` once per round as the authors' FedTorch code does
(:func:`official_alpha_step`). Evaluation is of the personalized model: at the end of the
client's round with its own trained :math:`w` (``apfl.evaluate = "trained"``, in the train
reply), or with the averaged :math:`w` the server sends next (``"received"``).
"""

from __future__ import annotations

import torch
from flwr.app import RecordDict
from torch import Tensor
from torch.func import functional_call

from fgl_flower.clients.base import LearnerClient
from fgl_flower.clients.learner import Predict, make_learner
from fgl_flower.datasets import NodeClientData
from fgl_flower.datasets.client_data import LinkClientData
from fgl_flower.methods.apfl import APFLOptions
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import METRICS

ALPHA = "apfl.alpha"  # context.state key of α (JSON)
PERSONAL = "apfl.local"  # context.state prefix of the local model v


def mixed_parameters(v: torch.nn.Module, w: torch.nn.Module, alpha: Tensor) -> dict[str, Tensor]:
    r""":math:`\alpha v + (1 - \alpha) w` per parameter (``w`` detached: its gradient is its own
    step's); buffers are ``v``'s."""
    wp = dict(w.named_parameters())
    out = {n: alpha * p + (1 - alpha) * wp[n].detach() for n, p in v.named_parameters()}
    out.update(dict(v.named_buffers()))
    return out


def official_alpha_step(v: torch.nn.Module, w: torch.nn.Module, alpha: float, lr: float) -> float:
    r"""FedTorch's ``alpha_update``: with :math:`g_v, g_w` the gradients of the mixed-output
    loss left in ``v`` and ``w``,
    :math:`\alpha - \eta\bigl(\sum \langle v - w,\ \alpha g_v + (1-\alpha) g_w\rangle
    + 0.02\,\alpha\bigr)`, clipped to :math:`[0, 1]`."""
    grad = 0.02 * alpha
    for pv, pw in zip(v.parameters(), w.parameters()):
        if pv.grad is not None and pw.grad is not None:
            grad += float(((pv - pw).detach() * (alpha * pv.grad + (1 - alpha) * pw.grad)).sum())
    return min(1.0, max(0.0, alpha - lr * grad))


class APFLClient(LearnerClient):
    """The learner is :math:`w`; :attr:`personal` is :math:`v`; :attr:`alpha` is α. Written
    once for the full-batch tasks through the learner's :meth:`~fgl_flower.clients.learner.
    Learner.loss_of` and :meth:`~fgl_flower.clients.learner.Learner.metrics_of`."""

    data: NodeClientData | LinkClientData

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.opts = APFLOptions.from_config(self.cfg)
        self.personal = make_learner(self.cfg, self.data, self.device)
        self.personal.restore(self.state, PERSONAL)
        saved = self.state.get_json(ALPHA) if ALPHA in self.state else None
        self.alpha = self.opts.alpha if saved is None else float(saved)

    def refresh(self) -> None:
        super().refresh()
        if not self.cfg.keep_optimizer_state:
            self.personal.reset_optimizer()

    @property
    def alpha_lr(self) -> float:
        return self.cfg.lr if self.opts.alpha_lr == -1.0 else self.opts.alpha_lr

    def mixed(self, alpha: Tensor | float) -> Predict:
        """The personalized model's predictions on the client's data."""
        learner = self.learner
        v, w = self.personal.model, learner.model
        if self.opts.variant == "official":
            pv, pw = learner.predictor(v), learner.predictor(w)
            return lambda query=None: alpha * pv(query) + (1 - alpha) * pw(query)
        a = alpha if isinstance(alpha, Tensor) else torch.tensor(alpha, device=self.device)
        return lambda query=None: functional_call(
            v, mixed_parameters(v, w, a), learner.inputs(query)
        )

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        self.load_global(content)
        self.seed_round(server_round)
        w, v = self.learner, self.personal
        own = w.predictor(w.model)
        w.model.train()
        v.model.train()
        start = self.alpha
        loss_w = loss_v = torch.zeros(())
        for step in range(self.cfg.local_epochs):
            if self.opts.variant == "official":  # FedTorch: w's step, then v's on the new w
                w.optimizer.zero_grad()
                loss_w = w.loss_of(own)
                loss_w.backward()
                w.optimizer.step()
                w.optimizer.zero_grad()
                v.optimizer.zero_grad()
                loss_v = w.loss_of(self.mixed(self.alpha))
                loss_v.backward()
                v.optimizer.step()
                if self.opts.adaptive and step == 0:
                    self.alpha = official_alpha_step(v.model, w.model, self.alpha, self.alpha_lr)
                continue
            # Algorithm 1: both gradients at the step's start, then the three updates
            alpha = torch.tensor(self.alpha, device=self.device, requires_grad=self.opts.adaptive)
            v.optimizer.zero_grad()
            loss_v = w.loss_of(self.mixed(alpha))
            loss_v.backward()
            w.optimizer.zero_grad()
            loss_w = w.loss_of(own)
            loss_w.backward()
            v.optimizer.step()
            w.optimizer.step()
            if self.opts.adaptive:
                self.alpha = min(1.0, max(0.0, self.alpha - self.alpha_lr * float(alpha.grad)))
        self.personal.save(self.state, PERSONAL)
        self.state.set_json(ALPHA, self.alpha)
        metrics = {
            "train_loss": loss_w.item(),
            "apfl.local_loss": loss_v.item(),
            **as_metrics({"alpha": self.alpha, "alpha.moved": abs(self.alpha - start)}),
        }
        if self.opts.evaluate == "trained":  # the server reads the round's evaluation here
            metrics.update(self.evaluate_personalized(server_round))
        return self.training_reply(metrics)

    def evaluate_personalized(self, server_round: int) -> dict[str, float]:
        """The personalized model's metrics (with ``eval-dropout`` in train mode, seeded)."""
        train_mode = self.eval_dropout()
        if train_mode:
            self.seed_round(server_round, "evaluate")
        self.learner.model.train(train_mode)
        self.personal.model.train(train_mode)
        with torch.no_grad():
            return self.learner.metrics_of(self.mixed(self.alpha))

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        """The personalized model; with ``apfl.evaluate = "received"`` its ``w`` is the
        averaged one the message carries (training next loads the same, so nothing is lost)."""
        if self.opts.evaluate == "received":
            self.load_global(content)
        res = self.evaluate_personalized(server_round)
        return RecordDict({METRICS: self.metrics(res, res["num-test"])})

r"""Co-Boost server (Dai et al., "Enhancing One-shot Federated Learning Through Data and
Ensemble Co-Boosting", ICLR 2024; official code rong-dai/Co-Boosting), on graphs as O-pFGL ran
it: DENSE's one round (:mod:`fgl_flower.strategies.dense`) with three changes.

- **Hard samples.** The generator's cross-entropy weighs each node by :math:`(1 - p_{y})^{hs}`,
  the ensemble's probability of the class aimed at (detached); the adversarial term is minus the
  student-teacher KL at :math:`T = 3` over all nodes; generator gradients clipped to norm 10.
- **Ensemble boosting.** The teacher is :math:`\sum_k w_k f_k / \sum_k w_k` (the code's
  ``WEnsemble``: only the weights' proportions count) with :math:`w_k = 1/K` at first. After
  each epoch's synthesis (from the second on), before its graph joins the pool, the weights take
  one signed step :math:`-\mu\,\mathrm{wdc}^{e}\,\mathrm{sign}(\nabla_w \mathrm{CE})` per batch
  of ``num-gen`` pooled nodes (shuffled across the pool, as the code's loader; the clients'
  logits on the pool are cached, the teachers being fixed), each kept within 1 of the weights
  at the epoch's start and in :math:`[0, 1]`.
- **Perturbed distillation.** Each pooled graph's features move by
  :math:`\eta\,\mathrm{sign}(\nabla_x \langle r, \mathrm{softmax}(\bar f(x)/4)\rangle)` with
  :math:`r \sim U(-1, 1)` before the student's step on :math:`T^2\,\mathrm{KL}` at :math:`T = 4`
  to the (current, weighted) ensemble; SGD with weight decay, student gradients clipped to norm
  10, cosine-annealed learning rate over the epochs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fgl_flower.methods.coboost import CoBoostOptions
from fgl_flower.models.dense import kd_loss
from fgl_flower.seeds import derive_seed
from fgl_flower.strategies.dense import DENSEStrategy


class CoBoostStrategy(DENSEStrategy):
    options_class = CoBoostOptions

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.weights: torch.Tensor | None = None  # [K] ensemble weights
        self._scheduler = None
        self._order: torch.Generator | None = None  # shuffles the pool for the weights' steps

    def combine(self, clients, weights=None):
        """``[K, n, C]`` -> ``Σ_k w_k f_k / Σ_k w_k`` (``weights``: the current ones)."""
        w = self.weights if weights is None else weights
        return torch.einsum("k,knc->nc", w, clients) / w.sum()

    def generator_loss(self, s_out, t_out, targets):
        o = self.opts
        p = F.softmax(t_out, -1).gather(1, targets[:, None]).squeeze(1).detach()
        hard = ((1 - p).pow(o.hs) * F.cross_entropy(t_out, targets, reduction="none")).mean()
        T = o.adv_temperature
        adv = -(
            F.kl_div(F.log_softmax(s_out / T, -1), F.softmax(t_out / T, -1), reduction="none").sum(
                -1
            )
            * T
            * T
        ).mean()
        return o.oh * hard + o.adv * adv

    def clip_generator(self, generator):
        torch.nn.utils.clip_grad_norm_(generator.parameters(), max_norm=10)

    def clip_student(self, student):
        torch.nn.utils.clip_grad_norm_(student.parameters(), max_norm=10)

    def student_optimizer(self, student):
        o = self.opts
        opt = torch.optim.SGD(
            student.parameters(), lr=o.kd_lr, momentum=0.9, weight_decay=o.kd_weight_decay
        )
        self._scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=o.epochs)
        return opt

    def end_epoch(self, epoch, student, pool):
        self._scheduler.step()

    def after_synthesis(self, epoch, teachers, pool):
        """The ensemble weights' signed-gradient steps over the earlier epochs' graphs."""
        o = self.opts
        if epoch == 0 or not pool:
            return
        start = self.weights.clone()  # the code's ori_weight
        step = o.mu * o.wdc**epoch
        clients = torch.cat([e["clients"] for e in pool], dim=1)  # [K, N, C]
        targets = torch.cat([e["targets"] for e in pool])
        for _ in range(o.wa_steps):
            for chunk in torch.randperm(targets.numel(), generator=self._order).split(o.num_gen):
                chunk = chunk.to(clients.device)
                w = self.weights.clone().requires_grad_(True)
                loss = F.cross_entropy(self.combine(clients[:, chunk], w), targets[chunk])
                (grad,) = torch.autograd.grad(loss, w)
                moved = w.detach() - step * grad.sign()
                self.weights = (start + (moved - start).clamp(-1.0, 1.0)).clamp(0.0, 1.0)

    def kd_loss(self, student, teachers, batch):
        o = self.opts
        x = batch["x"].clone().requires_grad_(True)
        t_out = self.ensemble(teachers, x, batch["edges"])
        r = torch.empty_like(t_out).uniform_(-1.0, 1.0)
        (grad,) = torch.autograd.grad((r * F.softmax(t_out / 4, -1)).sum(), x)
        x = (x + o.ods_eta * grad.sign()).detach()
        with torch.no_grad():
            t_out = self.ensemble(teachers, x, batch["edges"])
        nodes = batch["nodes"].to(self.device)
        return kd_loss(student(x, batch["edges"])[nodes], t_out[nodes], o.temperature)

    def distill(self, server_round, teachers, student, shape):
        self.weights = torch.full((len(teachers),), 1.0 / len(teachers), device=self.device)
        self._order = torch.Generator().manual_seed(
            derive_seed(self.cfg.seed, "coboost-weights", server_round)
        )
        super().distill(server_round, teachers, student, shape)

    def pool_probes(self, pool, student, fit, classes):
        """DENSE's, the targets' sharpness and the final weights' spread and effective count."""
        out = super().pool_probes(pool, student, fit, classes)
        top = torch.cat(
            [
                F.softmax(self.combine(e["clients"]) / self.opts.temperature, -1).amax(-1)
                for e in pool
            ]
        )
        w, chance = self.weights, 1.0 / classes
        out["coboost.target-sharpness"] = (float(top.mean()) - chance) / (1.0 - chance)
        out["coboost.weight-spread"] = float(w.max() - w.min())
        out["coboost.effective-clients"] = float(w.sum() ** 2 / (w * w).sum())
        return out

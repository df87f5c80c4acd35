r"""FedSpray client (Fu et al., KDD 2024): personalized GNN + global encoder and proxies.

Each round (spec §3.2/§3.3), with the global encoder :math:`\omega` and class proxies
:math:`\mathbf S` from the server:

1. **Teacher.** :math:`\mathbf q = \mathrm{softmax}(g_q(g_e(\mathbf X)))`; unlabeled nodes get
   proxies :math:`\mathbf s_i = \sum_j q_{ij}\mathbf s_j` (Eq. 10); the soft targets are
   :math:`\mathbf p_i = \mathrm{softmax}(g_p(\mathbf e_i + \mathbf s_i))`.
2. **Phase 1** (``local-epochs`` steps) trains the personalized GNN :math:`f(\theta)`:

   .. math::
       \mathcal L_G = \mathrm{CE}_{\mathcal V_L}(\mathbf y, \hat{\mathbf y})
       + \lambda_1\,\mathrm{KL}_{\mathcal V_{KD}}(\mathbf p \,\|\, \hat{\mathbf y})

3. **Phase 2** (``local-epochs`` steps) trains the encoder and the labeled nodes' proxies:

   .. math::
       \mathcal L_F = \mathrm{CE}_{\mathcal V_L}(\mathbf y, \mathbf q)
       + \lambda_2\,\mathrm{KL}_{\mathcal V_L}(\hat{\mathbf y} \,\|\, \mathbf p)

4. **Upload**: the encoder, the class proxies :math:`\mathbf s^{(k)}_j` (mean of the
   training nodes' proxies of class :math:`j`), the class ratios :math:`\mathbf a^{(k)}`
   and the number of training nodes. The GNN never leaves the client. With client-level DP
   (``fedspray.dp-clip``, :mod:`fgl_flower.dp`) the encoder and the proxies go up as one
   clipped update (the proxies under :data:`DP_PROXIES` in ``arrays``; a class the client
   lacks keeps the global proxy), without class ratios: the server averages them equally.

Variants (``fedspray.variant``):

* ``official`` -- what xbfu/FedSpray's code does: training-node proxies are per-node
  parameters that persist across rounds (initially 0.1) and are never reset from
  :math:`\mathbf S`; :math:`\mathcal V_{KD}` = training nodes plus unlabeled nodes with
  :math:`\max_j q_{ij}` above ``fedspray.confidence``; the local projector starts each round
  from the global *classifier* :math:`g_p` (a quirk of the code); :math:`\lambda_1 = 1`.
* ``paper`` -- Algorithm 1 as printed: training-node proxies restart from
  :math:`\mathbf S[y_i]` each round with a fresh optimizer; :math:`\mathcal V_{KD}` = all
  nodes; the projector starts from the global :math:`g_q`; :math:`\lambda_1 = 5`.

``fedspray.zero-proxies`` is the :math:`\mathbf S = 0` ablation (Table 3): every proxy is a
fixed zero vector, so the teacher is :math:`g_p(\mathbf e_i)`.

The train reply carries the method's probes (``probe.*``,
:data:`fgl_flower.methods.fedspray.PROBES`, :func:`spray_probes`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, RecordDict
from torch import Tensor, nn

from fgl_flower.clients.base import FGLClient, derive_seed
from fgl_flower.clients.learner import NodeLearner, make_adam
from fgl_flower.datasets import NodeClientData
from fgl_flower.device import cpu_seeded
from fgl_flower.dp.clipping import clipped_upload
from fgl_flower.dp.options import dp_settings
from fgl_flower.methods.fedspray import DP_PROXIES, PROXIES, FedSprayOptions
from fgl_flower.models.fedspray import FeatureStructureEncoder, initial_proxies
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import ARRAYS, METRICS, START
from fgl_flower.records import get_record, torch_record

INITIAL_NODE_PROXY = 0.1  # the official code's initial per-node proxy value


def kl_to_teacher(student_logits: Tensor, teacher_logp: Tensor) -> Tensor:
    r""":math:`\frac1n\sum_i \mathrm{KL}(t_i \,\|\, \mathrm{softmax}(z_i))` over the rows
    (no temperature); zero for no rows."""
    if student_logits.size(0) == 0:
        return student_logits.sum() * 0.0
    return F.kl_div(
        F.log_softmax(student_logits, -1), teacher_logp, reduction="batchmean", log_target=True
    )


def class_means(values: Tensor, labels: Tensor, num_classes: int) -> Tensor:
    """Per-class mean of ``values [n, d]`` by ``labels [n]`` → ``[C, d]`` (zeros if absent)."""
    sums = torch.zeros(num_classes, values.size(1), dtype=values.dtype, device=values.device)
    sums.index_add_(0, labels, values)
    counts = torch.bincount(labels, minlength=num_classes).clamp(min=1).unsqueeze(1)
    return sums / counts


def proxy_alignment(local: Tensor, received: Tensor, classes: Tensor) -> float:
    r"""Mean *centred* cosine between this client's class proxies :math:`\mathbf s^{(k)}_j`
    and the global ones it received, :math:`\mathbf s_j`, over its training classes
    ``classes``: both are taken relative to the global proxies' class mean
    :math:`\bar{\mathbf s} = \frac1C\sum_c \mathbf s_c`,

    .. math::
        \frac{1}{|J|}\sum_{j\in J}\cos\big(\mathbf s^{(k)}_j - \bar{\mathbf s},\;
        \mathbf s_j - \bar{\mathbf s}\big),

    so a direction every proxy shares (the official code's 0.1 start) does not count as
    alignment, while a client proxy that points the way of its own class's global proxy
    (and not another's) does. A zero vector counts 0 (no direction); 0 for no class."""
    if classes.numel() == 0:
        return 0.0
    centre = received.double().mean(0)
    a, b = local[classes].double() - centre, received[classes].double() - centre
    norms = a.norm(dim=1) * b.norm(dim=1)
    cos = torch.where(norms > 0, (a * b).sum(1) / norms.clamp(min=1e-300), torch.zeros_like(norms))
    return float(cos.mean())


def spray_probes(
    glob: FeatureStructureEncoder,
    e: Tensor,
    teacher_proxies: Tensor,
    teacher_logp: Tensor,
    global_nodes: Tensor,
    kd_nodes: Tensor,
    unlabeled: Tensor,
    y_hat: Tensor,
    local_S: Tensor,
    S: Tensor,
    classes: Tensor,
) -> dict[str, float]:
    r"""FedSpray's probes of one round (:data:`fgl_flower.methods.fedspray.PROBES`).

    ``proxy.shift``: mean total-variation distance between the soft targets
    :math:`\mathbf p_i = \mathrm{softmax}(g_p(\mathbf e_i + \mathbf s_i))` and the proxy-free
    :math:`\mathrm{softmax}(g_p(\mathbf e_i))` over ``global_nodes``, the distilled nodes
    whose proxies come from the global :math:`\mathbf S` (0 if none);
    ``proxy.alignment``: :func:`proxy_alignment` of the uploaded and received class proxies;
    ``proxy.norm``: mean row norm of the received :math:`\mathbf S`; ``kd.agreement``: share
    of :math:`\mathcal V_{KD}` where the teacher's and the trained GNN's argmax agree;
    ``kd.unlabeled``: share of the unlabeled nodes in :math:`\mathcal V_{KD}`.
    """
    agree = teacher_logp[kd_nodes].argmax(-1) == y_hat[kd_nodes].argmax(-1)
    out = {
        "proxy.alignment": proxy_alignment(local_S, S, classes),
        "proxy.norm": float(S.double().norm(dim=1).mean()),
        "kd.agreement": float(agree.double().mean()) if agree.numel() else 0.0,
        "kd.unlabeled": float((kd_nodes & unlabeled).sum() / unlabeled.sum().clamp(min=1)),
    }
    if global_nodes.any():
        with torch.no_grad():  # all rows, as the teacher: exactly 0 for zero proxies
            bare = F.log_softmax(glob.teacher_logits(e, torch.zeros_like(teacher_proxies)), -1)[
                global_nodes
            ]
        out["proxy.shift"] = float(
            0.5 * (teacher_logp[global_nodes].exp() - bare.exp()).abs().sum(-1).mean()
        )
    else:
        out["proxy.shift"] = 0.0
    return out


class FedSprayClient(FGLClient):
    """Personalized GNN, local copy of the global encoder, per-node structure proxies.

    State kept across rounds in ``context.state``: the GNN and its Adam state, the
    per-node proxies and their Adam state (``official``), and the encoder's Adam state
    (the encoder weights themselves are overwritten by the global ones every round).
    """

    data: NodeClientData

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.opts = FedSprayOptions.from_config(self.cfg)
        self.dp = dp_settings(self.cfg)  # client-level DP (fgl_flower.dp): None without
        self.gnn = NodeLearner(self.cfg, self.data, self.device)
        self.gnn.restore(self.state, "gnn")
        self.encoder = self.new_encoder()
        self.encoder_optim = make_adam(self.encoder.parameters(), self.cfg.lr)
        n = self.data.data.num_nodes
        self.node_proxies = nn.Parameter(
            torch.full((n, self.opts.proxy_dim), INITIAL_NODE_PROXY, device=self.device)
        )
        self.proxy_optim = make_adam([self.node_proxies], self.opts.proxy_lr)
        if self.cfg.keep_optimizer_state:
            self.state.load_optimizer("encoder.optim", self.encoder_optim)
        if self.opts.variant == "official":
            saved = self.state.load_tensors("node-proxies")
            if saved is not None:
                self.node_proxies.data.copy_(saved["P"])
                self.state.load_optimizer("node-proxies.optim", self.proxy_optim)

    def refresh(self) -> None:
        if not self.cfg.keep_optimizer_state:
            self.gnn.reset_optimizer()
            self.encoder_optim = make_adam(self.encoder.parameters(), self.cfg.lr)

    def new_encoder(self) -> FeatureStructureEncoder:
        """The initial global encoder :math:`\\omega_0`: the same on every client for a seed."""
        with cpu_seeded(derive_seed(self.cfg.seed, "fedspray-encoder")):
            encoder = FeatureStructureEncoder(
                self.data.num_features, self.data.num_classes, self.opts.proxy_dim
            )
        return encoder.to(self.device)

    # -- messages --------------------------------------------------------------------------
    def global_model(self, content: RecordDict) -> tuple[FeatureStructureEncoder, Tensor]:
        """The global encoder and proxies of this round (:math:`\\omega_0, \\mathbf S_0` in round 1)."""
        encoder = self.new_encoder()
        record = get_record(content, ARRAYS, ArrayRecord)
        if record is not None and len(record):
            encoder.load_state_dict(record.to_torch_state_dict())
        proxies = get_record(content, PROXIES, ArrayRecord)
        if proxies is not None and "S" in proxies:
            S = proxies.to_torch_state_dict()["S"].to(self.device)
        else:
            S = initial_proxies(self.data.num_classes, self.opts.proxy_dim).to(self.device)
        if self.opts.zero_proxies:
            S = torch.zeros_like(S)
        return encoder, S

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        g = self.data.data
        train, y, opts = g.train_mask, g.y, self.opts
        glob, S = self.global_model(content)
        self.seed_round(server_round)

        # -- teacher: p from the global encoder, proxies for the unlabeled nodes ------------
        with torch.no_grad():
            e = e_global = glob.embedding(g.x)
            q = F.softmax(glob.projector_logits(e), -1)
            weighted = q @ S
            if opts.zero_proxies:
                teacher_proxies = torch.zeros_like(weighted)
            elif opts.variant == "official":
                self.node_proxies.data[~train] = weighted[~train]
                teacher_proxies = self.node_proxies.detach().clone()
            else:
                teacher_proxies = torch.where(train.unsqueeze(1), S[y], weighted)
            teacher = F.log_softmax(glob.teacher_logits(e, teacher_proxies), -1)
            if opts.variant == "official":
                kd_nodes = train | (q.max(-1).values > opts.confidence)
            else:
                kd_nodes = torch.ones_like(train)

        # -- phase 1: personalized GNN ----------------------------------------------------
        model, optim = self.gnn.model, self.gnn.optimizer
        model.train()
        ce = kd = torch.zeros((), device=self.device)
        for _ in range(self.cfg.local_epochs):
            optim.zero_grad()
            out = self.gnn.logits()
            ce = F.cross_entropy(out[train], y[train])
            kd = kl_to_teacher(out[kd_nodes], teacher[kd_nodes])
            (ce + opts.lambda1 * kd).backward()
            optim.step()
        model.eval()
        with torch.no_grad():
            y_hat = F.log_softmax(self.gnn.logits(), -1)

        # -- phase 2: encoder and labeled-node proxies -------------------------------------
        self.encoder.load_state_dict(glob.state_dict())
        if opts.variant == "official":  # the code loads the global classifier into g_q
            self.encoder.projector.load_state_dict(glob.classifier.state_dict())
        start = {
            k: v.detach().clone() for k, v in self.encoder.state_dict().items()
        }  # (DP's reference)
        if opts.zero_proxies:
            self.node_proxies.data.zero_()
        elif opts.variant == "paper":
            self.node_proxies.data.copy_(weighted)
            self.node_proxies.data[train] = S[y[train]]
            self.proxy_optim = make_adam([self.node_proxies], opts.proxy_lr)
        fce = fkd = torch.zeros((), device=self.device)
        for _ in range(self.cfg.local_epochs):
            self.encoder_optim.zero_grad()
            self.proxy_optim.zero_grad()
            e = self.encoder.embedding(g.x)
            fce = F.cross_entropy(self.encoder.projector_logits(e)[train], y[train])
            p_logits = self.encoder.teacher_logits(e[train], self.node_proxies[train])
            fkd = kl_to_teacher(p_logits, y_hat[train])
            (fce + opts.lambda2 * fkd).backward()
            self.encoder_optim.step()
            if not opts.zero_proxies:
                self.proxy_optim.step()

        # -- upload ----------------------------------------------------------------------
        C = self.data.num_classes
        local_S = class_means(self.node_proxies.detach()[train], y[train], C)
        counts = torch.bincount(y[train], minlength=C).float()
        ratio = counts / counts.sum().clamp(min=1)
        self.save()
        # the nodes whose teacher proxies come from the global S: the confident unlabeled
        # ones in the official variant (training nodes keep their own), all in the paper's
        global_nodes = kd_nodes & ~train if opts.variant == "official" else kd_nodes
        probes = spray_probes(
            glob,
            e_global,
            teacher_proxies,
            teacher,
            global_nodes,
            kd_nodes,
            ~train,
            y_hat,
            local_S,
            S,
            (counts > 0).nonzero().view(-1),
        )
        metrics = {
            "train_loss": ce.item(),
            "gnn_kd": kd.item(),
            "encoder_ce": fce.item(),
            "encoder_kd": fkd.item(),
            "kd_nodes": float(kd_nodes.sum()),
            **self.evaluate_learner(
                self.gnn, server_round
            ),  # the GNN is final for this round (see the strategy)
            **as_metrics(probes),
        }
        if self.dp is not None:  # encoder and proxies: one clipped update, averaged equally
            reference = {**start, DP_PROXIES: S}
            upload, dp_metrics = clipped_upload(
                {
                    **self.encoder.state_dict(),
                    DP_PROXIES: torch.where((counts > 0).unsqueeze(1), local_S, S),
                },
                reference,
                self.dp.clip,
            )
            reply = RecordDict(
                {ARRAYS: torch_record(upload), METRICS: self.metrics({**metrics, **dp_metrics}, 1)}
            )
            received = get_record(content, ARRAYS, ArrayRecord)
            if received is None or not len(
                received
            ):  # round 1: the server's w0 (fgl_flower.protocol.START)
                reply[START] = torch_record(reference)
            return reply
        return RecordDict(
            {
                ARRAYS: torch_record(self.encoder.state_dict()),
                PROXIES: torch_record({"S": local_S, "class-ratio": ratio}),
                # the weight by agg-weight: train (the code's) by default, local the paper's N^(k)
                METRICS: self.metrics(metrics, self.gnn.num_examples),
            }
        )

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        """Metrics of the personalized GNN (nothing global is needed)."""
        res = self.evaluate_learner(self.gnn, server_round)
        return RecordDict({METRICS: self.metrics(res, res["num-test"])})

    def save(self) -> None:
        self.gnn.save(self.state, "gnn")
        if self.cfg.keep_optimizer_state:
            self.state.save_optimizer("encoder.optim", self.encoder_optim)
        if self.opts.variant == "official":
            self.state.save_tensors("node-proxies", {"P": self.node_proxies.detach()})
            self.state.save_optimizer("node-proxies.optim", self.proxy_optim)

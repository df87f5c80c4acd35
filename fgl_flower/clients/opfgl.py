r"""O-pFGL client (Yan et al., "Towards Federated Graph Learning in One-shot Communication").

Two messages per client, one upload and one download:

1. ``query.stats`` -- label propagation, class homophily, HRE reliable-node expansion and
   the class-wise sums of propagated features :math:`[X\,\|\,\hat AX]` (spec §2.1-2.6);
   the reply holds only sums, so the server can aggregate them securely.
2. ``train`` carrying the pseudo-graph -- Stage 1 trains the shared-initialised GNN
   :math:`M_G` on it with early stopping on local validation accuracy; Stage 2 fine-tunes
   it on the local graph with node-adaptive distillation from the frozen :math:`M_G`
   (§2.10-2.11). The reply carries only metrics (measurement, not protocol), among them
   the method's probes (``probe.*``, :data:`fgl_flower.methods.opfgl.PROBES`,
   :func:`pseudo_graph_probes`).

Options are ``opfgl.<name>`` run-config keys (:class:`~fgl_flower.methods.opfgl.OPFGLOptions`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, RecordDict
from torch import Tensor, nn
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

from fgl_flower.clients.base import FGLClient
from fgl_flower.clients.learner import make_adam, node_metrics, seeded_model
from fgl_flower.methods.opfgl import HRE, PSEUDO_GRAPH, STATS, OPFGLOptions
from fgl_flower.probes import as_metrics
from fgl_flower.protocol import METRICS
from fgl_flower.records import require_record


# --- graph helpers -----------------------------------------------------------------------
def simple_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Symmetric, deduplicated edge list without self-loops (the 0/1 adjacency :math:`A_k`)."""
    ei, _ = remove_self_loops(edge_index)
    return coalesce(to_undirected(ei, num_nodes=num_nodes), num_nodes=num_nodes)


def label_propagation(
    edge_index: Tensor, y: Tensor, train_mask: Tensor, num_classes: int, iters: int, alpha: float
) -> Tensor:
    r"""Soft labels :math:`\tilde Y` (spec §2.2), ``[N, C]``, unnormalised.

    .. math::
        Y^{(t+1)}=\mathrm{clip}_{[0,1]}\big(\alpha\,\bar A Y^{(t)}+(1-\alpha)Y^{(0)}\big),
        \qquad \bar A=\Delta^{-1/2}A\Delta^{-1/2}

    with :math:`Y^{(0)}` the one-hot training labels; all-zero rows become uniform.
    """
    n = y.numel()
    y0 = torch.zeros(n, num_classes, device=y.device)
    y0[train_mask, y[train_mask]] = 1.0
    src, dst = edge_index
    deg = torch.bincount(src, minlength=n).double()
    dinv = torch.where(deg > 0, deg.pow(-0.5), torch.zeros_like(deg))
    w = (dinv[src] * dinv[dst]).float()
    out = y0
    for _ in range(iters):
        agg = torch.zeros_like(out).index_add_(0, dst, out[src] * w[:, None])
        out = (alpha * agg + (1 - alpha) * y0).clamp_(0.0, 1.0)
    zero = out.sum(1) == 0
    out[zero] = 1.0 / num_classes
    return out


def class_homophily(edge_index: Tensor, y: Tensor, train_mask: Tensor, num_classes: int) -> Tensor:
    r"""Accumulated class homophily :math:`H(c)=\sum_{u\in\mathcal V_L, y_u=c} h(u)`, with
    :math:`h(u)` the share of ``u``'s *labelled* neighbours that have ``u``'s label (0 when
    it has none). Vectorised over the edge list (the code loops in :math:`O(N|E|)`)."""
    src, dst = edge_index
    both = train_mask[src] & train_mask[dst]
    src, dst = src[both], dst[both]
    n = y.numel()
    total = torch.bincount(src, minlength=n).double()
    same = torch.bincount(src[y[src] == y[dst]], minlength=n).double()
    h = torch.where(total > 0, same / total.clamp(min=1), torch.zeros_like(total))
    h = h * train_mask.double()
    return torch.zeros(num_classes, dtype=torch.float64, device=y.device).index_add_(0, y, h)


def distillation_factor(homophily: Tensor) -> Tensor:
    r""":math:`w_{dist}(c)=1/(1+\ln(H(c)+1))`."""
    return 1.0 / (1.0 + torch.log1p(homophily))


def reliable_nodes(
    soft: Tensor,
    homophily: Tensor,
    train_mask: Tensor,
    degree: Tensor,
    topk: int,
    conf_threshold: float,
    degree_threshold: int,
) -> tuple[Tensor, Tensor]:
    r"""HRE (Eq. 7-8): unlabelled nodes whose normalised LP prediction is confident
    (:math:`\ge f_{th}`), of sufficient degree (:math:`\ge d_{th}` if :math:`d_{th}>0`) and
    predicted to one of the ``topk`` classes of largest :math:`H`. Returns (indices,
    pseudo-labels); empty when ``topk == 0``."""
    if topk <= 0:
        empty = torch.empty(0, dtype=torch.long, device=soft.device)
        return empty, empty
    p = soft / (soft.sum(1, keepdim=True) + 1e-9)
    conf, pred = p.max(1)
    strong = torch.topk(homophily, min(topk, homophily.numel())).indices
    keep = (~train_mask) & (conf >= conf_threshold) & torch.isin(pred, strong)
    if degree_threshold > 0:
        keep &= degree >= degree_threshold
    idx = keep.nonzero().view(-1)
    return idx, pred[idx]


def _scipy(x: Tensor) -> sp.csr_matrix:
    x = x.cpu()
    if x.is_sparse:
        x = x.coalesce()
        i = x.indices().numpy()
        return sp.csr_matrix((x.values().double().numpy(), (i[0], i[1])), shape=tuple(x.shape))
    return sp.csr_matrix(x.double().numpy())


def propagated_rows(x: Tensor, edge_index: Tensor, rows: Tensor, hops: int) -> np.ndarray:
    r"""Rows ``rows`` of :math:`[X\,\|\,\hat AX\,\|\dots\|\,\hat A^hX]` (Eq. 5) as float64,
    with :math:`\hat A=\tilde D^{-1/2}(A+I)\tilde D^{-1/2}` on the simple local graph.

    Computed on the CPU in float64 with SciPy, whatever the run's device: a one-off
    sparse product whose exact sums are the upload."""
    n = x.size(0)
    src, dst = edge_index.cpu().numpy()
    a = sp.csr_matrix((np.ones(src.size), (dst, src)), shape=(n, n)) + sp.eye(n, format="csr")
    d = np.asarray(a.sum(1)).ravel() ** -0.5
    a_hat = sp.diags(d) @ a @ sp.diags(d)
    feats = _scipy(x)
    r = rows.cpu().numpy()
    blocks, cur, sel = [feats[r]], feats, a_hat[r]
    for _ in range(hops):
        blocks.append(sel @ cur)
        cur = a_hat @ cur
    return np.hstack([b.toarray() if sp.issparse(b) else np.asarray(b) for b in blocks])


def class_sums(
    features: np.ndarray, labels: np.ndarray, orig: np.ndarray, num_classes: int
) -> dict[str, Tensor]:
    r"""The upload (spec §2.6): for each class with :math:`N_k^c\ge2` the count, presence,
    labelled count, :math:`\sum\mathbf x` and :math:`\sum\mathbf x^{\odot2}`; zeros otherwise."""
    dim = features.shape[1]
    out = {
        "cnt": np.zeros(num_classes),
        "present": np.zeros(num_classes),
        "orig_cnt": np.zeros(num_classes),
        "s1": np.zeros((num_classes, dim)),
        "s2": np.zeros((num_classes, dim)),
    }
    for c in range(num_classes):
        sel = labels == c
        if sel.sum() < 2:
            continue
        rows = features[sel]
        out["cnt"][c], out["present"][c], out["orig_cnt"][c] = sel.sum(), 1.0, orig[c]
        out["s1"][c], out["s2"][c] = rows.sum(0), (rows**2).sum(0)
    return {k: torch.from_numpy(v) for k, v in out.items()}


def pseudo_graph_probes(y_syn: Tensor, edge_index: Tensor, y_train: Tensor) -> dict[str, float]:
    """The received pseudo-graph seen from one client (:data:`fgl_flower.methods.opfgl.PROBES`):
    its nodes, the share of the client's training classes (labels ``y_train``) among its
    labels (1 for a client without labels: nothing is missing) and its directed edges per
    node."""
    n = y_syn.numel()
    own = torch.unique(y_train)
    covered = torch.isin(own, y_syn).double().mean() if own.numel() else torch.tensor(1.0)
    return {
        "pseudo.nodes": float(n),
        "pseudo.coverage": float(covered),
        "pseudo.edges": edge_index.size(1) / n if n else 0.0,
    }


# --- training with early stopping --------------------------------------------------------
def train_with_selection(
    model: nn.Module,
    loss_fn: Callable[[], Tensor],
    val_acc: Callable[[], float],
    lr: float,
    max_steps: int,
    eval_every: int,
    patience: int,
) -> dict[str, float]:
    """The code's loop for both stages: steps ``0..max_steps``; after step ``t >= eval_every``
    with ``t % eval_every == 0`` evaluate local val accuracy, keep the strictly best
    checkpoint, stop after ``patience`` evaluations without improvement."""
    opt = make_adam(model.parameters(), lr)
    best, best_state, bad, t = 0.0, None, 0, 0
    for t in range(max_steps + 1):
        model.train()
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
        if t >= eval_every and t % eval_every == 0:
            acc = val_acc()
            if acc > best:
                best, best_state, bad = acc, copy.deepcopy(model.state_dict()), 0
            else:
                bad += 1
                if bad >= patience:
                    break
    if best_state is not None:
        model.load_state_dict(best_state)
    return {"steps": float(t + 1), "best_val_acc": best}


class OPFGLClient(FGLClient):
    """Answers ``query.stats`` (upload) and ``train`` with the pseudo-graph (download)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.opts = OPFGLOptions.from_config(self.cfg)
        g = self.data.data
        self.edges = simple_edges(g.edge_index, g.num_nodes)

    # -- phase A: statistics ---------------------------------------------------------------
    def soft_labels(self) -> Tensor:
        g, o = self.data.data, self.opts
        return label_propagation(
            self.edges, g.y, g.train_mask, self.data.num_classes, o.lp_iters, o.lp_alpha
        )

    def homophily(self) -> Tensor:
        g = self.data.data
        return class_homophily(self.edges, g.y, g.train_mask, self.data.num_classes)

    def query(self, action: str, content: RecordDict) -> RecordDict:
        if action != "stats":
            return super().query(action, content)
        g, o, C = self.data.data, self.opts, self.data.num_classes
        soft, hom = self.soft_labels(), self.homophily()
        degree = torch.bincount(self.edges[0], minlength=g.num_nodes)
        extra, pseudo = reliable_nodes(
            soft, hom, g.train_mask, degree, o.topk, o.conf_threshold, o.degree_threshold
        )
        train = g.train_mask.nonzero().view(-1)
        rows = torch.cat([train, extra])
        labels = torch.cat([g.y[train], pseudo]).cpu().numpy()
        orig = np.bincount(g.y[train].cpu().numpy(), minlength=C)
        sums = class_sums(propagated_rows(g.x, self.edges, rows, o.hops), labels, orig, C)
        # measurement only, never used by the method: nodes HRE added and how many it labelled
        # right, summed with the statistics (so that under secure aggregation too the server
        # learns only the sums)
        sums[HRE] = torch.tensor(
            [float(extra.numel()), float((g.y[extra] == pseudo).sum())], dtype=torch.float64
        )
        return RecordDict({STATS: ArrayRecord(sums), METRICS: self.metrics({}, train.numel())})

    # -- phase C: personalisation ----------------------------------------------------------
    def logits(self, model: nn.Module) -> Tensor:
        g = self.data.data
        return model(g.x, g.edge_index)

    @torch.no_grad()
    def val_acc(self, model: nn.Module) -> float:
        g = self.data.data
        model.eval()
        if not g.val_mask.any():
            return 0.0
        return float((self.logits(model)[g.val_mask].argmax(-1) == g.y[g.val_mask]).double().mean())

    def gamma(self) -> Tensor:
        r""":math:`\gamma_i=\mathrm{clip}(\beta\,\tilde{\mathbf y}_i\cdot\mathbf w_{dist},
        \gamma_{\min},\gamma_{\max})` (bounds < 0 are unset; the paper variant never clips)."""
        o = self.opts
        g = (o.beta * self.soft_labels().double() @ distillation_factor(self.homophily())).float()
        if not o.paper and o.gamma_min >= 0:
            g = g.clamp(min=o.gamma_min)
        if not o.paper and o.gamma_max >= 0:
            g = g.clamp(max=o.gamma_max)
        return g

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        o, g, cfg = self.opts, self.data.data, self.cfg
        syn = {
            k: v.to(self.device)
            for k, v in require_record(content, PSEUDO_GRAPH, ArrayRecord)
            .to_torch_state_dict()
            .items()
        }
        self.seed_round(server_round)
        # the same initial M_G on every client (shared seed)
        model = seeded_model(cfg, "node", self.data.num_features, self.data.num_classes).to(
            self.device
        )
        x_s, ei_s, ew_s, y_s = syn["x"], syn["edge_index"], syn["edge_weight"], syn["y"]
        stage1 = train_with_selection(
            model,
            lambda: F.cross_entropy(model(x_s, ei_s, ew_s), y_s),
            lambda: self.val_acc(model),
            o.lr_global,
            o.max_steps,
            o.eval_every,
            o.patience,
        )
        model.eval()
        with torch.no_grad():
            teacher_logits = self.logits(model)
        p_t = teacher_logits.softmax(-1)
        gamma = self.gamma()
        n = g.num_nodes

        def stage2_loss() -> Tensor:
            z = self.logits(model)
            ce = F.cross_entropy(z[g.train_mask], g.y[g.train_mask])
            kl = F.kl_div(z.log_softmax(-1), p_t, reduction="none").sum(-1)
            dist = (gamma * kl).sum()
            return ce + (dist if o.paper else dist / n)

        stage2 = train_with_selection(
            model,
            stage2_loss,
            lambda: self.val_acc(model),
            o.lr_ft,
            o.max_steps,
            o.eval_every,
            o.patience,
        )
        model.train(cfg.eval_dropout)  # the reported evaluation: eval-dropout keeps dropout on
        if cfg.eval_dropout:
            self.seed_round(server_round, "evaluate")
        with torch.no_grad():
            res = node_metrics(self.logits(model), self.data)
        res |= {
            f"global_{k}": v
            for k, v in node_metrics(teacher_logits, self.data).items()
            if not k.startswith("num-")
        }
        res |= {
            "stage1_steps": stage1["steps"],
            "stage2_steps": stage2["steps"],
            "gamma_mean": float(gamma.mean()),
        }
        probes = pseudo_graph_probes(y_s, ei_s, g.y[g.train_mask]) | {
            "distill.gamma": float(gamma.mean())
        }
        res |= as_metrics(probes)
        return RecordDict({METRICS: self.metrics(res, self.data.num_train)})

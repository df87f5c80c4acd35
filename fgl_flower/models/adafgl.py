r"""AdaFGL's step-2 model and its graph operators (Li et al., "AdaFGL: A New Paradigm for
Federated Node Classification with Topology Heterogeneity", ICDE 2024; arXiv 2401.11750).

Everything here is one client's, on its subgraph of :math:`n` nodes, with :math:`P \in
[0,1]^{n \times C}` the federated knowledge extractor's (step 1's global model's) class
probabilities of every local node. The official code's operators (``models/my_model.py``,
``utils.py``, ``label_propagation_models.py`` of xkLi-Allen/AdaFGL), as dense matrices: the
similarity matrices are :math:`n \times n` by design (:data:`MAX_NODES`).

* :func:`similarity` :math:`S = \mathrm{cos}(\mathrm{softmax}(Z))` row against row, zero
  diagonal (the codes apply it to :math:`P`, already probabilities: a second softmax).
* :func:`knowledge_adjacency` :math:`\tilde A = \alpha A + (1 - \alpha)\,[S(P) > \tau]`.
* :func:`normalize` :math:`\hat M = D^{r-1} (M + I)^\top D^{-r}`, :math:`D` the row sums of
  :math:`M + I` (:math:`r = 1/2`: :math:`D^{-1/2}(M+I)D^{-1/2}` for a symmetric :math:`M`).
* :func:`propagated_features` :math:`X_K = [X \,\|\, \hat A X \,\|\, \dots \,\|\, \hat A^K X]`
  with :math:`\hat A` the normalized :math:`\tilde A`: ``[n, (K+1) F]``.
* :func:`homophily_confidence` the HCS: label propagation from half the training labels
  over the *original* :math:`A`, scored on the other half.
* :class:`HomoModule` and :class:`HeteModule`, the two propagation modules, and
  :func:`fuse` the prediction of :class:`AdaFGLModel`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

#: The similarity matrices are dense ``[n, n]`` (as in both codes), and a step of the
#: heterophilous module keeps about a dozen for its backward (~11 GB at this size, 4 bytes an
#: entry); above this many local nodes a client stops with a message instead.
MAX_NODES = 15_000


def similarity(z: Tensor) -> Tensor:
    r"""``[n, n]``: the cosine similarity of the rows of :math:`\mathrm{softmax}(z)`, with a
    zero diagonal (``getre_scale``). ``z [n, C]``."""
    p = F.softmax(z, dim=1)
    gram = p @ p.t()
    norms = torch.diagonal(gram).unsqueeze(1)
    gram = gram / torch.sqrt(norms @ norms.t()).clamp(min=1e-9)
    return gram - torch.diag_embed(torch.diagonal(gram))


def dense_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``[n, n]``: the local adjacency :math:`A` as 0/1 (a repeated edge counts once)."""
    a = torch.zeros(num_nodes, num_nodes, device=edge_index.device)
    a[edge_index[0], edge_index[1]] = 1.0
    return a


def knowledge_edges(probs: Tensor, threshold: float) -> Tensor:
    r"""``[n, n]`` 0/1: :math:`[S(P) > \tau]`, the pairs the extractor's knowledge links."""
    return (similarity(probs) > threshold).float()


def knowledge_adjacency(adj: Tensor, knowledge: Tensor, alpha: float) -> Tensor:
    r""":math:`\tilde A = \alpha A + (1 - \alpha) A_P` of the 0/1 ``adj`` and ``knowledge``
    (:func:`knowledge_edges`)."""
    return alpha * adj + (1.0 - alpha) * knowledge


def normalize(m: Tensor, r: float) -> Tensor:
    r""":math:`D^{r-1} (M + I)^\top D^{-r}` with :math:`D = \mathrm{diag}((M + I)\mathbf 1)`
    (``adj_to_symmetric_norm``). ``m [n, n]``."""
    m = m + torch.eye(m.size(0), device=m.device)
    d = m.sum(dim=1)
    return d.pow(r - 1.0)[:, None] * m.t() * d.pow(-r)[None, :]


def propagated_features(adj_norm: Tensor, x: Tensor, steps: int) -> Tensor:
    r"""``[n, (K+1) F]``: :math:`[X \| \hat A X \| \dots \| \hat A^K X]`, :math:`K` = ``steps``."""
    out = [x]
    for _ in range(steps):
        out.append(adj_norm @ out[-1])
    return torch.cat(out, dim=1)


def label_propagation(
    adj_norm: Tensor, y0: Tensor, seed: Tensor, steps: int, alpha: float
) -> Tensor:
    r"""``steps`` times :math:`Y \leftarrow \alpha \hat A Y + (1 - \alpha) Y_0`, then
    :math:`Y_{seed} \mathrel{+}= Y_{0,seed}` (``init_lp_propagate``: the seed rows are
    added to, not clamped). ``y0 [n, C]``, ``seed`` node indices; returns :math:`Y`."""
    out = y0
    for _ in range(steps):
        out = alpha * (adj_norm @ out) + (1.0 - alpha) * y0
        out[seed] += y0[seed]
    return out


def homophily_confidence(
    adj_norm: Tensor,
    y: Tensor,
    train_mask: Tensor,
    num_classes: int,
    generator: torch.Generator,
    steps: int = 10,
    alpha: float = 0.5,
) -> float:
    r"""The Homophily Confidence Score: the training nodes drawn into halves (``generator``;
    the first :math:`\lfloor |T|/2 \rfloor` seed), :math:`Y_0` one-hot labels of the seeds and
    uniform rows elsewhere, :func:`label_propagation` over :math:`\hat A` (the normalized
    *original* adjacency); the accuracy of :math:`\arg\max Y` on the held-out half (``nan``
    with fewer than 2 training nodes). Both codes reset only the held-out, validation and test
    rows, so a node in no split keeps its true label there; here it is uniform too."""
    train = train_mask.nonzero().view(-1)
    if len(train) < 2:
        return float("nan")
    order = train[torch.randperm(len(train), generator=generator).to(train.device)]
    seed, held = order[: len(train) // 2], order[len(train) // 2 :]
    y0 = torch.full((len(y), num_classes), 1.0 / num_classes, device=y.device)
    y0[seed] = F.one_hot(y[seed], num_classes).float()
    out = label_propagation(adj_norm, y0, seed, steps, alpha)
    return float((out[held].argmax(dim=1) == y[held]).float().mean())


def mlp(sizes: list[int]) -> nn.ModuleList:
    """Linear layers of ``sizes`` (PReLU and dropout between them, applied by :func:`run_mlp`),
    Xavier-uniform with ReLU gain and zero biases, as both codes."""
    layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
    gain = nn.init.calculate_gain("relu")
    for layer in layers:
        nn.init.xavier_uniform_(layer.weight, gain=gain)
        nn.init.zeros_(layer.bias)
    return layers


def run_mlp(layers: nn.ModuleList, x: Tensor, act: nn.Module, dropout: nn.Dropout) -> Tensor:
    for layer in layers[:-1]:
        x = dropout(act(layer(x)))
    return layers[-1](x)


class HomoModule(nn.Module):
    r"""The homophilous propagation module: a 2-layer MLP on :math:`X_K`, trained by
    :math:`\mathrm{CE}(H_T, y_T) + \mathrm{MSE}(H, P)` over all nodes (logits against the
    extractor's probabilities, as both codes); its prediction
    :math:`\frac12(\mathrm{softmax}(H) + \mathrm{softmax}(P))`."""

    def __init__(self, in_dim: int, hidden: int, num_classes: int, dropout: float) -> None:
        super().__init__()
        self.act = nn.PReLU()
        self.dropout = nn.Dropout(dropout)
        self.layers = mlp([in_dim, hidden, num_classes])

    def forward(self, x_k: Tensor) -> Tensor:
        """``[n, C]`` logits :math:`H` from ``x_k [n, (K+1) F]``."""
        return run_mlp(self.layers, x_k, self.act, self.dropout)


class HeteModule(nn.Module):
    r"""The heterophilous propagation module: 3-layer MLPs on :math:`X` (:math:`H_{loc}`)
    and on :math:`X_K` (:math:`H_{smooth}`), and the learnable propagation on a third one's
    output :math:`H` (``HetePropagateLayer``):

    .. math::
        R = \beta A_P + (1 - \beta)\, S(H), \quad
        R' = \begin{cases} (R - \mu)/(M - \mu) & R > \mu \\ -R/\mu & \text{else}
        \end{cases} + I,

        O = \tfrac12\big(\mathrm{softmax}(\sigma(R') H) - \mathrm{softmax}(\sigma(-R') H) + H\big)

    with :math:`\mu, M` the mean and maximum of :math:`R` and :math:`\sigma` a PReLU (one
    learnable slope, shared with the MLP of :math:`H`). Trained by the sum of the three
    cross-entropies on the training nodes; its prediction is the mean of their softmaxes.
    ``beta``: 0.2 in the official code, 0 in OpenFGL's."""

    def __init__(
        self, feat_dim: int, in_dim: int, hidden: int, num_classes: int, dropout: float, beta: float
    ) -> None:
        super().__init__()
        self.beta = beta
        self.act = nn.PReLU()  # H_loc's and H_smooth's
        self.prop_act = nn.PReLU()  # the propagation layer's MLP and its signals
        self.dropout = nn.Dropout(dropout)
        sizes = [hidden, hidden, num_classes]
        self.local = mlp([feat_dim, *sizes])
        self.smooth = mlp([in_dim, *sizes])
        self.prop = mlp([in_dim, *sizes])

    def propagation(self, h: Tensor, knowledge: Tensor) -> Tensor:
        """``[n, n]``: :math:`R'` (class docstring) of the embedding ``h [n, C]``."""
        r = self.beta * knowledge + (1.0 - self.beta) * similarity(h)
        mean, top = r.mean(), r.max()
        r = r - mean
        r = torch.where(r > 0, r / (top - mean), -(r + mean) / mean)
        return r + torch.eye(r.size(0), device=r.device)

    def forward(self, x: Tensor, x_k: Tensor, knowledge: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(H_loc, H_smooth, O)``, each ``[n, C]``."""
        h_loc = run_mlp(self.local, x, self.act, self.dropout)
        h_smooth = run_mlp(self.smooth, x_k, self.act, self.dropout)
        h = run_mlp(self.prop, x_k, self.prop_act, self.dropout)
        r = self.propagation(h, knowledge)
        pos = F.softmax(self.prop_act(r) @ h, dim=1)
        neg = F.softmax(self.prop_act(-r) @ h, dim=1)
        return h_loc, h_smooth, (pos - neg + h) / 2


class AdaFGLModel(nn.Module):
    """Step 2's modules for one client: ``homo`` and ``hete``, or only the one the hard
    switch chose (``modules``: a subset of ``("homo", "hete")``)."""

    def __init__(
        self,
        feat_dim: int,
        steps: int,
        hidden: int,
        num_classes: int,
        dropout: float,
        beta: float,
        modules: tuple[str, ...],
    ) -> None:
        super().__init__()
        in_dim = (steps + 1) * feat_dim
        self.homo = HomoModule(in_dim, hidden, num_classes, dropout) if "homo" in modules else None
        self.hete = (
            HeteModule(feat_dim, in_dim, hidden, num_classes, dropout, beta)
            if "hete" in modules
            else None
        )


def homo_probs(h: Tensor, probs: Tensor) -> Tensor:
    r""":math:`\frac12(\mathrm{softmax}(H) + \mathrm{softmax}(P))` (both codes' second
    softmax of the probabilities :math:`P`)."""
    return (F.softmax(h, dim=1) + F.softmax(probs, dim=1)) / 2


def hete_probs(outputs: tuple[Tensor, Tensor, Tensor]) -> Tensor:
    """The mean of the softmaxes of :class:`HeteModule`'s three outputs."""
    return sum(F.softmax(o, dim=1) for o in outputs) / 3


def fuse(homo: Tensor | None, hete: Tensor | None, weight: float) -> Tensor:
    """``weight * homo + (1 - weight) * hete`` (a module that is not there counts 0)."""
    if homo is None:
        return hete
    if hete is None:
        return homo
    return weight * homo + (1.0 - weight) * hete

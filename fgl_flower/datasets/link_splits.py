r"""Per-client edge splits for link prediction in subgraph federated learning.

A client holds a subgraph on nodes :math:`0..n-1` (``edge_index`` of local ids, both
directions stored for an undirected graph, self-loops possible). :func:`split_edges` turns
it into a :class:`LinkSplit`:

* the undirected edges :math:`E` (each once, :math:`u<v`, self-loops dropped) are shuffled
  by ``numpy.random.default_rng(seed)`` and cut as the node splits are cut
  (:mod:`fgl_flower.datasets.splits`): ``[:int(r_tr |E|)]`` train,
  ``[int(r_tr |E|):int((r_tr+r_va) |E|)]`` validation, the rest test;
* validation and test negatives are drawn from the same generator, uniformly without
  replacement among the client's non-edges

  .. math::
     \bar E = \{(u, v) : 0 \le u < v < n\} \setminus E,

  :math:`r\,|E_{va}|` for validation and :math:`r\,|E_{te}|` for test (:math:`r` =
  ``neg_ratio``), the two sets disjoint;
* the message-passing graph holds the training edges only, in both directions: no
  validation or test edge reaches the encoder.

Training negatives are drawn anew each epoch by :func:`sample_negatives`, which excludes
the keys it is given (:func:`edge_keys` of the training edges, or of every positive).

Pairs are keyed as :math:`u\,n + v` (``int64``, :math:`u<v`), so membership is a sorted
search (``np.isin``): a client with :math:`10^5` edges splits in milliseconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from fgl_flower.datasets.splits import check_ratios
from fgl_flower.errors import ConfigError

Seed = int | Sequence[int]

#: Enumerate every candidate pair instead of rejection sampling when there are at most this
#: many pairs, or fewer than 8 pairs per excluded-or-wanted one (dense or small graphs).
_ENUMERATE_PAIRS = 1 << 16


@dataclass(frozen=True, eq=False)
class LinkSplit:
    r"""One client's link-prediction split; every tensor is ``int64`` of local node ids.

    ``train_pos``, ``val_pos``, ``test_pos`` hold each undirected edge once (row 0 < row 1),
    disjoint. ``val_neg`` and ``test_neg`` hold non-edges of the client's whole graph
    (:math:`u<v`, no self-loop, no pair twice, the two sets disjoint), ``neg_ratio`` times
    as many as the positives. ``message_edges`` is the message-passing graph: the training
    edges in both directions, sorted by (source, target); it holds no validation or test
    edge. Columns of the other tensors are sorted by key :math:`u\,n+v`.
    """

    num_nodes: int
    train_pos: Tensor
    val_pos: Tensor
    test_pos: Tensor
    val_neg: Tensor
    test_neg: Tensor
    message_edges: Tensor

    def to(self, device: torch.device | str) -> LinkSplit:
        """A copy with every tensor on ``device``."""
        moved = {
            f.name: getattr(self, f.name).to(device)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), Tensor)
        }
        return dataclasses.replace(self, **moved)


def edge_keys(edge_index: Tensor | np.ndarray, num_nodes: int) -> np.ndarray:
    r"""Sorted unique keys :math:`\min(u,v)\,n + \max(u,v)` of ``edge_index`` ``[2, E]``,
    self-loops dropped: the undirected edge set, in the form :func:`sample_negatives`
    excludes."""
    ei = _as_numpy(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ConfigError(f"edge_index must have shape [2, E], got {list(ei.shape)}.")
    if ei.size and (ei.min() < 0 or ei.max() >= num_nodes):
        raise ConfigError(
            f"edge_index holds node ids in [{ei.min()}, {ei.max()}], outside the "
            f"client's {num_nodes} nodes."
        )
    u, v = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    keep = u != v
    return np.unique(u[keep] * np.int64(num_nodes) + v[keep])


def split_edges(
    edge_index: Tensor,
    num_nodes: int,
    ratios: Sequence[float] = (0.8, 0.1, 0.1),
    seed: Seed = 0,
    neg_ratio: int = 1,
) -> LinkSplit:
    r"""Split a client's undirected edges into train/validation/test with fixed negatives.

    ``seed`` is anything ``numpy.random.default_rng`` takes, e.g. ``[split_seed,
    client_id]``; one generator shuffles the edges, then draws the validation and test
    negatives. The result depends on the edge *set* only, not on the column order or on
    whether both directions are stored. See the module docstring for the cut.

    Raises :class:`~fgl_flower.errors.ConfigError` when ``ratios`` are not 3 non-negative
    numbers summing to 1, when a part with a positive ratio comes out empty (too few
    edges), or when the graph has fewer non-edges than the validation and test negatives
    need (too small or dense for ``neg_ratio``).
    """
    r_tr, r_va, r_te = check_ratios(ratios)
    neg_ratio = _check_count(neg_ratio, "neg_ratio")
    n = _check_count(num_nodes, "num_nodes")
    keys = edge_keys(edge_index, n)
    rng = np.random.default_rng(seed)
    perm = keys[rng.permutation(keys.size)]
    m = keys.size
    a, b = int(r_tr * m), int((r_tr + r_va) * m)
    tr, va, te = perm[:a], perm[a:b], perm[b:]
    for name, part, ratio in (("test", te, r_te), ("validation", va, r_va), ("train", tr, r_tr)):
        if ratio > 0 and part.size == 0:
            raise ConfigError(
                f"client subgraph too small for link prediction: {m} undirected edges "
                f"({n} nodes) leave the {name} split empty at ratios {(r_tr, r_va, r_te)} "
                f"(it needs {_min_edges((r_tr, r_va, r_te))} edges); use fewer clients "
                f"(larger subgraphs) or a larger {name} ratio."
            )
    wanted = neg_ratio * (va.size + te.size)
    available = n * (n - 1) // 2 - m
    if wanted > available:
        raise ConfigError(
            f"client subgraph too dense or small for link prediction: {n} nodes and {m} "
            f"undirected edges leave {available} non-edges, fewer than the {wanted} "
            f"validation and test negatives at neg_ratio={neg_ratio}; lower neg_ratio or "
            f"use fewer clients (larger subgraphs)."
        )
    neg = _draw_keys(n, keys, wanted, _NumpyDraw(rng))
    cut = neg_ratio * va.size
    train_pos = _to_edges(np.sort(tr), n)
    return LinkSplit(
        num_nodes=n,
        train_pos=train_pos,
        val_pos=_to_edges(np.sort(va), n),
        test_pos=_to_edges(np.sort(te), n),
        val_neg=_to_edges(np.sort(neg[:cut]), n),
        test_neg=_to_edges(np.sort(neg[cut:]), n),
        message_edges=_both_directions(train_pos, n),
    )


def sample_negatives(
    num_nodes: int,
    exclude_keys: Tensor | np.ndarray,
    count: int,
    generator: torch.Generator | np.random.Generator,
) -> Tensor:
    r"""``count`` distinct node pairs, uniform over those not in ``exclude_keys``.

    Returns ``int64 [2, count]`` with :math:`u<v` (no self-loop), in draw order: a uniform
    sample without replacement from

    .. math::
        \{(u, v) : 0 \le u < v < n\} \setminus \{(u, v) : u\,n + v \in K\},

    :math:`K` = ``exclude_keys`` (keys as :func:`edge_keys` makes them). Exact: no pair in
    :math:`K` is ever returned. Draws from ``generator`` (``torch.Generator`` or
    ``numpy.random.Generator``) and advances it, so calling it once per epoch gives a new
    draw each epoch and the same sequence for the same seed. Raises
    :class:`~fgl_flower.errors.ConfigError` if fewer than ``count`` pairs are left.
    """
    n = _check_count(num_nodes, "num_nodes")
    count = _check_count(count, "count")
    excl = np.unique(_as_numpy(exclude_keys).reshape(-1))
    if excl.size and (excl.min() < 0 or excl.max() >= n * n):
        raise ConfigError(f"exclude_keys must be keys u * {n} + v in [0, {n * n}).")
    u, v = np.divmod(excl, n)
    excl = excl[u < v]  # keys that are no candidate pair cannot be drawn anyway
    available = n * (n - 1) // 2 - excl.size
    if count > available:
        raise ConfigError(
            f"cannot draw {count} negative pairs: the client's {n} nodes have only "
            f"{available} pairs outside the excluded edges; lower the negative ratio."
        )
    if isinstance(generator, torch.Generator):
        draw: _NumpyDraw | _TorchDraw = _TorchDraw(generator)
    elif isinstance(generator, np.random.Generator):
        draw = _NumpyDraw(generator)
    else:
        raise TypeError(f"generator must be a torch or numpy Generator, got {type(generator)}")
    return _to_edges(_draw_keys(n, excl, count, draw), n)


# -- internals ------------------------------------------------------------------------------


class _NumpyDraw:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def integers(self, high: int, size: int) -> np.ndarray:
        return self.rng.integers(0, high, size=size, dtype=np.int64)

    def permutation(self, size: int) -> np.ndarray:
        return self.rng.permutation(size)


class _TorchDraw:
    def __init__(self, gen: torch.Generator) -> None:
        self.gen = gen

    def integers(self, high: int, size: int) -> np.ndarray:
        return torch.randint(high, (size,), generator=self.gen, dtype=torch.int64).numpy()

    def permutation(self, size: int) -> np.ndarray:
        return torch.randperm(size, generator=self.gen).numpy()


def _draw_keys(n: int, excl: np.ndarray, count: int, draw: _NumpyDraw | _TorchDraw) -> np.ndarray:
    """``count`` distinct keys ``u * n + v`` (u < v) not in sorted ``excl``, uniformly.

    Small or dense cases enumerate the candidates and take a random permutation's head;
    otherwise pairs are drawn i.i.d. in batches (``u, v`` uniform, ``u == v`` and excluded
    keys rejected, repeats dropped), whose first ``count`` distinct survivors are a uniform
    sample without replacement.
    """
    if count == 0:
        return np.empty(0, np.int64)
    total = n * (n - 1) // 2
    if total <= max(_ENUMERATE_PAIRS, 8 * (excl.size + count)):
        u, v = np.triu_indices(n, k=1)
        cand = u.astype(np.int64) * n + v
        cand = cand[~np.isin(cand, excl, assume_unique=True)]
        return cand[draw.permutation(cand.size)[:count]]
    got = np.empty(0, np.int64)
    rate = (total - excl.size) / total  # >= 7/8 on this path
    while got.size < count:
        need = count - got.size
        size = int(need / rate * 1.1) + 64
        u, v = draw.integers(n, size), draw.integers(n, size)
        keep = u != v
        keys = np.minimum(u, v)[keep] * n + np.maximum(u, v)[keep]
        keys = keys[~np.isin(keys, excl)]
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]  # distinct, in draw order
        keys = keys[~np.isin(keys, got)]
        got = np.concatenate([got, keys[:need]])
    return got


def _min_edges(ratios: tuple[float, float, float]) -> str:
    """The fewest edges for which every part with a positive ratio is non-empty."""
    for m in range(1, 100_001):
        a, b = int(ratios[0] * m), int((ratios[0] + ratios[1]) * m)
        sizes = (a, b - a, m - b)
        if all(size > 0 or r == 0 for size, r in zip(sizes, ratios)):
            return f"at least {m}"
    return "more than 100000"


def _to_edges(keys: np.ndarray, n: int) -> Tensor:
    u, v = np.divmod(keys.astype(np.int64, copy=False), n)
    return torch.from_numpy(np.stack([u, v])).long()


def _both_directions(edges: Tensor, n: int) -> Tensor:
    both = torch.cat([edges, edges.flip(0)], dim=1)
    order = torch.argsort(both[0] * n + both[1])
    return both[:, order]


def _as_numpy(x: Tensor | np.ndarray) -> np.ndarray:
    arr = x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ConfigError(f"node ids must be integers, got dtype {arr.dtype}.")
    return arr.astype(np.int64, copy=False)


def _check_count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}.")
    return int(value)

r"""Per-client train/val/test splits.

Node splits (:data:`NODE_SPLITS`) return three disjoint index arrays covering all nodes:

* ``random``: shuffle, then ``[:int(r_tr n)]``, ``[int(r_tr n):int((r_tr+r_va) n)]``, rest.
* ``stratified``: per class ``c`` (O-pFGL §1.2): ``int(n_c r_tr)`` train,
  ``int(n_c r_va)`` val, the rest test.
* ``stratified-sequential``: the same cut, drawn as the O-pFGL reference code draws it: one
  Python ``random.Random(split_seed)`` runs over clients ``0..m-1`` in order (so client
  ``k``'s split depends on the earlier clients, see :data:`SEQUENTIAL_SPLITS`).
* ``five-group`` (FedHERO §1.3, see :data:`GLOBAL_SPLITS`): before partitioning, every node
  of the *whole* graph falls in one of 5 groups (:func:`node_groups`: a permutation of all
  :math:`N` nodes by ``default_rng(split_seed)``, cut into 5 near-equal parts
  :math:`G_0..G_4`). Fold :math:`j` (run-config ``split-fold``; ``-1``: the run seed mod 5,
  so seeds 0-4 rotate the folds) splits a client with nodes :math:`V_k` into

  .. math::

     \mathrm{test} = V_k \cap G_j,\quad \mathrm{val} = V_k \cap G_{(j+1) \bmod 5},\quad
     \mathrm{train} = V_k \setminus (\mathrm{test} \cup \mathrm{val}).

  The groups depend on neither the partition nor the number of clients, and the ratios
  are fixed at ``0.6,0.2,0.2`` (any other ``split`` is refused). Members of a node
  dataset group that share their nodes (``syn-cora``: the same Cora nodes rewired) share the
  groups: a node's group follows its ``split_id``, the same in every member.

* ``official`` (see :data:`STORED_SPLITS`): the split the source ships (OGB's, or the masks of
  a user's graph), kept per node through partitioning; nodes in none of its parts are in no
  split. Graph tasks: per graph, likewise. ``split`` ratios are not used.

Graph splits (:func:`graph_split`) follow FedDense §2.4: sklearn ``train_test_split``
of train vs. the rest, then of the rest into val/test.
"""

from __future__ import annotations

import functools
import math
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fgl_flower.errors import ConfigError
from fgl_flower.registry import Registry

Ratios = tuple[float, float, float]
Split = tuple[np.ndarray, np.ndarray, np.ndarray]
NodeSplitFn = Callable[
    [np.ndarray, Ratios, "np.random.Generator | random.Random | NodeGroups"], Split
]

NODE_SPLITS: Registry[NodeSplitFn] = Registry("split mode")

#: Split modes drawing from one ``random.Random(split_seed)`` shared by the clients in
#: order; the loader replays clients ``0..k-1`` to split client ``k``.
SEQUENTIAL_SPLITS = frozenset({"stratified-sequential"})

#: Split modes fixed on the whole graph before partitioning; the loader hands them the
#: client's :class:`NodeGroups` instead of a random source.
GLOBAL_SPLITS = frozenset({"five-group"})

#: Split modes read from the source: the loader hands them the client's ``[n]`` official
#: split (0 train, 1 validation, 2 test, -1 none), stored with the partition.
STORED_SPLITS = frozenset({"official"})

#: Groups of the ``five-group`` split, and the only ratios it accepts (3 / 1 / 1 groups).
NUM_GROUPS = 5
FIVE_GROUP_RATIOS: Ratios = (0.6, 0.2, 0.2)


@dataclass(frozen=True)
class NodeGroups:
    """One client's input to a :data:`GLOBAL_SPLITS` split.

    Attributes:
        group: ``[n]`` group (``0..NUM_GROUPS-1``) of each of the client's nodes.
        fold: The experiment ``j``: test on group ``j``, validate on group ``j + 1``.
    """

    group: np.ndarray
    fold: int


@functools.lru_cache(maxsize=16)
def node_groups(num_nodes: int, seed: int, num_groups: int = NUM_GROUPS) -> np.ndarray:
    """``[N]`` group of every node of a graph: ``default_rng(seed).permutation(N)`` cut by
    ``np.array_split`` into ``num_groups`` near-equal parts (read-only, memoised)."""
    group = np.empty(num_nodes, dtype=np.int64)
    for g, chunk in enumerate(
        np.array_split(np.random.default_rng(seed).permutation(num_nodes), num_groups)
    ):
        group[chunk] = g
    group.setflags(write=False)
    return group


def check_ratios(ratios: Sequence[float]) -> Ratios:
    """Validate (train, val, test) ratios: 3 non-negative numbers summing to 1 (+-1e-6)."""
    try:
        values = tuple(float(r) for r in ratios)
    except (TypeError, ValueError):
        raise ConfigError(f"split ratios must be numbers, got {ratios!r}.") from None
    if len(values) != 3 or any(not math.isfinite(r) or r < 0 for r in values):
        raise ConfigError(
            f"split must be 3 non-negative ratios (train, val, test), got {ratios!r}."
        )
    if abs(sum(values) - 1.0) > 1e-6:
        raise ConfigError(f"split ratios must sum to 1, got {ratios!r} (sum {sum(values):g}).")
    return values  # type: ignore[return-value]


def _cut(perm: np.ndarray, ratios: Ratios) -> Split:
    n = perm.size
    a, b = int(ratios[0] * n), int((ratios[0] + ratios[1]) * n)
    return perm[:a], perm[a:b], perm[b:]


@NODE_SPLITS.register("random")
def random_split(y: np.ndarray, ratios: Ratios, rng: np.random.Generator) -> Split:
    """Plain random split of ``len(y)`` items."""
    return _cut(rng.permutation(y.shape[0]), ratios)


def _per_class(y: np.ndarray, ratios: Ratios, permute: Callable[[np.ndarray], np.ndarray]) -> Split:
    """Per class ``c`` present (ascending): ``permute`` its indices, then ``int(n_c r_tr)``
    train, ``int(n_c r_va)`` val, the rest test."""
    out: list[list[np.ndarray]] = [[], [], []]
    for c in np.unique(y):
        idx = permute(np.flatnonzero(y == c))
        n_tr, n_va = int(idx.size * ratios[0]), int(idx.size * ratios[1])
        for part, chunk in zip(out, (idx[:n_tr], idx[n_tr : n_tr + n_va], idx[n_tr + n_va :])):
            part.append(chunk)
    return tuple(np.sort(np.concatenate(p)) if p else np.empty(0, np.int64) for p in out)  # type: ignore[return-value]


@NODE_SPLITS.register("stratified")
def stratified_split(y: np.ndarray, ratios: Ratios, rng: np.random.Generator) -> Split:
    """Per-class split: ``int(n_c r_tr)`` train, ``int(n_c r_va)`` val, the rest test."""
    return _per_class(y, ratios, rng.permutation)


@NODE_SPLITS.register("stratified-sequential")
def stratified_sequential(y: np.ndarray, ratios: Ratios, rng: random.Random) -> Split:
    """The per-class split with each class's indices (ascending) ``rng.shuffle``-d as a
    Python list, as the O-pFGL reference code does."""

    def shuffled(idx: np.ndarray) -> np.ndarray:
        items = idx.tolist()
        rng.shuffle(items)
        return np.asarray(items, dtype=np.int64)

    return _per_class(y, ratios, shuffled)


@NODE_SPLITS.register("five-group")
def five_group_split(y: np.ndarray, ratios: Ratios, source: NodeGroups) -> Split:
    """Fold ``j``: train on the groups other than ``j`` and ``j + 1``, validate on group
    ``(j + 1) mod 5``, test on group ``j`` (``ratios`` are fixed, see :data:`FIVE_GROUP_RATIOS`)."""
    test_group, val_group = source.fold % NUM_GROUPS, (source.fold + 1) % NUM_GROUPS
    test = np.flatnonzero(source.group == test_group)
    val = np.flatnonzero(source.group == val_group)
    train = np.flatnonzero((source.group != test_group) & (source.group != val_group))
    return train, val, test


@NODE_SPLITS.register("official")
def official_split(y: np.ndarray, ratios: Ratios, split: np.ndarray) -> Split:
    """The items whose official split is 0, 1 and 2 (``ratios`` are not used)."""
    return tuple(np.flatnonzero(split == k) for k in range(3))  # type: ignore[return-value]


def check_five_group(ratios: Ratios, fold: int) -> None:
    """``split-mode=five-group`` takes ratios ``0.6,0.2,0.2`` and a fold in ``0..4``; else ``ConfigError``."""
    if not isinstance(fold, int) or not 0 <= fold < NUM_GROUPS:
        raise ConfigError(
            f"split-fold={fold!r}: split-mode=five-group needs a fold 0-{NUM_GROUPS - 1} "
            "(or -1 in the run config: the run seed mod 5)."
        )
    if any(abs(a - b) > 1e-9 for a, b in zip(ratios, FIVE_GROUP_RATIOS)):
        raise ConfigError(
            f"split={','.join(f'{r:g}' for r in ratios)} with split-mode=five-group: its "
            "folds train on 3 of 5 groups, validate on 1 and test on 1 (0.6,0.2,0.2). "
            "Leave split at 0.6,0.2,0.2, or use split-mode=random for other ratios."
        )


def _tts(
    idx: np.ndarray, test_size: float, y: np.ndarray | None, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    if test_size <= 0:
        return idx, idx[:0]
    if test_size >= 1:
        return idx[:0], idx
    from sklearn.model_selection import train_test_split  # graph tasks only

    try:
        a, b = train_test_split(
            idx, test_size=test_size, stratify=y, shuffle=True, random_state=seed
        )
    except ValueError:  # too few items of a class to stratify
        if y is None:
            raise
        warnings.warn(
            "graph split: a class is too small to stratify; splitting at random.", stacklevel=2
        )
        a, b = train_test_split(idx, test_size=test_size, shuffle=True, random_state=seed)
    return np.asarray(a), np.asarray(b)


def graph_split(y: np.ndarray, ratios: Ratios, seed: int, stratified: bool = True) -> Split:
    """FedDense/FedStar split generalised to any ratios.

    ``train, rest = train_test_split(test_size=r_va + r_te)``, then
    ``val, test = train_test_split(rest, test_size=r_te / (r_va + r_te))``, both with
    ``random_state=seed`` and, if ``stratified``, ``stratify`` by label. With
    (0.8, 0.1, 0.1) this gives test0 = ceil(0.2 n), val = floor(test0 / 2).
    """
    idx = np.arange(y.shape[0])
    r_tr, r_va, r_te = ratios
    train, rest = _tts(idx, r_va + r_te, y if stratified else None, seed)
    rest_y = y[rest] if stratified else None
    val, test = _tts(rest, r_te / (r_va + r_te) if r_va + r_te > 0 else 0.0, rest_y, seed)
    return train, val, test

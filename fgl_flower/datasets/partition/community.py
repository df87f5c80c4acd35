"""Structure-based node partitioners (Louvain and METIS families).

All run on the undirected simple graph of :class:`PartitionInput` (self-loops removed).
Their libraries (networkx, python-louvain, pymetis, scikit-learn) are imported when a
partition is built, not when the registry is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fgl_flower.datasets.options import Option, Scalar
from fgl_flower.datasets.partition.base import PARTITIONERS, Partitioner, PartitionInput
from fgl_flower.errors import ConfigError

_RESOLUTION = Option(float, 1.0, "Louvain resolution (higher = more, smaller communities)")
_RNG = Option(
    str,
    "numpy",
    "'numpy' (networkx Louvain, seeded K-Means) or 'reference' "
    "(the O-pFGL code's python-louvain + scikit-learn<1.3 draws from one RandomState)",
)
_RNG_MODES = ("numpy", "reference")


def _check_rng(name: str, opts: Mapping[str, Scalar | None]) -> None:
    if opts["rng"] not in _RNG_MODES:
        raise ConfigError(
            f"{name}: option rng must be one of {', '.join(_RNG_MODES)}; got {opts['rng']!r}."
        )


def _check_reference_louvain(name: str, opts: Mapping[str, Scalar | None]) -> None:
    """``rng`` is known, and ``rng = "reference"`` runs python-louvain at resolution 1."""
    _check_rng(name, opts)
    if opts["rng"] == "reference" and float(opts["resolution"]) != 1.0:  # type: ignore[arg-type]
        raise ConfigError(f"{name}: rng = 'reference' uses resolution 1 (as the reference code).")


def _reference_rng(opts: Mapping[str, Scalar | None], seed: int) -> np.random.RandomState | None:
    """The one ``RandomState`` of ``rng = "reference"``; ``None`` for our own draws."""
    return np.random.RandomState(seed) if opts["rng"] == "reference" else None


def louvain(inp: PartitionInput, resolution: float, seed: int) -> list[np.ndarray]:
    """Louvain communities (networkx), largest first (ties: smallest node id first)."""
    from networkx.algorithms.community import louvain_communities

    comms = [
        np.array(sorted(c))
        for c in louvain_communities(inp.graph, resolution=resolution, seed=seed)
    ]
    return sorted(comms, key=lambda c: (-c.size, c[0]))


def python_louvain(inp: PartitionInput, rng: np.random.RandomState) -> list[np.ndarray]:
    """python-louvain's ``best_partition`` (resolution 1) drawing from ``rng``: its
    communities in its own id order (``0..K-1``), members ascending."""
    from community import community_louvain

    membership = community_louvain.best_partition(inp.graph, random_state=rng)
    labels = np.fromiter((membership[i] for i in range(inp.num_items)), np.int64, inp.num_items)
    return [np.flatnonzero(labels == c) for c in np.unique(labels)]


def metis(inp: PartitionInput, num_parts: int, seed: int | None) -> list[np.ndarray]:
    """``num_parts`` balanced METIS parts (pymetis), possibly empty for tiny graphs.
    ``seed=None`` keeps METIS's default seed (as the O-pFGL reference code does)."""
    import pymetis
    import scipy.sparse as sp

    n = inp.num_items
    if num_parts == 1:
        return [np.arange(n)]
    u, v = inp.edges if inp.edges is not None else (np.empty(0, int), np.empty(0, int))
    adj = sp.coo_matrix((np.ones(2 * u.size), (np.r_[u, v], np.r_[v, u])), shape=(n, n)).tocsr()
    options = pymetis.Options(seed=seed) if seed is not None else None
    _, membership = pymetis.part_graph(
        num_parts, pymetis.CSRAdjacency(adj.indptr, adj.indices), options=options
    )
    membership = np.asarray(membership)
    return [np.flatnonzero(membership == k) for k in range(num_parts)]


def _need_communities(name: str, found: int, num_clients: int, hint: str) -> None:
    if found < num_clients:
        raise ConfigError(
            f"{name}: found only {found} communities but num_clients={num_clients}; {hint}"
        )


@PARTITIONERS.register("louvain-topk")
class LouvainTopK(Partitioner):
    """FedSpray: the ``K`` largest Louvain communities, one per client; other nodes dropped."""

    tasks = frozenset({"node"})
    options = {"resolution": _RESOLUTION}

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        comms = louvain(inp, float(opts["resolution"]), seed)  # type: ignore[arg-type]
        _need_communities(
            "louvain-topk", len(comms), num_clients, "use fewer clients or a higher resolution."
        )
        return comms[:num_clients]


@PARTITIONERS.register("louvain")
class LouvainGreedy(Partitioner):
    """S2FGL/FLGo: communities by ascending size, each to the currently smallest client.

    ``rng = "reference"`` takes the communities from python-louvain drawing from
    ``RandomState(partition-seed)``, as FLGo's ``NodeLouvainPartitioner`` does from NumPy's
    global state (which ``flgo.gen_task(seed=s)`` seeds with ``97 + s``), and orders equal-sized
    communities by python-louvain's community id. The default draws networkx's Louvain.
    """

    tasks = frozenset({"node"})
    options = {
        "resolution": _RESOLUTION,
        "rng": Option(
            str,
            "numpy",
            "'numpy' (networkx Louvain) or 'reference' (the S2FGL/FLGo "
            "code's python-louvain, seeded by partition-seed)",
        ),
    }

    def check(self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]) -> None:
        _check_reference_louvain("louvain", opts)

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        rng = _reference_rng(opts, seed)
        if rng is None:
            comms = louvain(inp, float(opts["resolution"]), seed)[::-1]  # ascending size  # type: ignore[arg-type]
        else:
            # FLGo sorts with np.argsort's default (unstable) kind, whose tie order depends on
            # the NumPy build and CPU; a stable sort keeps ties in community-id order.
            comms = sorted(python_louvain(inp, rng), key=len)
        _need_communities(
            "louvain", len(comms), num_clients, "use fewer clients or a higher resolution."
        )
        parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        sizes = np.zeros(num_clients, dtype=np.int64)
        for comm in comms:
            k = int(np.argmin(sizes))  # ties: lowest client index
            parts[k].append(comm)
            sizes[k] += comm.size
        return [np.sort(np.concatenate(p)) for p in parts]


def _kmeans_clients(
    name: str,
    inp: PartitionInput,
    comms: list[np.ndarray],
    num_clients: int,
    seed: int | np.random.RandomState,
) -> list[np.ndarray]:
    """O-pFGL step 4-5: K-Means (``n_init=10``) on the communities' normalised label histograms.

    An ``int`` seed sorts each client's nodes; a ``RandomState`` (``rng = "reference"``) draws
    the reference's K-Means from it and keeps its node order (communities in order, each
    community's nodes in order), which :func:`~fgl_flower.datasets.splits.stratified_sequential`
    depends on.
    """
    comms = [c for c in comms if c.size]
    _need_communities(name, len(comms), num_clients, "use fewer clients or raise num-communities.")
    hist = np.stack([np.bincount(inp.y[c], minlength=inp.num_classes) for c in comms]).astype(float)
    hist /= hist.sum(axis=1, keepdims=True)
    from fgl_flower.datasets.partition.kmeans import kmeans_labels, legacy_kmeans_labels

    legacy = isinstance(seed, np.random.RandomState)
    labels = (
        legacy_kmeans_labels(hist, num_clients, seed)
        if legacy
        else kmeans_labels(hist, num_clients, seed)
    )
    parts = [[c for c, lab in zip(comms, labels) if lab == k] for k in range(num_clients)]
    if any(not p for p in parts):
        raise ConfigError(
            f"{name}: K-Means found fewer than {num_clients} distinct label mixes among "
            f"{len(comms)} communities; use fewer clients or raise num-communities."
        )
    return [np.concatenate(p) if legacy else np.sort(np.concatenate(p)) for p in parts]


def louvain_owners(
    inp: PartitionInput,
    num_owners: int,
    delta: int,
    seed: int,
    resolution: float = 1.0,
    rng: np.random.RandomState | None = None,
) -> list[np.ndarray]:
    """O-pFGL/OpenFGL Louvain+ steps 1-3: Louvain, chunk, then greedy fill of ``num_owners``.

    Communities longer than ``N // M - delta`` are cut into chunks of that length
    (breadth-first over communities, as the reference does); chunks are taken largest
    first and appended to the current owner, skipping (cyclically) owners that would
    reach ``N // M + delta``; full owners (``>= N // M``) are retired
    while at least 2 remain. After 1000 skips the chunk goes to the smallest owner
    (the reference code's intent; its fallback is buggy).

    With ``rng`` the communities come from python-louvain drawing from it (resolution 1, as
    the reference), and each owner keeps its nodes in the order they were added.
    """
    n = inp.num_items
    target, chunk = n // num_owners, n // num_owners - delta
    if chunk < 1:
        raise ConfigError(
            f"louvain-plus: num_nodes // num-communities - part-delta = {chunk} < 1 for "
            f"{inp.dataset!r} ({n} nodes); lower num-communities or part-delta."
        )
    if rng is not None:  # the reference orders them by smallest node id
        groups = sorted(python_louvain(inp, rng), key=lambda c: c[0])
    else:
        groups = sorted(
            louvain(inp, resolution, seed), key=lambda c: c[0]
        )  # python-louvain id order
    # The reference cuts one chunk off a community and queues the rest at the end of the
    # group list, so chunks are created breadth-first: every community's first chunk, then
    # every second chunk, ... The stable sort below keeps that order among equal sizes, so
    # an owner is filled with chunks of *different* communities.
    i = 0
    while i < len(groups):
        if groups[i].size > chunk:
            groups.append(groups[i][chunk:])
            groups[i] = groups[i][:chunk]
        i += 1
    groups.sort(key=lambda g: -g.size)  # stable: ties keep creation order
    owners: list[list[np.ndarray]] = [[] for _ in range(num_owners)]
    sizes = np.zeros(num_owners, dtype=np.int64)
    active = list(range(num_owners))
    ind = 0
    for g in groups:
        while len(active) >= 2 and sizes[active[ind]] >= target:
            active.pop(ind)
            ind %= len(active)
        for _ in range(1000):
            if sizes[active[ind]] + g.size < target + delta:
                break
            ind = (ind + 1) % len(active)
        else:
            ind = int(np.argmin(sizes[active]))
        owners[active[ind]].append(g)
        sizes[active[ind]] += g.size
    order = (lambda a: a) if rng is not None else np.sort
    return [order(np.concatenate(o)) if o else np.empty(0, np.int64) for o in owners]


_PLUS_OPTIONS = {
    "num-communities": Option(int, 100, "number of small communities grouped by K-Means"),
    "rng": _RNG,
}


@PARTITIONERS.register("louvain-plus")
class LouvainPlus(Partitioner):
    """O-pFGL "Louvain+": ``num-communities`` size-capped Louvain groups, K-Means on label mixes."""

    tasks = frozenset({"node"})
    version = 2  # 2: chunks queued breadth-first, as the reference code does
    options = {
        **_PLUS_OPTIONS,
        "part-delta": Option(int, 20, "size slack delta_p of the community grouping"),
        "resolution": _RESOLUTION,
    }

    def check(self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]) -> None:
        _check_reference_louvain("louvain-plus", opts)

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        rng = _reference_rng(opts, seed)
        owners = louvain_owners(
            inp,
            int(opts["num-communities"]),
            int(opts["part-delta"]),  # type: ignore[arg-type]
            seed,
            float(opts["resolution"]),
            rng,
        )  # type: ignore[arg-type]
        return _kmeans_clients(
            "louvain-plus", inp, owners, num_clients, seed if rng is None else rng
        )


@PARTITIONERS.register("metis-plus")
class MetisPlus(Partitioner):
    """O-pFGL "Metis+": ``num-communities`` METIS parts, K-Means on their label mixes."""

    tasks = frozenset({"node"})
    options = dict(_PLUS_OPTIONS)

    def check(self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]) -> None:
        _check_rng("metis-plus", opts)

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        rng = _reference_rng(opts, seed)  # the reference keeps METIS's default seed
        parts = metis(inp, int(opts["num-communities"]), seed if rng is None else None)  # type: ignore[arg-type]
        return _kmeans_clients("metis-plus", inp, parts, num_clients, seed if rng is None else rng)


@PARTITIONERS.register("metis")
class Metis(Partitioner):
    """``K`` balanced METIS parts, one per client."""

    tasks = frozenset({"node"})

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        return metis(inp, num_clients, seed)


@PARTITIONERS.register("louvain-merge")
class LouvainMerge(Partitioner):
    """FedHERO / FedPub: every Louvain community of ``>= min-size`` nodes is a client; every
    smaller community joins a uniformly random large one.

    Louvain is networkx's (``resolution``, ``seed = partition-seed``); the large communities
    are ordered largest first (ties: smallest node id), so client 0 is built on the largest,
    and the small ones (in the same order) each draw their client from
    ``default_rng(partition-seed)``. The number of clients is the number of large
    communities (``num-clients = 0`` asks for it).
    """

    tasks = frozenset({"node"})
    natural_clients = True
    options = {
        "resolution": _RESOLUTION,
        "min-size": Option(
            int,
            50,
            "smallest community that becomes a client; smaller ones are "
            "merged into a random large one",
        ),
    }

    def check(self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]) -> None:
        if int(opts["min-size"]) < 1 or float(opts["resolution"]) <= 0:  # type: ignore[arg-type]
            raise ConfigError(
                "louvain-merge: need min-size >= 1 and resolution > 0 "
                f"(got min-size={opts['min-size']}, resolution={opts['resolution']})."
            )

    def natural_rule(self, opts: Mapping[str, Scalar | None]) -> str:
        return f"Louvain communities of >= {opts['min-size']} nodes at resolution {opts['resolution']:g}"

    def natural_split(
        self, inp: PartitionInput, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        min_size = int(opts["min-size"])  # type: ignore[arg-type]
        comms = louvain(inp, float(opts["resolution"]), seed)  # type: ignore[arg-type]
        large = [c for c in comms if c.size >= min_size]
        if not large:
            raise ConfigError(
                f"louvain-merge: no Louvain community of {inp.dataset!r} has >= {min_size} nodes "
                f"(the largest has {comms[0].size if comms else 0}); lower "
                "data.louvain-merge.min-size or the resolution."
            )
        owner = np.random.default_rng(seed).integers(len(large), size=len(comms) - len(large))
        parts = [[c] for c in large]
        for comm, k in zip(comms[len(large) :], owner):
            parts[int(k)].append(comm)
        return [np.sort(np.concatenate(p)) for p in parts]

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        parts = self.natural_split(inp, seed, opts)
        if num_clients not in (0, len(parts)):
            raise self.count_error("louvain-merge", inp.dataset, len(parts), num_clients, opts)
        return parts

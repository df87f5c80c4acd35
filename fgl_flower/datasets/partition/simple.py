"""Label-agnostic and label-skew partitioners: ``random``, ``dirichlet``, ``per-dataset``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fgl_flower.datasets.options import Option, Scalar
from fgl_flower.datasets.partition.base import PARTITIONERS, Partitioner, PartitionInput
from fgl_flower.errors import ConfigError


@PARTITIONERS.register("random")
class RandomPartitioner(Partitioner):
    """IID: a seeded permutation cut into ``K`` near-equal chunks."""

    tasks = frozenset({"node", "graph"})

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        perm = np.random.default_rng(seed).permutation(inp.num_items)
        return [np.sort(p) for p in np.array_split(perm, num_clients)]


@PARTITIONERS.register("dirichlet")
class DirichletPartitioner(Partitioner):
    r"""Label skew: for each class :math:`c`, proportions :math:`p_c\sim\mathrm{Dir}(\alpha 1_K)`.

    Class :math:`c`'s shuffled items are cut by :math:`p_c`; clients already holding
    :math:`\ge N/K` items get no more (the usual balancing step). Redrawn until every
    client has at least ``min-size`` items (at most 1000 tries).
    """

    tasks = frozenset({"node", "graph"})
    label_skew = True
    options = {
        "alpha": Option(float, 0.5, "Dirichlet concentration (smaller = more skew)"),
        "min-size": Option(int, 10, "minimum number of items per client"),
    }

    def check(self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]) -> None:
        if float(opts["alpha"]) <= 0 or int(opts["min-size"]) < 1:  # type: ignore[arg-type]
            raise ConfigError("dirichlet: need alpha > 0 and min-size >= 1.")

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        n, alpha, min_size = inp.num_items, float(opts["alpha"]), int(opts["min-size"])  # type: ignore[arg-type]
        if num_clients * min_size > n:
            raise ConfigError(
                f"dirichlet: {num_clients} clients x min-size {min_size} exceeds the {n} items "
                f"of {inp.dataset!r}; use fewer clients or a smaller min-size."
            )
        rng = np.random.default_rng(seed)
        for _ in range(1000):
            parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
            sizes = np.zeros(num_clients, dtype=np.int64)
            for c in np.unique(inp.y):
                idx = rng.permutation(np.flatnonzero(inp.y == c))
                p = rng.dirichlet(np.full(num_clients, alpha)) * (sizes < n / num_clients)
                cuts = (np.cumsum(p / p.sum()) * idx.size).astype(np.int64)[:-1]
                for k, chunk in enumerate(np.split(idx, cuts)):
                    parts[k].append(chunk)
                    sizes[k] += chunk.size
            if sizes.min() >= min_size:
                return [np.sort(np.concatenate(p)) for p in parts]
        raise ConfigError(
            f"dirichlet: no draw in 1000 gave every client >= {min_size} items "
            f"(alpha={alpha}); raise alpha, lower min-size or use fewer clients."
        )


@PARTITIONERS.register("per-dataset")
class PerDatasetPartitioner(Partitioner):
    """Dataset groups: client ``k`` owns the group's ``k``-th dataset."""

    tasks = frozenset({"group"})

    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        if num_clients != inp.num_items:
            raise ConfigError(
                f"Dataset group {inp.dataset!r} has {inp.num_items} datasets, one per client, "
                f"but num_clients={num_clients}."
            )
        return [np.array([k]) for k in range(num_clients)]

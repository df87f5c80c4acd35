"""Partitioner interface and registry.

A partitioner maps a dataset's *items* (nodes of one graph, graphs of one dataset, or
the member datasets of a group) to ``num_clients`` disjoint sets. It sees only a
:class:`PartitionInput`, so it is a pure, deterministic function of the input, the
number of clients, the seed and its options. A partitioner whose data decide the number
of clients (:attr:`Partitioner.natural_clients`, e.g. ``louvain-merge``) implements
:meth:`Partitioner.natural_split` instead; ``num-clients = 0`` asks for that number.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np

from fgl_flower.datasets.options import Option, Scalar
from fgl_flower.errors import ConfigError
from fgl_flower.registry import Registry

if TYPE_CHECKING:
    import networkx as nx

PartitionTask = Literal["node", "graph", "group"]


@dataclass(frozen=True)
class PartitionInput:
    """The items to partition.

    Attributes:
        dataset: Canonical dataset (or group) name.
        y: ``[N]`` item labels (node or graph classes; for groups, member indices).
        edges: ``[2, E]`` undirected simple edges with ``u < v`` (node tasks only).
    """

    dataset: str
    y: np.ndarray
    edges: np.ndarray | None = None

    @property
    def num_items(self) -> int:
        return int(self.y.shape[0])

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1 if self.y.size else 0

    @cached_property
    def graph(self) -> nx.Graph:
        """The undirected simple graph as networkx (built on first use)."""
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(range(self.num_items))
        if self.edges is not None:
            g.add_edges_from(self.edges.T.tolist())
        return g


class Partitioner(abc.ABC):
    """Base class: subclasses set :attr:`tasks` and :attr:`options` and implement ``split``."""

    #: Which kinds of items this partitioner can split.
    tasks: ClassVar[frozenset[PartitionTask]]
    #: Accepted options (names in ``kebab-case``).
    options: ClassVar[Mapping[str, Option]] = {}
    #: Bump when ``split`` returns different clients for the same input, so that
    #: partitions cached by an older version are not reused.
    version: ClassVar[int] = 1
    #: Whether the data decide the number of clients (then ``split`` is not used: the
    #: loader calls :meth:`natural_split` and checks the count it gives).
    natural_clients: ClassVar[bool] = False
    #: Whether it deals items out by their class (a task without classes refuses it).
    label_skew: ClassVar[bool] = False

    def check(self, dataset: str, num_clients: int, opts: Mapping[str, Scalar | None]) -> None:
        """Cheap validation before any data is loaded; raise ``ConfigError``."""

    @abc.abstractmethod
    def split(
        self, inp: PartitionInput, num_clients: int, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        """Return ``num_clients`` disjoint arrays of item ids."""

    def fingerprint(self, opts: Mapping[str, Scalar | None]) -> str:
        """What its input files hold, in a few characters (part of the partition's cache key,
        so a changed file is partitioned again); ``""`` where the options say everything."""
        return ""

    def natural_split(
        self, inp: PartitionInput, seed: int, opts: Mapping[str, Scalar | None]
    ) -> list[np.ndarray]:
        """The clients the data give (:attr:`natural_clients` partitioners only)."""
        raise NotImplementedError(f"{type(self).__name__} has no natural number of clients")

    def natural_rule(self, opts: Mapping[str, Scalar | None]) -> str:
        """What makes a client, for messages (e.g. "Louvain communities of >= 50 nodes")."""
        return "its natural clients"

    def count_error(
        self,
        name: str,
        dataset: str,
        found: int,
        num_clients: int,
        opts: Mapping[str, Scalar | None],
    ) -> ConfigError:
        """The error for an explicit ``num_clients`` that differs from the ``found`` natural count."""
        return ConfigError(
            f"{name} of {dataset!r} gives {found} clients ({self.natural_rule(opts)}), "
            f"not num-clients={num_clients}; set num-clients={found} or 0 (the natural "
            "count)."
        )


PARTITIONERS: Registry[type[Partitioner]] = Registry("partitioner")

"""A graph-level dataset held as a list of PyG graphs: what a user's graphs, a file of graphs
and OGB's graph datasets become, so the pipeline reads them like a PyG dataset.

The pipeline needs ``len``, ``graphs[i]``, ``y`` (one target per graph), ``num_classes``,
``num_features`` and, where the source has one, ``official_split`` (0 train, 1 validation,
2 test per graph, e.g. OGB's scaffold split).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor
    from torch_geometric.data import Data


@dataclass
class GraphSet:
    """Graphs with one target each.

    Attributes:
        graphs: The graphs; graph ``i`` has ``x`` [n_i, F], ``edge_index`` [2, E_i] and
            ``y`` of one element (a class id, long, or a regression target, float).
        num_classes: Classes of a classification target (1 for regression).
        official_split: ``[len(graphs)]`` ints, 0/1/2 for train/validation/test, or ``None``.
    """

    graphs: Sequence[Data]
    num_classes: int
    official_split: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, i: int) -> Data:
        return self.graphs[i]

    @property
    def num_features(self) -> int:
        return int(self.graphs[0].x.size(1)) if len(self.graphs) else 0

    @property
    def y(self) -> Tensor:
        """``[len]`` targets, one per graph."""
        import torch

        return torch.cat([g.y.reshape(-1)[:1] for g in self.graphs])

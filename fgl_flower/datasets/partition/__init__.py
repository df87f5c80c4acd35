"""Partitioners, registered by config name in :data:`PARTITIONERS`.

========================  ======  ===================================================
name                      tasks   options
========================  ======  ===================================================
``louvain-topk``          node    ``resolution``
``louvain``               node    ``resolution``
``louvain-merge``         node    ``resolution``, ``min-size`` (natural client count)
``louvain-plus``          node    ``num-communities``, ``part-delta``, ``resolution``
``metis-plus``            node    ``num-communities``
``metis``                 node    --
``files``                 node    ``dir``, ``prefix``
``assign``                both    ``file`` (natural client count: the ids in it)
``random``                both    --
``dirichlet``             both    ``alpha``, ``min-size``
``per-dataset``           group   --
========================  ======  ===================================================
"""

from fgl_flower.datasets.partition import assign, community, files, simple  # noqa: F401  (registers)
from fgl_flower.datasets.partition.base import PARTITIONERS, Partitioner, PartitionInput

__all__ = ["PARTITIONERS", "Partitioner", "PartitionInput"]

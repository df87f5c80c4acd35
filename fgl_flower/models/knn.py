r"""k nearest neighbours by cosine similarity: the one builder of the methods' k-NN graphs.

FedTAD's pseudo-graph (:func:`fgl_flower.models.fedtad.knn_graph`), FGGP's augmentor graph
(:func:`fgl_flower.models.fggp.knn_edges`) and S2FGL's spectral graph
(:func:`fgl_flower.models.s2fgl.knn_cosine_graph`), and DENSE's generated graph through
FedTAD's, each keep their own reading of the neighbours (self included or not, symmetrised,
weighted) on top of :func:`cosine_topk`. FedHERO's latent graph
(:meth:`fgl_flower.models.fedhero.StructureLearner.knn`) is not one of them: its similarities
are learned (weighted cosine, attention or GAT scores over several heads), computed in row
blocks so that no ``[n, n]`` matrix is held, and its 0/1 edges carry a straight-through
gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def cosine_topk(x: Tensor, k: int, self_loops: bool = True) -> torch.return_types.topk:
    r"""The ``k`` largest cosine similarities of every row of ``x [n, d]`` to all rows:
    ``values [n, k]`` and ``indices [n, k]``, with
    :math:`s_{uv} = \hat{\mathbf x}_u^\top \hat{\mathbf x}_v`,
    :math:`\hat{\mathbf x} = \mathbf x / \max(\lVert\mathbf x\rVert_2, 10^{-12})`. Without
    ``self_loops`` a row's own similarity is excluded (``-inf``). Differentiable in ``x``
    through ``values``."""
    xn = F.normalize(x, dim=1)
    sim = xn @ xn.t()
    if not self_loops:
        sim.fill_diagonal_(float("-inf"))
    return sim.topk(k, dim=1)

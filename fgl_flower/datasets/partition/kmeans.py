"""K-Means for grouping communities into clients (O-pFGL Louvain+/Metis+ step 4).

Two seedings of the same Lloyd K-Means (scikit-learn, ``n_init`` restarts, best inertia):

* :func:`kmeans_labels`: scikit-learn's own ``KMeans(random_state=seed)``.
* :func:`legacy_kmeans_labels`: the draws of scikit-learn **< 1.3** from a caller-owned
  ``RandomState`` (as the O-pFGL reference code, scikit-learn 1.2.2, made from NumPy's global
  state). Since 1.3 k-means++ picks its first centre with ``choice(p=w/sum(w))`` instead of
  ``randint(n)``, which consumes the stream differently; the same seed then gives other
  clients. This module redoes the old seeding and hands the centres to scikit-learn's Lloyd.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.cluster import KMeans


def kmeans_labels(x: np.ndarray, k: int, seed: int, n_init: int = 10) -> np.ndarray:
    """``[n]`` cluster labels of scikit-learn's ``KMeans(k, n_init, random_state=seed)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate points: callers check for empty clusters
        return KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit_predict(x)


def legacy_kmeans_plusplus(x: np.ndarray, k: int, rng: np.random.RandomState) -> np.ndarray:
    r"""``[k, d]`` k-means++ centres drawn as scikit-learn < 1.3 draws them.

    First centre ``rng.randint(n)``; then per centre ``2 + int(ln k)`` candidates at
    ``searchsorted(cumsum(D^2), rng.uniform(size=trials) * sum(D^2))``, keeping the one
    that minimises the new potential :math:`\sum_i \min(D_i^2, \|x_i-c\|^2)`.
    """
    n = x.shape[0]
    trials = 2 + int(np.log(k))
    first = rng.randint(n)
    chosen = [first]
    closest = ((x - x[first]) ** 2).sum(1)
    potential = closest.sum()
    for _ in range(1, k):
        cand = np.searchsorted(np.cumsum(closest), rng.uniform(size=trials) * potential)
        cand = np.minimum(cand, n - 1)
        dist = np.minimum(closest, ((x[cand][:, None, :] - x[None]) ** 2).sum(2))
        pots = dist.sum(1)
        best = int(np.argmin(pots))
        potential, closest = pots[best], dist[best]
        chosen.append(int(cand[best]))
    return x[chosen]


def _same_clustering(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two labelings are equal up to renaming the clusters."""
    mapping: dict[int, int] = {}
    return all(mapping.setdefault(int(i), int(j)) == j for i, j in zip(a, b))


def legacy_kmeans_labels(
    x: np.ndarray, k: int, rng: np.random.RandomState, n_init: int = 10
) -> np.ndarray:
    """``[n]`` labels of scikit-learn 1.2's ``KMeans(k, n_init, random_state=rng).fit(x)``.

    Seeds on the mean-centred data, as scikit-learn does, and keeps a restart only if its
    inertia is lower *and* its clustering differs from the best so far (its tie rule).
    """
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(0)
    best: tuple[np.ndarray, float] | None = None
    for _ in range(n_init):
        init = legacy_kmeans_plusplus(x - mean, k, rng) + mean
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            km = KMeans(n_clusters=k, init=init, n_init=1).fit(x)
        if best is None or (km.inertia_ < best[1] and not _same_clustering(km.labels_, best[0])):
            best = (km.labels_, float(km.inertia_))
    assert best is not None
    return best[0]

"""Statistics of results over seeds (the results tables, the index, a study's reruns): the
Student-t interval of a mean over seeds, and :class:`Estimate` (a mean with its interval, also
from a page's mean ± std, and the difference of two unpaired means by Welch's interval)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def half_width(standard_error: float, df: float, level: float = 0.95) -> float:
    """Half the ``level`` Student-t interval for a ``standard_error`` with ``df`` degrees of
    freedom."""
    from scipy.stats import t

    return t.ppf(0.5 + level / 2, df) * standard_error


def t_interval(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """The ``level`` Student-t confidence interval of the mean (``None`` below 2 values)."""
    if len(values) < 2:
        return None
    n = len(values)
    half = half_width(statistics.stdev(values) / n**0.5, n - 1, level)
    mean = statistics.fmean(values)
    return mean - half, mean + half


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds with its 95 % interval (``None`` below two seeds), ``n`` seeds,
    ``sd`` their sample std where known; ``from_page`` if it was read from a results page's
    kept line rather than computed from the runs."""

    mean: float
    low: float | None
    high: float | None
    n: int
    from_page: bool = False
    sd: float | None = None  # sample std over seeds (for a difference of two levels)

    @classmethod
    def of(cls, values: Sequence[float]) -> Estimate:
        ci = t_interval(list(values))
        sd = statistics.stdev(values) if len(values) > 1 else None
        return cls(statistics.fmean(values), *(ci or (None, None)), len(values), sd=sd)

    @classmethod
    def from_mean_std(cls, mean: float, pstd: float, n: int) -> Estimate:
        """The t-interval that a mean and population std over ``n`` seeds imply."""
        if n < 2:
            return cls(mean, None, None, n, True)
        sd = pstd * math.sqrt(n / (n - 1))
        half = half_width(sd / math.sqrt(n), n - 1)
        return cls(mean, mean - half, mean + half, n, True, sd)

    def minus(self, other: Estimate) -> Estimate:
        """The difference of two levels not paired by seed: Welch's 95 % interval."""
        mean = self.mean - other.mean
        if self.sd is None or other.sd is None:
            return Estimate(mean, None, None, min(self.n, other.n), True)
        va, vb = self.sd**2 / self.n, other.sd**2 / other.n
        if va + vb == 0:
            return Estimate(mean, mean, mean, min(self.n, other.n), True)
        df = (va + vb) ** 2 / (va**2 / (self.n - 1) + vb**2 / (other.n - 1))
        half = half_width(math.sqrt(va + vb), df)
        return Estimate(mean, mean - half, mean + half, min(self.n, other.n), True)

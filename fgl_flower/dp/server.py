r"""The server's half of client-level DP: Gaussian noise on the mean, and the accountant.

The mean of the :math:`k` clipped uploads of a round changes by at most :math:`C/k` when one
client's update is added or left out, so the server adds :math:`\mathcal N(0, (zC/k)^2)` to
each of its floating-point entries, from a generator seeded by the run seed and the round
(the same noise in every rerun). Noise multiplier 0 adds nothing: the mean stays bit for bit.
"""

from __future__ import annotations

import math
from logging import INFO

import numpy as np
from flwr.app import Array, ArrayRecord
from flwr.common.logger import log

from fgl_flower.dp.accountant import make_accountant, noise_for_epsilon, release
from fgl_flower.dp.options import DPSettings, dp_settings
from fgl_flower.seeds import derive_seed


class CentralDP:
    """Noise and accounting for one run (``settings``; ``num_rounds`` releases of at most
    ``population`` clients, noise drawn from ``seed``)."""

    def __init__(self, settings: DPSettings, population: int, num_rounds: int, seed: int) -> None:
        self.settings = settings
        self.population = population
        self.seed = seed
        if settings.epsilon > 0:
            self.noise = noise_for_epsilon(settings.epsilon, settings.delta, num_rounds)
            log(INFO, "DP: noise multiplier %.4f spends epsilon %g at delta %g over %d rounds",
                self.noise, settings.epsilon, settings.delta, num_rounds)
        else:
            self.noise = settings.noise
        #: ``[[noise multiplier, clients], ...]``, one row per release (the accountant's state)
        self.releases = np.zeros((0, 2))
        self._accountant = make_accountant(settings.delta, population) if self.noise > 0 else None
        self._last: dict = {}

    @classmethod
    def from_config(cls, cfg) -> CentralDP | None:
        """The run's DP, ``None`` when it has none."""
        settings = dp_settings(cfg)
        return None if settings is None else cls(settings, cfg.num_clients, cfg.num_rounds, cfg.seed)

    def privatize(self, server_round: int, mean: ArrayRecord, clients: int) -> ArrayRecord:
        """``mean`` of ``clients`` clipped uploads plus the round's noise; one release."""
        std = self.noise * self.settings.clip / clients
        out = mean
        if std > 0:
            rng = np.random.default_rng(derive_seed(self.seed, server_round, "dp-noise"))
            out = ArrayRecord()
            for key, arr in mean.items():
                a = arr.numpy()
                if np.issubdtype(a.dtype, np.floating):
                    a = (a.astype(np.float64) + rng.normal(0.0, std, a.shape)).astype(a.dtype)
                out[key] = Array(a)
        self._compose(clients)
        self._last = {"noise_std": std, "clients": clients}
        return out

    def _compose(self, clients: int) -> None:
        self.releases = np.concatenate([self.releases, [[self.noise, clients]]])
        if self._accountant is not None:
            self._accountant.compose(release(self.noise, clients, self.population))

    def load(self, releases: np.ndarray) -> None:
        """Continue after the ``releases`` of a checkpoint (resume)."""
        self.releases = np.zeros((0, 2))
        self._accountant = make_accountant(self.settings.delta, self.population) if self.noise > 0 else None
        for z, k in np.asarray(releases).reshape(-1, 2):
            if not math.isclose(float(z), self.noise):
                raise ValueError(f"DP: the checkpoint's noise multiplier {z:g} is not this run's {self.noise:g}.")
            self._compose(int(k))

    def spent(self) -> float:
        """Epsilon at ``delta`` after the releases so far (0 before the first; ``inf`` without
        noise)."""
        if not len(self.releases):
            return 0.0
        if self._accountant is None:
            return math.inf
        return self._accountant.get_epsilon(self.settings.delta)

    def record(self) -> dict:
        """The round record's ``dp`` field: the budget spent so far and this round's noise
        (``epsilon`` is absent while no noise is added: it is infinite)."""
        s = self.settings
        out = {"clip": s.clip, "noise_multiplier": self.noise, "delta": s.delta, **self._last}
        eps = self.spent()
        if math.isfinite(eps):
            out["epsilon"] = eps
        return out

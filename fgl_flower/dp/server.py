r"""The server's half of client-level DP: Gaussian noise on the mean, and the accountant.

Each round samples a fixed, public number :math:`\bar k` of clients (``fraction-train``,
``min-train-clients``). The server averages their clipped uploads over :math:`\bar k`
whatever number :math:`m` of them it accepted: a client that failed, or whose reply the
server refused, counts as no update (its :math:`w_0`; the *zero-out* relation of DP-FedAvg,
whose fixed-denominator estimator this is). The mean then changes by at most
:math:`C/\bar k` when one client's update is replaced by no update, so the server adds
:math:`\mathcal N(0, (zC/\bar k)^2)` to each floating-point entry. A round whose secure sum
the server must refuse (:meth:`CentralDP.withhold`) releases nothing: the global model stays
as it was and no budget is spent.

The noise comes from the operating system's CSPRNG (:mod:`fgl_flower.dp.noise`), so nobody
can regenerate it; with ``<method>.dp-seeded-noise`` it comes from the run seed and the
round instead (reruns repeat it), for experiments only: anyone who knows the seed can
subtract it. Noise multiplier 0 adds nothing: the mean stays bit for bit.
"""

from __future__ import annotations

import math
from logging import INFO, WARNING

import numpy as np
from flwr.app import Array, ArrayRecord
from flwr.common.logger import log

from fgl_flower.dp.accountant import make_accountant, noise_for_epsilon, release
from fgl_flower.dp.noise import secure_normal
from fgl_flower.dp.options import DPSettings, dp_settings
from fgl_flower.seeds import derive_seed


class CentralDP:
    """Noise and accounting for one run (``settings``; ``num_rounds`` releases of
    ``cohort`` of the ``population`` clients; ``seed`` only with seeded noise)."""

    def __init__(
        self, settings: DPSettings, population: int, num_rounds: int, seed: int, cohort: int
    ) -> None:
        self.settings = settings
        self.population = population
        self.cohort = cohort  # k̄: the public number of clients each round samples
        self.seed = seed
        if settings.epsilon > 0:
            self.noise = noise_for_epsilon(settings.epsilon, settings.delta, num_rounds)
            log(
                INFO,
                "DP: noise multiplier %.4f spends epsilon %g at delta %g over %d rounds",
                self.noise,
                settings.epsilon,
                settings.delta,
                num_rounds,
            )
        else:
            self.noise = settings.noise
            if self.noise == 0:
                log(
                    WARNING,
                    "DP: dp-clip without noise (dp-noise = dp-epsilon = 0): updates are clipped and "
                    "weighed equally, but nothing is private (epsilon is infinite).",
                )
        if self.noise > 0 and settings.seeded:
            log(
                WARNING,
                "DP: dp-seeded-noise draws the noise from the run seed, so that reruns repeat it; "
                "anyone who knows the seed can remove it. For experiments only.",
            )
        #: ``[[noise multiplier, clients], ...]``, one row per release (the accountant's state)
        self.releases = np.zeros((0, 2))
        self._accountant = make_accountant(settings.delta, population) if self.noise > 0 else None
        self._last: dict = {}

    @classmethod
    def from_config(cls, cfg) -> CentralDP | None:
        """The run's DP, ``None`` when it has none."""
        settings = dp_settings(cfg)
        if settings is None:
            return None
        from fgl_flower.strategies.sampling import sample_size

        cohort = sample_size(cfg.num_clients, cfg.fraction_train, cfg.min_train_clients)
        return cls(settings, cfg.num_clients, cfg.num_rounds, cfg.seed, cohort)

    def privatize(self, server_round: int, mean: ArrayRecord, clients: int) -> ArrayRecord:
        """``mean`` (over the cohort, ``clients`` of whose updates it holds; the others count
        as none) plus the round's noise: one release."""
        std = self.noise * self.settings.clip / self.cohort
        out = mean
        if std > 0:
            if self.settings.seeded:  # one stream over the arrays, as the tables' runs drew it
                rng = np.random.default_rng(derive_seed(self.seed, server_round, "dp-noise"))
                draw = lambda shape: rng.normal(0.0, std, shape)  # noqa: E731
            else:
                draw = lambda shape: std * secure_normal(shape)  # noqa: E731
            out = ArrayRecord()
            for key, arr in mean.items():
                a = arr.numpy()
                if np.issubdtype(a.dtype, np.floating):
                    a = (a.astype(np.float64) + draw(a.shape)).astype(a.dtype)
                out[key] = Array(a)
        if clients < self.cohort:
            log(
                WARNING,
                "DP: round %d has %d of its %d clients; the others count as no update (the mean "
                "stays over %d).",
                server_round,
                clients,
                self.cohort,
                self.cohort,
            )
        self._compose(clients)
        self._last = {"released": True, "noise_std": std, "clients": clients}
        return out

    def withhold(self, server_round: int, clients: int, why: str) -> None:
        """Record a round that releases nothing (its global model stays): ``why``."""
        log(WARNING, "DP: round %d releases nothing: %s.", server_round, why)
        self._last = {"released": False, "clients": clients, "withheld": why}

    def _compose(self, clients: int) -> None:
        self.releases = np.concatenate([self.releases, [[self.noise, clients]]])
        if self._accountant is not None:
            self._accountant.compose(release(self.noise, clients, self.population))

    def load(self, releases: np.ndarray) -> None:
        """Continue after the ``releases`` of a checkpoint (resume)."""
        self.releases = np.zeros((0, 2))
        self._accountant = (
            make_accountant(self.settings.delta, self.population) if self.noise > 0 else None
        )
        for z, k in np.asarray(releases).reshape(-1, 2):
            if not math.isclose(float(z), self.noise):
                raise ValueError(
                    f"DP: the checkpoint's noise multiplier {z:g} is not this run's {self.noise:g}."
                )
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
        """The round record's ``dp`` field: the budget spent so far and this round's release
        (``epsilon`` is absent while no noise is added: it is infinite)."""
        s = self.settings
        out = {
            "clip": s.clip,
            "noise_multiplier": self.noise,
            "delta": s.delta,
            "cohort": self.cohort,
            "seeded": s.seeded,
            **self._last,
        }
        eps = self.spent()
        if math.isfinite(eps):
            out["epsilon"] = eps
        return out

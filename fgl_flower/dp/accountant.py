r"""The privacy accountant: Flower's RDP accountant on Google's ``dp-accounting``.

Every aggregation is one Gaussian release of noise multiplier :math:`z` over the round's
clients. Client sampling is given no amplification credit (Flower's fixed-clipping
accounting, ``no-amplification`` with the add-or-remove-one relation): a round that trains
a sample of the clients is accounted like one that trains them all, an upper bound on
:math:`\varepsilon`.
"""

from __future__ import annotations

from flwr.supercore.privacy_accounting import (
    GaussianPrivacyEvent,
    NeighboringRelation,
    PrivacyConfig,
    SamplingMethod,
)
from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant


def make_accountant(delta: float, population: int) -> RdpAccountant:
    """An empty accountant for ``population`` clients reporting at ``delta``."""
    return RdpAccountant(
        PrivacyConfig(
            target_delta=delta,
            population_size=population,
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
            sampling_method=SamplingMethod.NO_AMPLIFICATION,
        )
    )


def release(noise: float, clients: int, population: int) -> GaussianPrivacyEvent:
    """One round's aggregation of ``clients`` of ``population`` with noise multiplier ``noise``."""
    return GaussianPrivacyEvent(
        noise_multiplier=noise, sample_size=clients, population_size=population
    )


def noise_for_epsilon(epsilon: float, delta: float, releases: int) -> float:
    """The smallest noise multiplier whose ``releases`` Gaussian releases (no amplification)
    spend at most ``epsilon`` at ``delta`` (``dp_accounting.calibrate_dp_mechanism``)."""
    import dp_accounting
    from dp_accounting import rdp

    return float(
        dp_accounting.calibrate_dp_mechanism(
            rdp.RdpAccountant,
            lambda z: dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), releases),
            epsilon,
            delta,
        )
    )

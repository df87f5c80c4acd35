"""The accountant and the server's noise (fgl_flower.dp.accountant, fgl_flower.dp.server)."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp
from flwr.app import Array, ArrayRecord

from fgl_flower.dp.accountant import noise_for_epsilon
from fgl_flower.dp.options import DPSettings
from fgl_flower.dp.server import CentralDP


def library_epsilon(noise, rounds, delta):
    """dp-accounting's own figure: ``rounds`` Gaussian releases, add-or-remove-one."""
    acc = rdp.RdpAccountant()
    acc.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(noise), rounds))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("noise,rounds,delta", [(1.0, 10, 1e-5), (4.0, 100, 1e-6), (0.7, 1, 1e-3)])
def test_the_reported_epsilon_is_the_accounting_library_s_own(noise, rounds, delta):
    dp = CentralDP(
        DPSettings(clip=1.0, noise=noise, epsilon=0.0, delta=delta),
        population=20,
        num_rounds=rounds,
        seed=0,
        cohort=10,
    )
    mean = ArrayRecord({"w": Array(np.zeros(3, dtype=np.float32))})
    eps = []
    for r in range(1, rounds + 1):
        dp.privatize(r, mean, clients=10)
        eps.append(dp.record()["epsilon"])
    assert eps[-1] == pytest.approx(library_epsilon(noise, rounds, delta), rel=1e-12)
    assert all(a < b for a, b in zip(eps, eps[1:]))  # the budget grows every round


def test_a_target_epsilon_sets_the_noise_that_spends_it_over_the_run():
    z = noise_for_epsilon(4.0, 1e-5, 50)
    assert library_epsilon(z, 50, 1e-5) == pytest.approx(4.0, rel=1e-3)
    assert library_epsilon(z, 50, 1e-5) <= 4.0 + 1e-9
    dp = CentralDP(
        DPSettings(clip=1.0, noise=0.0, epsilon=4.0, delta=1e-5), 10, 50, seed=0, cohort=10
    )
    assert dp.noise == z


def test_the_noise_has_std_z_c_over_k_and_is_fresh_unless_seeded():
    settings = DPSettings(clip=2.0, noise=3.0, epsilon=0.0, delta=1e-5)
    dp = CentralDP(settings, 10, 5, seed=7, cohort=4)
    mean = ArrayRecord({"w": Array(np.zeros(200_000, dtype=np.float32)), "n": Array(np.arange(3))})
    a = dp.privatize(1, mean, clients=4)
    noise = a["w"].numpy()
    assert noise.std() == pytest.approx(3.0 * 2.0 / 4, rel=0.01) and abs(noise.mean()) < 0.01
    assert a["w"].numpy().dtype == np.float32
    assert (a["n"].numpy() == np.arange(3)).all()  # integer arrays get no noise
    # from the OS's entropy: a rerun with the same seed draws other noise
    again = CentralDP(settings, 10, 5, seed=7, cohort=4)
    assert not np.array_equal(again.privatize(1, mean, clients=4)["w"].numpy(), noise)
    # dp-seeded-noise: from the run seed and the round, repeated by a rerun
    seeded = DPSettings(clip=2.0, noise=3.0, epsilon=0.0, delta=1e-5, seeded=True)
    first = CentralDP(seeded, 10, 5, seed=7, cohort=4).privatize(1, mean, clients=4)["w"].numpy()
    rerun = CentralDP(seeded, 10, 5, seed=7, cohort=4)
    assert np.array_equal(rerun.privatize(1, mean, clients=4)["w"].numpy(), first)
    assert not np.array_equal(rerun.privatize(2, mean, clients=4)["w"].numpy(), first)


def test_a_round_short_of_its_cohort_still_releases_and_a_withheld_round_spends_nothing():
    """The mean is over the cohort whatever replied (the others count as no update), so the
    noise keeps its scale and the round is one release; a withheld round is none."""
    dp = CentralDP(
        DPSettings(clip=1.0, noise=1.0, epsilon=0.0, delta=1e-5), 10, 5, seed=0, cohort=4
    )
    mean = ArrayRecord({"w": Array(np.zeros(3, dtype=np.float32))})
    dp.withhold(1, 4, "a client did not clip")
    assert dp.spent() == 0.0 and dp.record()["released"] is False
    assert dp.record()["withheld"] == "a client did not clip"
    out = dp.privatize(2, mean, clients=3)
    assert out["w"].numpy().std() > 0  # noised
    assert dp.spent() > 0 and dp.record()["released"] is True and dp.record()["clients"] == 3
    assert dp.record()["noise_std"] == 1.0 / 4


def test_no_noise_leaves_the_mean_bit_for_bit_and_epsilon_infinite():
    dp = CentralDP(
        DPSettings(clip=1.0, noise=0.0, epsilon=0.0, delta=1e-5), 10, 5, seed=0, cohort=3
    )
    mean = ArrayRecord({"w": Array(np.random.default_rng(0).normal(size=5).astype(np.float32))})
    assert dp.privatize(1, mean, clients=3) is mean
    assert math.isinf(dp.spent()) and "epsilon" not in dp.record()


def test_a_resumed_accountant_continues_from_the_checkpointed_releases():
    settings = DPSettings(clip=1.0, noise=1.5, epsilon=0.0, delta=1e-5)
    full = CentralDP(settings, 10, 6, seed=0, cohort=3)
    mean = ArrayRecord({"w": Array(np.zeros(2, dtype=np.float32))})
    for r in range(1, 4):
        full.privatize(r, mean, clients=3 + r)
    resumed = CentralDP(settings, 10, 6, seed=0, cohort=3)
    resumed.load(full.releases)
    for r in range(4, 7):
        full.privatize(r, mean, clients=5)
        resumed.privatize(r, mean, clients=5)
    assert resumed.spent() == full.spent()
    other = CentralDP(
        DPSettings(clip=1.0, noise=2.0, epsilon=0.0, delta=1e-5), 10, 6, seed=0, cohort=3
    )
    with pytest.raises(ValueError, match="noise multiplier"):
        other.load(full.releases)

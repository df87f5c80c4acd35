"""The DP noise's sampler: standard normal values from the OS's CSPRNG, never repeated."""

import numpy as np
import pytest
from scipy import stats

from fgl_flower.dp.noise import secure_normal


def test_standard_normal_values_in_the_asked_shape():
    z = secure_normal((500, 401))  # an odd count: the last Box-Muller pair is cut
    assert z.shape == (500, 401) and z.dtype == np.float64 and np.isfinite(z).all()
    flat = z.ravel()
    assert abs(flat.mean()) < 0.01 and abs(flat.std() - 1) < 0.01
    # the whole distribution, tails included: Kolmogorov-Smirnov against N(0, 1)
    assert stats.kstest(flat, "norm").pvalue > 1e-4
    assert np.mean(np.abs(flat) > 3) == pytest.approx(2 * stats.norm.sf(3), rel=0.15)


def test_two_draws_differ_and_no_seed_repeats_them():
    assert not np.array_equal(secure_normal((64,)), secure_normal((64,)))
    assert secure_normal((0,)).shape == (0,) and secure_normal(()).shape == ()

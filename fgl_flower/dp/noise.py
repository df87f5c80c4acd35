r"""The Gaussian noise of the server's release: from a cryptographically secure generator.

By default every value comes from the operating system's CSPRNG (:func:`secrets.token_bytes`,
the kernel's ChaCha20 on Linux): two 64-bit words give two uniforms of 53 bits,
:math:`u_1 \in (0, 1]` and :math:`u_2 \in [0, 1)`, and the Box-Muller transform two
standard normals,

.. math::
    z_1 = \sqrt{-2\ln u_1}\,\cos 2\pi u_2, \qquad z_2 = \sqrt{-2\ln u_1}\,\sin 2\pi u_2 ,

in float64. Nobody can regenerate or predict the draws, unlike a seeded PRNG such as NumPy's
PCG64, whose whole stream follows from 128 bits of state. The transform is floating-point:
the values are those of a continuous Gaussian rounded to float64 and the noised model is
rounded again to float32, which leaves the known floating-point attacks on continuous noise
(Mironov, CCS 2012) out of reach only as far as that rounding hides the low bits; an exact
discrete Gaussian (Canonne, Kamath and Steinke, NeurIPS 2020) would close that gap and is
not implemented. ``<method>.dp-seeded-noise`` draws from NumPy's PCG64 seeded with the run
seed instead (:class:`~fgl_flower.dp.server.CentralDP`): reproducible, for experiments only.
"""

from __future__ import annotations

import math
import secrets

import numpy as np


def secure_normal(shape: tuple[int, ...]) -> np.ndarray:
    """``float64[shape]`` standard normal values from the operating system's CSPRNG."""
    n = math.prod(shape)
    pairs = (n + 1) // 2
    words = np.frombuffer(secrets.token_bytes(16 * pairs), dtype=np.uint64).reshape(2, pairs)
    u1 = ((words[0] >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53  # (0, 1]
    u2 = (words[1] >> np.uint64(11)).astype(np.float64) * 2.0**-53  # [0, 1)
    radius = np.sqrt(-2.0 * np.log(u1))
    angle = 2.0 * np.pi * u2
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:n].reshape(shape)

"""SecAgg+'s masks, the same on both sides: a client adds them, the server removes those that
do not cancel (modulo :data:`MODULUS`).

Each mask is the SHAKE-256 stream of its whole seed (a client's private seed, or the 32-byte key
two clients agree on with Flower's key agreement), cut into 64-bit words and reduced modulo
:data:`MODULUS` (a power of two, so the words stay uniform). Flower's ``pseudo_rand_gen``,
used here before 2026-11-29, XOR-folds any seed into 32 bits for NumPy's Mersenne Twister:
a server that removed one client's private mask could then search the 2^28-2^32 pairwise
seeds left and read that client's upload (an outside audit did, in a two-client round).
"""

from __future__ import annotations

import hashlib

import numpy as np
from flwr.common.secure_aggregation.crypto.symmetric_encryption import generate_shared_key
from flwr.supercore.primitives.asymmetric import bytes_to_private_key, bytes_to_public_key

from fgl_flower.secagg.encoding import MODULUS

#: Domain separation of the two kinds of mask drawn from seeds of the same length.
_PRIVATE, _PAIRWISE = b"fgl-secagg-private-mask:", b"fgl-secagg-pairwise-mask:"


def expand(label: bytes, seed: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """``int64`` values in ``[0, MODULUS)`` of ``shape``: SHAKE-256 of ``label + seed``, every
    bit of the seed counting (a cryptographic stream, not a seeded statistical generator)."""
    n = int(np.prod(shape, dtype=np.int64))
    words = np.frombuffer(hashlib.shake_256(label + seed).digest(8 * n), dtype="<u8")
    return (words & np.uint64(MODULUS - 1)).astype(np.int64).reshape(shape)


def private_mask(seed: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """The mask of a client's private seed, ``int64`` in ``[0, MODULUS)``."""
    return expand(_PRIVATE, seed, shape)


def pairwise_mask(secret_key: bytes, public_key: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """The mask two clients share: from the key agreement of one's first secret key with the
    other's first public key (the same from either side)."""
    key = generate_shared_key(bytes_to_private_key(secret_key), bytes_to_public_key(public_key))
    return expand(_PAIRWISE, key, shape)

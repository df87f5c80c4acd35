"""SecAgg+'s masks, the same on both sides: a client adds them, the server removes those that
do not cancel (Flower's key agreement and seeded generator, modulo :data:`MODULUS`)."""

from __future__ import annotations

import numpy as np
from flwr.common.secure_aggregation.crypto.symmetric_encryption import generate_shared_key
from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen
from flwr.supercore.primitives.asymmetric import bytes_to_private_key, bytes_to_public_key

from fgl_flower.secagg.encoding import MODULUS


def private_mask(seed: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """The mask of a client's private seed, ``int64`` in ``[0, MODULUS)``."""
    return pseudo_rand_gen(seed, MODULUS, [shape])[0]


def pairwise_mask(secret_key: bytes, public_key: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """The mask two clients share: from the key agreement of one's first secret key with the
    other's first public key (the same from either side)."""
    key = generate_shared_key(bytes_to_private_key(secret_key), bytes_to_public_key(public_key))
    return pseudo_rand_gen(key, MODULUS, [shape])[0]

"""SecAgg+'s masks: every bit of a seed counts, values are uniform words below the modulus,
and the two kinds of mask are drawn apart."""

import numpy as np

from fgl_flower.secagg.encoding import MODULUS
from fgl_flower.secagg.masks import expand, private_mask


def test_seeds_that_a_32_bit_fold_confuses_give_different_masks():
    """Flower's ``pseudo_rand_gen`` XOR-folds a seed into 32 bits: these two seeds fold to the
    same number (two equal words cancel) and gave the same mask; every byte counts now."""
    a = bytes(32)
    b = bytes([7, 1, 2, 3]) * 2 + bytes(24)
    assert not np.array_equal(private_mask(a, (64,)), private_mask(b, (64,)))
    flips = [bytearray(a) for _ in range(32)]
    for i, f in enumerate(flips):
        f[i] = 1
    masks = {private_mask(bytes(f), (4,)).tobytes() for f in flips}
    assert len(masks) == 32


def test_masks_are_words_below_the_modulus_and_repeatable():
    m = expand(b"label", b"seed", (1000,))
    assert m.dtype == np.int64 and m.min() >= 0 and m.max() < MODULUS
    assert np.array_equal(m, expand(b"label", b"seed", (1000,)))
    assert not np.array_equal(m, expand(b"other", b"seed", (1000,)))  # domain separation
    assert m.max() > MODULUS // 2  # uses the whole range (2^62), not 32 bits
    assert expand(b"x", b"s", (2, 3)).shape == (2, 3) and expand(b"x", b"s", ()).shape == ()


def test_an_upload_is_masked_by_its_private_seed_besides_the_pairwise_masks():
    """A server that removes a node's pairwise masks (it rebuilds a dropped node's key) still
    sees the upload under its private mask."""
    from fgl_flower.secagg.client import mask

    vector = np.arange(16, dtype=np.int64)
    hidden = mask(vector, 11, b"\x05" * 32, b"", {})  # no neighbours: only the private mask
    assert np.array_equal(
        np.mod(hidden - private_mask(b"\x05" * 32, vector.shape), MODULUS), vector
    )
    assert (hidden != vector).all()

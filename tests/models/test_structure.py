"""Structural encodings (FedDense spec §2.3): RWSE and DSE."""

import numpy as np
import torch

from fgl_flower.models.structure import degree_encoding, random_walk_encoding, structure_encoding


def _reference_rwse(edge_index: np.ndarray, n: int, steps: int) -> np.ndarray:
    """The spec's definition, dense: diag((A D^-1)^k), degrees on edge_index[0], 1/0 := 0."""
    a = np.zeros((n, n))
    a[edge_index[0], edge_index[1]] = 1.0
    deg = np.bincount(edge_index[0], minlength=n).astype(float)
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    m = a @ np.diag(inv)
    out, p = [], np.eye(n)
    for _ in range(steps):
        p = p @ m
        out.append(np.diag(p).copy())
    return np.stack(out, axis=1)


def _undirected(n: int, p: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    u, v = np.triu_indices(n, 1)
    keep = rng.random(u.size) < p
    return np.concatenate([np.stack([u[keep], v[keep]]), np.stack([v[keep], u[keep]])], axis=1)


def test_rwse_matches_the_definition_and_isolated_nodes_get_zero():
    for seed in range(3):
        ei = _undirected(12, 0.3, seed)
        n = 13  # node 12 is isolated
        got = random_walk_encoding(torch.from_numpy(ei), n, 16).numpy()
        np.testing.assert_allclose(got, _reference_rwse(ei, n, 16), rtol=1e-5, atol=1e-7)
        assert not np.isnan(got).any() and (got[12] == 0).all()
        assert (got[:, 0] == 0).all()  # no self-loops: a 1-step walk never returns


def test_rwse_equals_pygs_random_walk_pe():
    from torch_geometric.data import Data
    from torch_geometric.transforms import AddRandomWalkPE

    ei = torch.from_numpy(_undirected(20, 0.25, 7))
    pe = AddRandomWalkPE(walk_length=16, attr_name="pe")(Data(edge_index=ei, num_nodes=20)).pe
    torch.testing.assert_close(random_walk_encoding(ei, 20, 16), pe, rtol=1e-5, atol=1e-6)


def test_dse_one_hot_of_the_clipped_degree():
    ei = torch.tensor([[0, 1, 1, 2] + [3] * 20, [1, 0, 2, 1] + list(range(4, 24))])
    dse = degree_encoding(ei, 25, 16)
    assert dse.shape == (25, 16) and (dse.sum(1) == 1).all()
    assert dse[0].argmax() == 0 and dse[1].argmax() == 1 and dse[3].argmax() == 15  # deg 1, 2, 20
    assert dse[24].argmax() == 0  # degree 0 shares index 0 with degree 1
    enc = structure_encoding(ei, 25)
    assert enc.shape == (25, 32) and torch.equal(enc[:, 16:], dse)


def test_rwse_of_a_cycle_is_the_closed_walk_count():
    """On the 7-cycle a k-step walk returns with probability C(k, k/2) / 2^k for even
    k < 7, 0 for odd k < 7, and 2 / 2^7 at k = 7 (once around, either way); every node alike."""
    n = 7
    ei = torch.tensor(
        [
            list(range(n)) + [(i + 1) % n for i in range(n)],
            [(i + 1) % n for i in range(n)] + list(range(n)),
        ]
    )
    rwse = random_walk_encoding(ei, n, 7)
    expected = torch.tensor([0, 2 / 4, 0, 6 / 16, 0, 20 / 64, 2 / 128])
    torch.testing.assert_close(rwse, expected.expand(n, 7).float())


def test_an_edgeless_graph_encodes_to_zeros_and_the_first_degree_column():
    enc = structure_encoding(torch.zeros(2, 0, dtype=torch.long), 3)
    assert not enc.isnan().any()
    assert (enc[:, :16] == 0).all() and (enc[:, 16] == 1).all() and enc[:, 17:].sum() == 0

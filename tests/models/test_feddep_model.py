"""FedDEP's new math on tiny tensors, worked by hand: the clustering and its prototypes, the
privacy gap, the other clients' targets, the rounded slots and the mended embedding, the
local (rounded) and cross (truncated, all K targets) reconstruction losses, the classifier's
embedding branch."""

import math

import pytest
import torch

from fgl_flower.models.feddep import (
    FedDEPClassifier,
    LocalDGen,
    draw_targets,
    kmeans,
    mended_embedding,
    prototype_gap,
    prototypes,
    slot_mask,
)
from fgl_flower.models.fedsage import NeighGen, feature_loss


def test_kmeans_finds_the_two_groups_numbered_by_first_appearance():
    points = torch.tensor([[10.0, 10.0], [0.0, 0.0], [10.0, 11.0], [0.0, 1.0]])
    for seed in range(5):
        labels = kmeans(points, 2, torch.Generator().manual_seed(seed))
        assert labels.tolist() == [0, 1, 0, 1]
    # more clusters than points: every point its own
    assert sorted(kmeans(points[:2], 5, torch.Generator().manual_seed(0)).tolist()) == [0, 1]


def test_prototypes_are_the_cluster_means_and_the_gap_is_their_distance():
    emb = torch.tensor([[0.0, 0.0], [2.0, 0.0], [10.0, 10.0]])
    means, node = prototypes(emb, torch.tensor([0, 0, 1]))
    assert means.tolist() == [[1.0, 0.0], [10.0, 10.0]]
    assert node.tolist() == [[1.0, 0.0], [1.0, 0.0], [10.0, 10.0]]
    # (|0-1| + |2-1| + 0) / (0 + 2 + sqrt(200))
    assert prototype_gap(emb, node) == pytest.approx(2 / (2 + math.sqrt(200)))
    assert prototype_gap(emb, emb) == 0.0  # every node its own prototype: no privacy


def test_draw_targets_replaces_an_empty_slot_by_the_centres_own_prototype():
    # node 0 lost one neighbour (prototype 1), node 1 two (prototypes 2 and 3)
    missing = torch.tensor([[[1.0], [0.0]], [[2.0], [3.0]]])
    own = torch.tensor([[5.0], [6.0]])
    got = draw_targets(missing, own, 4, 3, torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(0)  # the same draws: centres, then slots
    centre, slot = torch.randint(2, (4,), generator=g), torch.randint(2, (4, 3), generator=g)
    table = {(0, 0): 1.0, (0, 1): 5.0, (1, 0): 2.0, (1, 1): 3.0}
    want = [[[table[int(c), int(s)]] for s in row] for c, row in zip(centre, slot)]
    assert got.tolist() == want
    assert got.shape == (4, 3, 1)


def test_the_codes_empty_test_also_replaces_a_prototype_with_a_negative_sum():
    # node 0: a real prototype (-1, 0.5) (sum -0.5) and an empty slot; node 1: (2, -1), (-3, 1)
    missing = torch.tensor([[[-1.0, 0.5], [0.0, 0.0]], [[2.0, -1.0], [-3.0, 1.0]]])
    own = torch.tensor([[5.0, 5.0], [6.0, 6.0]])
    g = torch.Generator().manual_seed(1)
    centre, slot = torch.randint(2, (8,), generator=g), torch.randint(2, (8, 3), generator=g)
    signed = {(0, 0): [5.0, 5.0], (0, 1): [5.0, 5.0], (1, 0): [2.0, -1.0], (1, 1): [6.0, 6.0]}
    zero = {(0, 0): [-1.0, 0.5], (0, 1): [5.0, 5.0], (1, 0): [2.0, -1.0], (1, 1): [-3.0, 1.0]}
    for empty, table in (("sum", signed), ("zero", zero)):
        got = draw_targets(missing, own, 8, 3, torch.Generator().manual_seed(1), empty)
        want = [[table[int(c), int(s)] for s in row] for c, row in zip(centre, slot)]
        assert got.tolist() == want, empty
    # the draws reach both kinds of slot, so the two tests differ
    assert {(int(c), int(s)) for c, row in zip(centre, slot) for s in row} >= {(0, 0), (1, 1)}
    with pytest.raises(ValueError):
        draw_targets(missing, own, 1, 1, torch.Generator(), "abs")


def test_slots_round_and_the_mended_embedding_averages_over_all_k():
    count = torch.tensor([0.4, 1.5, 2.6, 9.0, 2.5])
    assert slot_mask(count, 3).tolist() == [
        [0, 0, 0],
        [1, 1, 0],  # 1.5 rounds half to even: 2
        [1, 1, 1],
        [1, 1, 1],  # capped at K
        [1, 1, 0],  # 2.5 -> 2
    ]
    gen = torch.ones(5, 3, 2)
    gen[:, 2] = 4.0
    e = mended_embedding(count, gen)
    assert e[:, 0].tolist() == pytest.approx([0.0, 2 / 3, 2.0, 2.0, 2 / 3])


def test_the_local_loss_rounds_the_count_and_the_cross_loss_truncates_it():
    pred = torch.tensor([[[0.0], [2.0]]])  # one node, K = 2 slots
    target = torch.tensor([[[1.0], [3.0]]])
    count, true = torch.tensor([1.6]), torch.tensor([2.0])
    # rounded: 2 slots; slot 0 min((0-1)^2, (0-3)^2) = 1, slot 1 min(1, 1) = 1; / (N K = 2)
    assert feature_loss(pred, target, count, true, "min", "round").item() == 1.0
    # truncated (the cross loss, FedSage+'s default): slot 0 only
    assert feature_loss(pred, target, count, true, "min").item() == 0.5
    # a node whose true count is 1 is matched to its first target only
    assert feature_loss(pred, target, count, torch.tensor([1.0]), "min", "round").item() == 1.0
    # the gradient of the cross loss for slot 0: 2 (x - t) / (D N K) = 2 (0 - 1) / 2
    p = pred.clone().requires_grad_(True)
    feature_loss(p, target, count, torch.tensor([2.0])).backward()
    assert p.grad.flatten().tolist() == [-1.0, 0.0]


def test_the_classifier_chains_its_embedding_branch_through_the_layers():
    """Two layers, worked by hand: layer 2 adds W2 (W1 e + b1) + b2 (both codes'
    ``x_emb = layer[1](x_emb)``), not W2 e + b2."""
    model = FedDEPClassifier(1, 1, 1, 1, num_layers=2, dropout=0.0)
    with torch.no_grad():
        for conv, (w_l, w_r, b) in zip(model.convs, [(2.0, 1.0, 0.0), (1.0, 3.0, 0.5)]):
            conv.lin_l.weight.fill_(w_l)  # mean of the in-neighbours
            conv.lin_l.bias.fill_(b)
            conv.lin_r.weight.fill_(w_r)  # the node itself
        for lin, (w, b) in zip(model.embs, [(10.0, 1.0), (-2.0, 0.25)]):
            lin.weight.fill_(w)
            lin.bias.fill_(b)
    x = torch.tensor([[1.0], [-1.0]])
    e = torch.tensor([[0.1], [-0.3]])
    edges = torch.tensor([[0], [1]])  # 0 -> 1: node 1's neighbour mean is x_0; node 0 has none
    # layer 1: SAGE = 2 mean + 1 x: node 0: 0 + 1 = 1, node 1: 2 - 1 = 1;
    # branch e1 = 10 e + 1 = (2, -2); z1 = ReLU(1 + 2, 1 - 2) = (3, 0)
    # layer 2: SAGE = 1 mean + 3 z + 0.5: node 0: 0 + 9 + 0.5 = 9.5, node 1: 3 + 0 + 0.5 = 3.5;
    # branch e2 = -2 e1 + 0.25 = (-3.75, 4.25); out = (5.75, 7.75)
    out = model(torch.cat([x, e], 1), edges)
    assert out.flatten().tolist() == pytest.approx([5.75, 7.75])
    # the unchained branch (a fresh map of e at layer 2: -2 e + 0.25 = (0.05, 0.85)) differs
    assert out.flatten().tolist() != pytest.approx([9.55, 4.35])
    one = FedDEPClassifier(3, 2, 4, 5, num_layers=1, dropout=0.0)
    x3, e2 = torch.randn(4, 3), torch.randn(4, 2)
    chain = torch.tensor([[0, 1, 2], [1, 2, 3]])
    want = one.convs[0](x3, chain) + one.embs[0](e2)
    assert torch.allclose(one(torch.cat([x3, e2], 1), chain), want)


def test_the_generator_makes_k_embeddings_and_the_classifier_loss_reaches_them():
    torch.manual_seed(0)
    neigh = NeighGen(7, 3, 8, 16, 0.0, out_channels=4)
    assert neigh.out_channels == 4 and NeighGen(7, 3).out_channels == 7
    assert neigh(torch.randn(5, 7), torch.zeros(2, 0, dtype=torch.long))[1].shape == (5, 3, 4)
    model = LocalDGen(7, 4, 3, 2, hidden=8, latent=16, dropout=0.0)
    with torch.no_grad():
        model.gen.dgen.bias.fill_(2.0)  # every node predicts two neighbours
    x = torch.randn(6, 7)
    edges = torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]])
    count, gen, logits = model(x, edges)
    assert gen.shape == (6, 2, 4) and logits.shape == (6, 3) and count.shape == (6,)
    torch.nn.functional.cross_entropy(logits, torch.zeros(6, dtype=torch.long)).backward()
    assert model.gen.fgen[2].weight.grad.abs().sum() > 0

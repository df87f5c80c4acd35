"""FedSage+'s generator pieces against hand-worked small cases and written-out loops."""

import math

import torch

from fgl_flower.models.fedsage import (
    NeighGen,
    feature_loss,
    hide_nodes,
    impaired_graph,
    mend,
    missing_neighbours,
    neighbour_features,
    owner_fit,
)


def undirected(pairs):
    e = torch.tensor(pairs).t()
    return torch.cat([e, e.flip(0)], dim=1)


def test_only_validation_nodes_are_hidden():
    val = torch.zeros(20, dtype=torch.bool)
    val[[2, 3, 5, 7, 11, 13]] = True
    hidden = hide_nodes(val, 0.5, torch.Generator().manual_seed(0))
    assert int(hidden.sum()) == 3 and bool((hidden <= val).all())
    assert not hide_nodes(val, 0.0, torch.Generator()).any()


def test_missing_neighbours_and_the_impaired_graph():
    # 0-1, 0-2, 0-3, 0-4, 1-2, 3-4, and a self-loop on 0; hide 2 and 3
    ei = torch.cat(
        [undirected([(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (3, 4)]), torch.tensor([[0], [0]])],
        dim=1,
    )
    hidden = torch.tensor([False, False, True, True, False])
    kept, sub = impaired_graph(ei, hidden)
    assert kept.tolist() == [0, 1, 4]
    assert sorted(map(tuple, sub.t().tolist())) == [(0, 0), (0, 1), (0, 2), (1, 0), (2, 0)]
    count, index = missing_neighbours(ei, hidden, num_pred=1)
    assert count.tolist() == [2.0, 1.0, 1.0]  # uncapped
    assert index.tolist() == [[2], [2], [3]]  # the first by node id
    _, index = missing_neighbours(ei, hidden, num_pred=3)
    assert index.tolist() == [[2, 3, -1], [2, -1, -1], [3, -1, -1]]
    x = torch.arange(10.0).view(5, 2)
    feats = neighbour_features(x, index)
    assert feats[0].tolist() == [[4.0, 5.0], [6.0, 7.0], [0.0, 0.0]]


def written_out(pred, target, pred_count, true_count, matching):
    n, k, d = pred.shape
    total = 0.0
    for v in range(n):
        t = min(int(true_count[v]), k)
        if t == 0:
            continue
        for p in range(min(int(pred_count[v]), k)):
            errs = [float(((pred[v, p] - target[v, j]) ** 2).mean()) for j in range(t)]
            if matching == "min":
                total += min(errs)
            else:  # the codes' loop: start at the last target, replace while below D x current
                cur = errs[t - 1]
                for j in range(t):
                    if errs[j] < d * cur:
                        cur = errs[j]
                total += cur
    return total / (n * k)


def test_feature_loss_matches_the_written_out_matching():
    torch.manual_seed(0)
    n, k, d = 7, 3, 4
    pred, target = torch.rand(n, k, d), torch.rand(n, k, d)
    pred_count = torch.tensor([0.2, 1.7, 2.0, 3.9, 5.0, 2.5, 1.0])
    true_count = torch.tensor([1.0, 0.0, 2.0, 3.0, 9.0, 1.0, 2.0])
    for matching in ("min", "code"):
        got = float(feature_loss(pred, target, pred_count, true_count, matching))
        assert math.isclose(
            got, written_out(pred, target, pred_count, true_count, matching), rel_tol=1e-5
        )
    # D = 1: the codes' test is a true comparison, so both matchings agree
    pred1, target1 = pred[..., :1], target[..., :1]
    assert math.isclose(
        float(feature_loss(pred1, target1, pred_count, true_count, "code")),
        float(feature_loss(pred1, target1, pred_count, true_count, "min")),
        rel_tol=1e-6,
    )


def test_feature_loss_reaches_the_generator_only():
    pred = torch.rand(3, 2, 5, requires_grad=True)
    count = torch.tensor([2.0, 1.0, 0.0], requires_grad=True)
    loss = feature_loss(pred, torch.rand(3, 2, 5), count, torch.tensor([1.0, 2.0, 2.0]))
    loss.backward()
    assert pred.grad.abs().sum() > 0 and count.grad is None


def test_generator_shapes():
    torch.manual_seed(0)
    gen = NeighGen(in_channels=6, num_pred=3)
    count, feats = gen(torch.rand(10, 6), undirected([(0, 1), (1, 2)]))
    assert count.shape == (10,) and bool((count >= 0).all())
    assert feats.shape == (10, 3, 6) and bool((feats.abs() < 1).all())


def test_mending_adds_the_predicted_neighbours_to_the_original_graph():
    x = torch.zeros(4, 2)
    ei = undirected([(0, 1), (1, 2), (2, 3)])
    kept = torch.tensor([0, 1, 3])  # node 2 was hidden: it is back, but gets no neighbours
    feats = torch.arange(12.0).view(3, 2, 2)
    x2, ei2 = mend(x, ei, kept, torch.tensor([1.5, 0.4, 7.0]), feats)
    assert x2.shape == (4 + 1 + 0 + 2, 2)
    assert x2[4:].tolist() == [[0.0, 1.0], [8.0, 9.0], [10.0, 11.0]]
    new = set(map(tuple, ei2[:, ei.size(1) :].t().tolist()))
    assert new == {(0, 4), (3, 5), (3, 6), (4, 0), (5, 3), (6, 3)}
    _, directed = mend(x, ei, kept, torch.tensor([1.5, 0.4, 7.0]), feats, undirected=False)
    assert set(map(tuple, directed[:, ei.size(1) :].t().tolist())) == {(0, 4), (3, 5), (3, 6)}


def test_the_gradient_on_the_features_gives_the_generators_gradient():
    """What another client returns (the feature loss's gradient on the generated features)
    backpropagated through the generator equals the gradient of the loss on its parameters."""
    torch.manual_seed(0)
    gen = NeighGen(in_channels=6, num_pred=3).eval()
    x, ei = torch.rand(8, 6), undirected([(0, 1), (1, 2), (3, 4), (5, 6), (6, 7)])
    targets, true = torch.rand(8, 3, 6), torch.tensor([1.0, 2.0, 0.0, 3.0, 1.0, 2.0, 1.0, 3.0])
    torch.manual_seed(1)
    count, feats = gen(x, ei)
    count = count + 2.0  # every node has slots
    direct = torch.autograd.grad(
        feature_loss(feats, targets, count, true), list(gen.fgen.parameters())
    )
    sent = feats.detach().requires_grad_(True)
    returned = torch.autograd.grad(feature_loss(sent, targets, count, true), sent)[0]
    torch.manual_seed(1)
    _, again = gen(x, ei)  # the same seeded forward, as the client recomputes it
    chained = torch.autograd.grad((again * returned).sum(), list(gen.fgen.parameters()))
    for a, b in zip(direct, chained):
        assert torch.allclose(a, b, atol=1e-7)


def test_cross_client_targets_are_neighbours_of_random_centres():
    from fgl_flower.models.fedsage import sample_targets

    x = torch.arange(5.0)[:, None].repeat(1, 2)
    ei = undirected([(0, 1), (0, 2)])  # 3 and 4 have no neighbour: never centres
    t = sample_targets(x, ei, count=50, num_pred=4, generator=torch.Generator().manual_seed(0))
    assert t.shape == (50, 4, 2)
    rows = t[..., 0]
    # a centre's K draws are all neighbours of one node: of 0 ({1, 2}), of 1 ({0}) or of 2 ({0})
    assert all(set(r.tolist()) <= {1.0, 2.0} or set(r.tolist()) == {0.0} for r in rows)
    assert not torch.isin(rows, torch.tensor([3.0, 4.0])).any()


def test_owner_fit_tells_a_neighbours_features_from_constant_or_misplaced_rows():
    """Generated rows that are a true neighbour's features fit their owner; the same rows on
    other nodes, or one row everywhere, do not (read from the mended graph's edges, in both
    edge modes)."""
    g = torch.Generator().manual_seed(0)
    n, d = 60, 16
    centres = torch.randn(6, d) * 3
    block = torch.arange(n) // 10  # six groups of ten, linked inside the group only
    x = centres[block] + 0.3 * torch.randn(n, d, generator=g)
    pairs = [
        (a, b)
        for a in range(n)
        for b in range(a + 1, n)
        if block[a] == block[b] and (a + b) % 3 == 0
    ]
    ei = undirected(pairs)
    kept = torch.arange(n)
    count = torch.full((n,), 1.0)
    neighbour = x[
        (torch.arange(n) // 10) * 10 + (torch.arange(n) + 1) % 10
    ]  # a node of the same group
    for both_ways in (True, False):
        x2, e2 = mend(x, ei, kept, count, neighbour[:, None, :], undirected=both_ways)
        assert owner_fit(x2, e2, n, torch.Generator().manual_seed(1)) > 0.5
        misplaced = (kept + 10) % n  # every row on a node of the next group
        x3, e3 = mend(x, ei, misplaced, count, neighbour[:, None, :], undirected=both_ways)
        assert owner_fit(x3, e3, n, torch.Generator().manual_seed(1)) < 0  # nearer the wrong node
        same = neighbour[:1].expand(n, d)[:, None, :]
        x4, e4 = mend(x, ei, kept, count, same, undirected=both_ways)
        assert abs(owner_fit(x4, e4, n, torch.Generator().manual_seed(1))) < 1e-5
    assert owner_fit(x, ei, n, torch.Generator()) is None  # nothing generated

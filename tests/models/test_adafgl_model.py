"""AdaFGL's operators by hand (fgl_flower/models/adafgl.py)."""

import math

import pytest
import torch

from fgl_flower.models import adafgl as ops


def test_normalize_is_the_symmetric_laplacian_at_r_one_half_and_row_stochastic_at_zero():
    """A path 0-1-2 with self-loops: degrees 2, 3, 2. r = 1/2: entry (0, 1) = 1/sqrt(2*3);
    r = 0: D^-1 (A+I)^T, rows summing to 1."""
    a = torch.tensor([[0.0, 1, 0], [1, 0, 1], [0, 1, 0]])
    sym = ops.normalize(a, 0.5)
    assert float(sym[0, 1]) == pytest.approx(1 / math.sqrt(6))
    assert float(sym[1, 1]) == pytest.approx(1 / 3)
    assert torch.allclose(sym, sym.t())
    assert torch.allclose(ops.normalize(a, 0.0).sum(dim=1), torch.ones(3))
    # a weighted, non-symmetric M: D^{r-1} (M + I)^T D^{-r} entry by entry
    m = torch.tensor([[0.0, 2.0], [0.5, 0.0]])
    d = torch.tensor([3.0, 1.5])  # row sums of M + I
    want = torch.tensor([[1.0, 0.5], [2.0, 1.0]]) * d[:, None] ** -0.7 * d[None, :] ** -0.3
    assert torch.allclose(ops.normalize(m, 0.3), want)


def test_similarity_is_the_cosine_of_the_softmaxes_with_a_zero_diagonal():
    z = torch.tensor([[5.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    s = ops.similarity(z)
    assert torch.allclose(torch.diagonal(s), torch.zeros(3))
    assert float(s[0, 1]) == pytest.approx(1.0)
    p = torch.softmax(z, dim=1)
    assert float(s[0, 2]) == pytest.approx(float(p[0] @ p[2] / (p[0].norm() * p[2].norm())))
    # the knowledge edges: above the threshold only, never a self-loop
    assert ops.knowledge_edges(z, 0.999).tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 0]]
    # both codes' second softmax: probabilities as input are softmaxed again
    assert float(ops.similarity(p)[0, 2]) > float(s[0, 2])


def test_knowledge_adjacency_and_propagated_features():
    a = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    k = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    assert torch.equal(ops.knowledge_adjacency(a, k, 0.05), 0.05 * a)
    x = torch.tensor([[1.0], [3.0]])
    adj = ops.normalize(a, 0.5)  # [[1/2, 1/2], [1/2, 1/2]]
    want = torch.tensor([[1.0, 2.0, 2.0], [3.0, 2.0, 2.0]])
    assert torch.allclose(ops.propagated_features(adj, x, 2), want)


def test_homophily_confidence_is_high_on_a_homophilous_graph_and_low_on_a_heterophilous_one():
    """Two classes of 20 nodes each. Edges within the classes: label propagation from half the
    training nodes labels the other half right (1.0); edges only across the classes (a
    bipartite graph): it labels them by their neighbours, wrong."""
    n = 40
    y = torch.tensor([0] * 20 + [1] * 20)
    train = torch.zeros(n, dtype=torch.bool)
    train[::2] = True
    same = (y[:, None] == y[None, :]).float() - torch.eye(n)
    across = (y[:, None] != y[None, :]).float()
    hcs = lambda a: ops.homophily_confidence(  # noqa: E731
        ops.normalize(a, 0.5), y, train, 2, torch.Generator().manual_seed(0)
    )
    assert hcs(same) == 1.0
    assert hcs(across) < 0.5
    one = torch.zeros(n, dtype=torch.bool)
    one[0] = True
    assert math.isnan(
        ops.homophily_confidence(ops.normalize(same, 0.5), y, one, 2, torch.Generator())
    )


def test_heterophilous_rescaling_by_hand():
    """R with mean 0.25 and maximum 1: an entry above the mean maps to (R - mu)/(M - mu), one
    below to -R/mu (the official code's rescaling), then + I."""
    module = ops.HeteModule(1, 1, 2, 2, 0.0, beta=1.0)  # beta 1: R is the knowledge matrix
    knowledge = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    r = module.propagation(torch.zeros(2, 2), knowledge)
    assert torch.allclose(r, torch.tensor([[1.0, 1.0], [0.0, 1.0]]))  # mean 0.25, max 1
    knowledge = torch.tensor([[0.0, 0.8], [0.2, 0.0]])  # mean 0.25, max 0.8
    r = module.propagation(torch.zeros(2, 2), knowledge)
    want = torch.tensor([[1.0, (0.8 - 0.25) / (0.8 - 0.25)], [-0.2 / 0.25, 1.0]])
    assert torch.allclose(r, want)


def test_the_predictions_and_their_fusion():
    h = torch.tensor([[2.0, 0.0]])
    p = torch.tensor([[1.0, 0.0]])
    want = (torch.softmax(h, 1) + torch.softmax(p, 1)) / 2  # P softmaxed a second time
    assert torch.allclose(ops.homo_probs(h, p), want)
    outs = (torch.zeros(1, 2), torch.tensor([[0.0, 10.0]]), torch.tensor([[10.0, 0.0]]))
    assert torch.allclose(ops.hete_probs(outs).sum(dim=1), torch.ones(1))
    a, b = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    assert ops.fuse(a, b, 0.75).tolist() == [[0.75, 0.25]]
    assert ops.fuse(None, b, 0.75) is b and ops.fuse(a, None, 0.2) is a


def test_label_propagation_by_hand():
    """A path 0-1-2-3 (self-loops: degrees 2, 3, 3, 2), seeds 0 (class 0) and 3 (class 1),
    nodes 1 and 2 uniform; alpha 1/2. One step: node 1 = 1/2 (A Y0)_1 + 1/2 (1/2, 1/2) with
    (A Y0)_1 = (1, 0)/sqrt(6) + (1/2, 1/2)/3 + (1/2, 1/2)/3; seed 0 = 1/2 (A Y0)_0 + 1/2 (1, 0),
    then + (1, 0) again."""
    a = torch.tensor([[0.0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]])
    y0 = torch.tensor([[1.0, 0.0], [0.5, 0.5], [0.5, 0.5], [0.0, 1.0]])
    seed = torch.tensor([0, 3])
    one = ops.label_propagation(ops.normalize(a, 0.5), y0, seed, 1, 0.5)
    s6 = math.sqrt(6)
    node1 = [0.5 * (1 / s6 + 1 / 3) + 0.25, 0.5 * (1 / 3) + 0.25]
    node0 = [0.5 * (0.5 + 0.5 / s6) + 0.5 + 1.0, 0.5 * (0.5 / s6)]
    assert one[1].tolist() == pytest.approx(node1)
    assert one[0].tolist() == pytest.approx(node0)
    assert one[2].tolist() == pytest.approx(node1[::-1])  # the mirror image
    # the second step starts from the first's Y (seed rows included, as they were added to)
    adj = ops.normalize(a, 0.5)
    two = ops.label_propagation(adj, y0, seed, 2, 0.5)
    want = 0.5 * (adj @ one) + 0.5 * y0
    want[seed] += y0[seed]
    assert torch.allclose(two, want)


def test_the_heterophilous_forward_by_hand():
    """Which MLP feeds the propagation, which PReLU each part uses (one for H_loc and H_smooth,
    one for the propagation MLP and its signals), and O, recomputed from the weights."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    n, f, k, hidden, c = 5, 3, 2, 4, 3
    module = ops.HeteModule(f, (k + 1) * f, hidden, c, 0.0, beta=0.2).eval()
    with torch.no_grad():
        module.act.weight.fill_(0.1)
        module.prop_act.weight.fill_(0.3)
    x, x_k = torch.randn(n, f), torch.randn(n, (k + 1) * f)
    knowledge = (torch.rand(n, n) > 0.5).float().fill_diagonal_(0)

    def run(layers, inp, slope):
        for layer in layers[:-1]:
            inp = F.prelu(F.linear(inp, layer.weight, layer.bias), torch.tensor([slope]))
        return F.linear(inp, layers[-1].weight, layers[-1].bias)

    with torch.no_grad():
        h_loc, h_s, out = module(x, x_k, knowledge)
        h = run(module.prop, x_k, 0.3)
        r = 0.2 * knowledge + 0.8 * ops.similarity(h)
        mu, top = r.mean(), r.max()
        r = torch.where(r > mu, (r - mu) / (top - mu), -r / mu) + torch.eye(n)
        pos = torch.softmax(F.prelu(r, torch.tensor([0.3])) @ h, dim=1)
        neg = torch.softmax(F.prelu(-r, torch.tensor([0.3])) @ h, dim=1)
        assert torch.allclose(h_loc, run(module.local, x, 0.1), atol=1e-6)
        assert torch.allclose(h_s, run(module.smooth, x_k, 0.1), atol=1e-6)
        assert torch.allclose(out, (pos - neg + h) / 2, atol=1e-6)
    assert [tuple(layer.weight.shape) for layer in module.local] == [(4, 3), (4, 4), (3, 4)]
    assert [tuple(layer.weight.shape) for layer in module.prop] == [(4, 9), (4, 4), (3, 4)]

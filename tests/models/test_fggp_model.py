"""FGGP's model pieces against written-out computations on small cases."""

import math

import torch
import torch.nn.functional as F

from fgl_flower.methods.fggp import BACKBONES
from fgl_flower.models.acmgcn import ACMGCN, acm_low_pass
from fgl_flower.models.fggp import (
    BODIES,
    Augmentor,
    FGGPNet,
    dense_normalize,
    knn_edges,
    prototype_contrast,
    prototype_scores,
    prototype_weights,
    reconstruction_loss,
    to_dense,
)
from fgl_flower.models.node import GCN
from fgl_flower.models.sparse import gcn_adjacency


def test_the_net_on_the_clean_graph_is_the_library_gcn():
    torch.manual_seed(0)
    x, ei = torch.rand(12, 5), torch.randint(0, 12, (2, 30))
    net, gcn = FGGPNet(5, 8, 3), GCN(5, 8, 3)
    gcn.load_state_dict(
        {k[len("body.") :]: v for k, v in net.state_dict().items() if k.startswith("body.")}
    )
    net.eval(), gcn.eval()
    assert torch.allclose(net(x, ei), gcn(x, ei), atol=1e-6)
    assert net.head == "body.convs.1."
    # the dense copy of the same propagation matrix gives the same logits
    adj = gcn_adjacency(ei, 12).to_dense()
    assert torch.allclose(net.propagate(x, adj, adj)[1], net(x, ei), atol=1e-6)


def test_the_acm_body_is_acmgcn_with_its_filter_given():
    torch.manual_seed(0)
    x, ei = torch.rand(12, 5), torch.randint(0, 12, (2, 30))
    net, acm = FGGPNet(5, 8, 3, backbone="acmgcn"), ACMGCN(5, 8, 3)
    acm.load_state_dict(
        {k[len("body.") :]: v for k, v in net.state_dict().items() if k.startswith("body.")}
    )
    net.eval(), acm.eval()
    assert torch.allclose(net(x, ei), acm(x, ei), atol=1e-6)
    assert net.head == "body.classifier."
    # a sampled 0/1 graph with its diagonal set: the row-normalised filter acm_low_pass builds
    sym = torch.zeros(12, 12)
    sym[ei[1], ei[0]] = 1.0
    sym = ((sym + sym.t()) > 0).float().fill_diagonal_(1.0)
    loops = sym.nonzero().t()
    off = loops[:, loops[0] != loops[1]]
    want = acm_low_pass(off.flip(0), 12).to_dense()
    assert torch.allclose(net.dense_propagation(sym), want, atol=1e-6)
    assert set(BODIES) == set(BACKBONES)


def test_knn_edges_point_from_the_node_to_its_neighbours():
    z = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    e = knn_edges(z, 1)
    assert e.tolist() == [[0, 1, 2, 3], [1, 0, 3, 2]]  # i -> j for i's nearest j (the code's)
    assert knn_edges(z, 10).size(1) == 4 * 3  # k capped at N - 1
    a = to_dense(torch.tensor([[0], [2]]), 4)
    assert a[0, 2] == 1 and a.sum() == 1  # A[src, dst], the code's adj_orig


def test_dense_normalize_is_symmetric_degree_scaling():
    a = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    d = a.sum(1)
    out = dense_normalize(a)
    assert torch.allclose(out[0, 1], 1 / torch.sqrt(d[0] * d[1]))
    assert (out[2] == 0).all()


def test_the_sampled_view_is_a_symmetric_0_1_graph_with_gradients():
    torch.manual_seed(0)
    aug = Augmentor(4, 3)
    x = torch.rand(6, 4)
    a_aug = torch.eye(6)
    a_aug[0, 1] = a_aug[1, 0] = 1
    scores = aug.scores(x, dense_normalize(a_aug))
    assert scores.shape == (6, 6) and (scores >= 0).all()
    view = Augmentor.sample(scores, a_aug, 0.5, 1.0)
    hard = view.detach()
    assert torch.allclose(view, view.t()) and set(hard.unique().tolist()) <= {0.0, 1.0}
    assert (torch.diagonal(hard) == 1).all()  # forward: a 0/1 graph, every node with itself
    dense_normalize(
        view
    ).sum().backward()  # backward: the relaxed sample's gradient reaches the encoder
    assert aug.w1.weight.grad.abs().sum() > 0 and aug.w2.weight.grad.abs().sum() > 0


def test_reconstruction_loss_is_gaugs_weighted_bce():
    s = torch.tensor([[2.0, -1.0], [0.5, 3.0]])
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    n2, m = 4.0, 2.0
    pw = (n2 - m) / m
    manual = (
        -sum(
            pw * a[i, j] * math.log(torch.sigmoid(s[i, j]))
            + (1 - a[i, j]) * math.log(1 - torch.sigmoid(s[i, j]))
            for i in range(2)
            for j in range(2)
        )
        / 4
    )
    assert math.isclose(
        float(reconstruction_loss(s, a)), n2 / (2 * (n2 - m)) * manual, rel_tol=1e-5
    )


def test_prototype_weights_use_labels_on_training_nodes_and_confidence_elsewhere():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 1.0, 0.0], [5.0, 0.0, 0.0]])
    y = torch.tensor([2, 1, 0, 0])
    train = torch.tensor([True, False, False, True])
    w, classes = prototype_weights(logits, y, train, 3)
    assert classes.tolist() == [0, 1, 2]  # node 0 counts for its label 2, not its argmax 0
    p = F.softmax(logits, 1).max(1).values
    assert torch.allclose(w[0], torch.tensor([0, 0, 0, 1 / (1 + 1e-6)]))
    assert torch.allclose(w[1], torch.tensor([0, p[1], p[2], 0]) / (p[1] + p[2] + 1e-6))
    assert torch.allclose(w[2], torch.tensor([1 / (1 + 1e-6), 0, 0, 0]))


def test_prototype_contrast_written_out():
    torch.manual_seed(2)
    u, v, tau = torch.randn(3, 4), torch.randn(3, 4), 0.5
    un, vn = F.normalize(u, dim=1), F.normalize(v, dim=1)
    total = 0.0
    for i in range(3):
        logits = (
            [float(un[i] @ vn[i]) / tau]
            + [float(un[i] @ un[j]) / tau for j in range(3) if j != i]
            + [float(un[i] @ vn[j]) / tau for j in range(3) if j != i]
        )
        total += -logits[0] + math.log(sum(math.exp(v) for v in logits))
    assert math.isclose(float(prototype_contrast(u, v, tau)), total / 3, rel_tol=1e-5)
    assert float(prototype_contrast(u[:1], v[:1], tau)) == 0.0


def test_prototype_scores_are_a_softmax_weighted_vote_of_the_nearest_prototypes():
    memory = F.normalize(torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]]), dim=1)
    classes = torch.tensor([0, 1, 1])
    z = torch.tensor([[1.0, 0.1]])
    sim = F.normalize(z, dim=1) @ memory.t()
    top = sim[0, :2]  # k = 2: prototypes 0 and 1
    w = F.softmax(top / 0.1, dim=0)
    out = prototype_scores(z, memory, classes, 3, k=2)
    assert torch.allclose(out[0], torch.tensor([w[0] + 1e-5, w[1] + 1e-5, 1e-5]))
    assert prototype_scores(z, memory, classes, 3, k=50).shape == (1, 3)  # k capped at the memory

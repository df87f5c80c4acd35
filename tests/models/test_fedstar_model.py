"""FedStar's ``GIN_dc`` against a dense re-derivation from its equations (eval mode): per layer
``x <- ReLU(MLP((A + I) [x || s]))`` and ``s <- tanh(P s W^T + b)`` with GCN's
``P = D^-1/2 (A + I) D^-1/2``, from ``x0 = W_x x``, ``s0 = W_s s_v``; then ``W_hp [x || s]``
summed per graph, ``ReLU(W_post . + b)`` and ``W_cls``. Written from the formulas, not from
the module, so a changed layer order, input or normalisation fails it."""

import torch

from fgl_flower.models.fedstar import FedStarGIN


def two_graphs() -> tuple[torch.Tensor, torch.Tensor]:
    """A triangle (nodes 0-2) and a path of three (nodes 3-5), both directions stored."""
    und = [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5)]
    edge_index = torch.tensor(
        [[u for u, v in und] + [v for u, v in und], [v for u, v in und] + [u for u, v in und]]
    )
    return edge_index, torch.tensor([0, 0, 0, 1, 1, 1])


def reference(m: FedStarGIN, x, edge_index, batch, stc) -> torch.Tensor:
    n = x.size(0)
    a = torch.zeros(n, n)
    a[edge_index[1], edge_index[0]] = 1.0  # row v sums its in-neighbours
    a_hat = a + torch.eye(n)
    d = a_hat.sum(1).pow(-0.5)
    p = d[:, None] * a_hat * d[None, :]
    s = stc @ m.struct.init.weight.T + m.struct.init.bias
    h = x @ m.feat.init.weight.T + m.feat.init.bias
    for gin, gcn in zip(m.feat.convs, m.struct.convs):
        lin1, lin2 = gin.nn[0], gin.nn[2]
        z = a_hat @ torch.cat([h, s], -1)  # GIN, eps = 0: the node itself plus its neighbours
        h = torch.relu(torch.relu(z @ lin1.weight.T + lin1.bias) @ lin2.weight.T + lin2.bias)
        s = torch.tanh(p @ (s @ gcn.lin.weight.T) + gcn.bias)
    v = torch.cat([h, s], -1) @ m.head.proj.weight.T + m.head.proj.bias
    g = torch.zeros(int(batch.max()) + 1, v.size(1)).index_add_(0, batch, v)
    return (
        torch.relu(g @ m.head.post.weight.T + m.head.post.bias) @ m.head.cls.weight.T
        + m.head.cls.bias
    )


def test_forward_equals_the_equations():
    torch.manual_seed(0)
    m = FedStarGIN(5, 8, 3, num_layers=3, dropout=0.5).eval()
    edge_index, batch = two_graphs()
    x, stc = torch.randn(6, 5), torch.rand(6, 32)
    with torch.no_grad():
        out = m(x, edge_index, batch, stc)
        assert out.shape == (2, 3)
        assert torch.allclose(out, reference(m, x, edge_index, batch, stc), atol=1e-5)
        m.struct.convs[0].bias.add_(0.1)  # the comparison is sensitive to the shared channel
        assert not torch.allclose(m(x, edge_index, batch, stc), out, atol=1e-3)


def test_clients_seeded_alike_share_the_structure_channel_whatever_their_data():
    """Built from the same seed with different feature and class counts, two clients start
    from the same shared (``struct.``) weights: FedStar's broadcast initial encoder."""
    torch.manual_seed(3)
    a = FedStarGIN(7, 16, 2)
    torch.manual_seed(3)
    b = FedStarGIN(40, 16, 6)
    sa, sb = a.state_dict(), b.state_dict()
    shared = [k for k in sa if k.startswith("struct.")]
    assert shared and all(torch.equal(sa[k], sb[k]) for k in shared)


def test_the_acm_feature_channel_is_acmgcns_layer_on_x_and_s():
    """``FedStarNodeACM``: the structure channel and head are FedStar's, the feature channel
    is ACM-GCN's layer on ``[x || s]`` with its low-pass filter; built from the same seed the
    shared channel equals the GIN variant's."""
    from fgl_flower.models.acmgcn import ACMConv, acm_low_pass
    from fgl_flower.models.fedstar import FedStarNodeACM, FedStarNodeGIN

    torch.manual_seed(1)
    gin = FedStarNodeGIN(5, 8, 3, num_layers=2, dropout=0.0)
    torch.manual_seed(1)
    m = FedStarNodeACM(5, 8, 3, num_layers=2, dropout=0.0).eval()
    assert all(isinstance(c, ACMConv) for c in m.feat.convs)
    shared = {k: v for k, v in m.state_dict().items() if k.startswith("struct.")}
    assert all(torch.equal(v, gin.state_dict()[k]) for k, v in shared.items())
    edge_index, _ = two_graphs()
    x = torch.randn(6, 5)
    with torch.no_grad():
        from fgl_flower.models.structure import structure_encoding

        s_maps = m.struct(structure_encoding(edge_index, 6), m.adjacencies(edge_index, 6)[1])
        low = acm_low_pass(edge_index, 6)
        h = m.feat.init(x)
        for conv, s in zip(m.feat.convs, s_maps):
            h = torch.relu(conv(torch.cat([h, s], -1), low))
        expect = m.head(torch.cat([h, s_maps[-1]], -1))
        assert torch.allclose(m(x, edge_index), expect, atol=1e-6)

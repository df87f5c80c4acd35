import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.nn import SGConv

from fgl_flower.errors import ConfigError, UnknownNameError
from fgl_flower.models import MODELS, build_model

NODE_MODELS = [n for n, s in MODELS.items() if s.task == "node"]


@pytest.mark.parametrize("name", NODE_MODELS)
def test_node_models_accept_dense_and_sparse_features(name):
    torch.manual_seed(0)
    x = (torch.rand(10, 12) < 0.2).float()
    ei = torch.tensor([[0, 1, 2, 3, 4, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0, 1, 2, 3, 4]])
    model = build_model(name, "node", 12, 3, 16, 2, 0.0).eval()
    dense = model(x, ei)
    assert dense.shape == (10, 3)
    torch.testing.assert_close(model(x.to_sparse(), ei), dense, atol=1e-5, rtol=1e-5)


def test_sgc_equals_pyg_sgconv():
    torch.manual_seed(0)
    x, ei = torch.randn(6, 5), torch.tensor([[0, 1, 2, 3, 1, 2], [1, 2, 3, 4, 0, 1]])
    model = build_model("sgc", "node", 5, 3, 8, 2, 0.0)
    ref = SGConv(5, 3, K=2)
    ref.load_state_dict(model.conv.state_dict())
    torch.testing.assert_close(model(x, ei), ref(x, ei), atol=1e-6, rtol=1e-5)


def test_gin_shared_convs_identical_across_input_widths():
    torch.manual_seed(0)
    a = build_model("gin", "graph", 7, 2, 32, 3, 0.5)
    torch.manual_seed(0)
    b = build_model("gin", "graph", 53, 6, 32, 3, 0.5)
    for k, v in a.state_dict().items():
        if k.startswith("convs."):
            assert torch.equal(v, b.state_dict()[k])
    g = Batch.from_data_list(
        [Data(x=torch.randn(4, 7), edge_index=torch.tensor([[0, 1], [1, 0]]))] * 3
    )
    assert a(g.x, g.edge_index, g.batch).shape == (3, 2)


def test_task_mismatch_and_unknown_model():
    with pytest.raises(ConfigError, match="graph-level"):
        build_model("gin", "node", 4, 2, 8, 2, 0.5)
    with pytest.raises(UnknownNameError, match="Did you mean 'gcn'"):
        build_model("gcnn", "node", 4, 2, 8, 2, 0.5)


# -- GCN fast path and FedSpray's encoder ----------------------------------------------------
def _graph(n=40, f=30, density=0.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(n, f, generator=g) < density).float() * torch.rand(n, f, generator=g)
    ei = torch.randint(0, n, (2, 4 * n), generator=g)
    ei = torch.cat([ei, ei.flip(0)], 1)  # undirected, with duplicates
    return x, ei


@pytest.mark.parametrize("sparse", [False, True])
def test_gcn_equals_stacked_pyg_gcnconv(sparse):
    from torch_geometric.nn import GCNConv

    from fgl_flower.models import GCN

    x, ei = _graph()
    torch.manual_seed(0)
    model = GCN(30, 16, 4, num_layers=2, dropout=0.0)
    ref1, ref2 = GCNConv(30, 16), GCNConv(16, 4)
    ref1.load_state_dict(model.convs[0].state_dict())
    ref2.load_state_dict(model.convs[1].state_dict())
    expect = ref2(torch.relu(ref1(x, ei)), ei)
    xin = x.to_sparse() if sparse else x
    out = model(xin, ei)
    torch.testing.assert_close(out, expect, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    expect.sum().backward()
    torch.testing.assert_close(
        model.convs[0].lin.weight.grad, ref1.lin.weight.grad, rtol=1e-4, atol=1e-5
    )
    # Another graph through the same module is not served from the cache.
    x2, ei2 = _graph(seed=1)
    ref = ref2(torch.relu(ref1(x2, ei2)), ei2)
    torch.testing.assert_close(
        model(x2.to_sparse() if sparse else x2, ei2), ref, rtol=1e-5, atol=1e-5
    )


def test_feature_matmul_sparse_matches_dense_with_gradient():
    from fgl_flower.models.sparse import GraphCache, feature_matmul

    x, _ = _graph()
    w1 = torch.randn(30, 8, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_(True)
    cache = GraphCache()
    out = feature_matmul(x.to_sparse(), w1, cache)
    torch.testing.assert_close(out, x @ w2)
    (out**2).sum().backward()
    ((x @ w2) ** 2).sum().backward()
    torch.testing.assert_close(w1.grad, w2.grad)


def test_uniform01_init_and_unknown_init():
    from fgl_flower.errors import UnknownNameError

    model = build_model("gcn", "node", 10, 3, 8, 2, 0.0, init="uniform01")
    assert all(bool(((p >= 0) & (p < 1)).all()) for p in model.parameters())
    with pytest.raises(UnknownNameError, match="model-init"):
        build_model("gcn", "node", 10, 3, 8, 2, 0.0, init="xavier-ish")


def test_feature_structure_encoder_shapes_and_initial_proxies():
    from fgl_flower.models.fedspray import FeatureStructureEncoder, initial_proxies

    enc = FeatureStructureEncoder(30, 4, proxy_dim=6)
    x, _ = _graph()
    e = enc.embedding(x.to_sparse())
    assert e.shape == (40, 6) and bool((e >= 0).all())
    torch.testing.assert_close(e, enc.embedding(x))
    assert enc.teacher_logits(e, torch.zeros(40, 6)).shape == (40, 4)
    assert enc.projector_logits(e).shape == (40, 4)
    assert enc.embed.weight.shape == (30, 6)  # stored [in, out] as in the official MLPLayer
    bound = 1 / 6**0.5
    assert float(enc.embed.weight.abs().max()) <= bound
    S0 = initial_proxies(3, 2)
    torch.testing.assert_close(S0, torch.tensor([[0.0, 0.0], [0.01, 0.01], [0.02, 0.02]]))

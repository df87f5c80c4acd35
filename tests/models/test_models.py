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
    g = Batch.from_data_list([Data(x=torch.randn(4, 7), edge_index=torch.tensor([[0, 1], [1, 0]]))] * 3)
    assert a(g.x, g.edge_index, g.batch).shape == (3, 2)


def test_task_mismatch_and_unknown_model():
    with pytest.raises(ConfigError, match="graph-level"):
        build_model("gin", "node", 4, 2, 8, 2, 0.5)
    with pytest.raises(UnknownNameError, match="Did you mean 'gcn'"):
        build_model("gcnn", "node", 4, 2, 8, 2, 0.5)

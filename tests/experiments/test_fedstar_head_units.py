"""experiments/feddense/fedstar_head_units.py: the statistics behind the FedStar COLLAB finding."""

import pytest
import torch
from torch_geometric.data import Batch, Data

from fgl_flower.models.fedstar import FedStarGIN


@pytest.fixture(scope="module")
def head_stats(experiment_script):
    return experiment_script("feddense/fedstar_head_units.py").head_stats


def _batch(num_graphs: int = 6) -> Batch:
    gen = torch.Generator().manual_seed(0)
    graphs = []
    for i in range(num_graphs):
        n = 4 + i
        ring = torch.arange(n)
        edge_index = torch.stack(
            [torch.cat([ring, (ring + 1) % n]), torch.cat([(ring + 1) % n, ring])]
        )
        graphs.append(
            Data(
                x=torch.randn(n, 5, generator=gen),
                edge_index=edge_index,
                stc_enc=torch.rand(n, 32, generator=gen),
                y=torch.tensor([i % 3]),
            )
        )
    return Batch.from_data_list(graphs)


def test_a_freshly_initialised_head_has_live_units(head_stats):
    torch.manual_seed(0)
    model = FedStarGIN(5, 8, 3, num_layers=2, dropout=0.5)
    st = head_stats(model, [_batch()])
    assert 0 < st["alive"] <= 8 and st["h_abs"] > 0 and st["g_abs"] > 0 and 0 <= st["acc"] <= 1


def test_a_head_whose_units_are_all_negative_is_dead_and_predicts_one_class(head_stats):
    torch.manual_seed(0)
    model = FedStarGIN(5, 8, 3, num_layers=2, dropout=0.5)
    with torch.no_grad():
        model.head.post.bias.fill_(-1e6)
        model.head.cls.bias.copy_(torch.tensor([0.0, 0.0, 1.0]))  # constant logits favour class 2
    st = head_stats(model, [_batch()])
    assert st["alive"] == 0 and st["acc"] == pytest.approx(2 / 6)  # y = 0, 1, 2, 0, 1, 2

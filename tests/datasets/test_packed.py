"""PackedGraphs must feed the model what PyG's DataLoader feeds it, in the same order and
with the same draws on torch's global generator."""

import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from fgl_flower.datasets.packed import PackedGraphs, batch_order


def _graphs(num: int = 11) -> list[Data]:
    gen = torch.Generator().manual_seed(0)
    graphs = []
    for i in range(num):
        n = 1 + i % 5  # 1-node graphs included
        e = 0 if i % 4 == 0 else 2 * n  # and graphs without edges
        graphs.append(
            Data(
                x=torch.randn(n, 3, generator=gen),
                edge_index=torch.randint(0, n, (2, e), generator=gen),
                y=torch.tensor([i]),
                stc_enc=torch.randn(n, 2, generator=gen),
            )
        )
    return graphs


@pytest.mark.parametrize("order", [[0, 1, 2], [7, 3, 10, 0, 4], [4], list(range(11))[::-1]])
def test_batch_equals_pyg_collate(order):
    graphs = _graphs()
    got = PackedGraphs(graphs, ("stc_enc",)).batch(torch.tensor(order))
    ref = Batch.from_data_list([graphs[i] for i in order])
    for name in ("x", "edge_index", "batch", "y", "stc_enc"):
        assert torch.equal(getattr(got, name) if name != "stc_enc" else got[name], ref[name]), name
    assert got.num_graphs == ref.num_graphs == len(order)


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("batch_size", [4, 128])
def test_batches_follow_the_dataloader_and_its_random_draws(shuffle, batch_size):
    graphs = _graphs()
    torch.manual_seed(3)
    ref = [b.y.tolist() for b in DataLoader(graphs, batch_size=batch_size, shuffle=shuffle)]
    ref_state = torch.get_rng_state()
    torch.manual_seed(3)
    got = [b.y.tolist() for b in PackedGraphs(graphs).batches(batch_size, shuffle)]
    assert got == ref
    assert torch.equal(torch.get_rng_state(), ref_state)


def test_an_empty_split_draws_like_an_empty_loader():
    torch.manual_seed(0)
    assert list(DataLoader([], batch_size=4)) == []
    ref_state = torch.get_rng_state()
    torch.manual_seed(0)
    assert list(PackedGraphs([]).batches(4, shuffle=False)) == []
    assert torch.equal(torch.get_rng_state(), ref_state)
    assert batch_order(0, 4, shuffle=True) == ()


def test_one_label_per_graph_is_required():
    g = Data(
        x=torch.zeros(3, 1),
        edge_index=torch.zeros(2, 0, dtype=torch.long),
        y=torch.zeros(3, dtype=torch.long),
    )
    with pytest.raises(ValueError, match="one label y per graph"):
        PackedGraphs([g])


@pytest.mark.gpu
def test_batches_are_cut_on_the_device():
    graphs = _graphs()
    got = PackedGraphs(graphs, ("stc_enc",), "cuda").batch(torch.tensor([5, 1, 8]))
    ref = Batch.from_data_list([graphs[i] for i in (5, 1, 8)])
    assert got.x.is_cuda and torch.equal(got.edge_index.cpu(), ref.edge_index)

"""Catalog options of node datasets."""

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.datasets import load_client_data
from fgl_flower.datasets.source import load_dataset
from fgl_flower.parse import parse_run_config


def test_undirected_adds_the_reverse_edges_of_a_directed_graph(data_root):
    directed = load_dataset("Texas", data_root)
    both = load_dataset("Texas", data_root, {"undirected": True})
    assert not directed.is_undirected() and both.is_undirected()
    assert both.edge_index.size(1) > directed.edge_index.size(1)


def test_data_undirected_reaches_the_clients(data_root):
    flat = load_app_defaults()
    flat.update(
        {
            "dataset": "Texas",
            "partition": "louvain",
            "num-clients": 3,
            "data-root": str(data_root),
            "data.undirected": "true",
        }
    )
    client = load_client_data(parse_run_config(flat).data_config(), 0)
    from torch_geometric.utils import is_undirected

    assert is_undirected(client.data.edge_index, num_nodes=client.data.num_nodes)

import pytest


@pytest.fixture
def cora(flat, data_root):
    """The app's defaults on Cora, Louvain, 10 clients, 3 rounds (real data for the clients'
    mechanism tests)."""
    flat.update(
        {
            "dataset": "Cora",
            "data-root": str(data_root),
            "partition": "louvain",
            "num-clients": 10,
            "num-rounds": 3,
        }
    )
    return flat

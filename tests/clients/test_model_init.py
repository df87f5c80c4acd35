"""``model-init`` reaches the model every client trains, or the run stops before training:
each registered method's client is built with ``model-init = uniform01`` (the list comes
from the registry, so a new method is covered without editing this test)."""

import pytest
import torch
from flwr.app import Context, RecordDict
from methods_data import NEEDS, for_method

from fgl_flower.client_app import build_client
from fgl_flower.clients.learner import Learner
from fgl_flower.errors import ConfigError
from fgl_flower.methods import METHODS


def _context(flat):
    return Context(
        run_id=0,
        node_id=1,
        node_config={"partition-id": 0, "num-partitions": int(flat["num-clients"])},
        state=RecordDict(),
        run_config=flat,
    )


@pytest.mark.parametrize("method", sorted(name for name, _ in METHODS.items()))
def test_model_init_reaches_the_trained_model(method, flat, request):
    for_method(flat, method, request)
    flat.update(NEEDS.get(method, {}), **{"model-init": "uniform01"})
    if METHODS.get(method).own_init:
        with pytest.raises(ConfigError, match="model-init='uniform01' would not reach it"):
            build_client(_context(flat))
        return
    client = build_client(_context(flat))
    learners = [v for v in vars(client).values() if isinstance(v, Learner)]  # FedSpray's GNN
    if not learners:  # O-pFGL builds its model in train, with seeded_model (the run's backbone)
        pytest.skip(f"{method}'s client keeps no learner between messages")
    for learner in learners:
        model = getattr(
            learner.model, "backbone", learner.model
        )  # FedFA: the backbone in its FFA wrapper
        params = torch.cat([p.detach().flatten() for p in model.parameters()])
        assert params.min() >= 0.0 and params.max() < 1.0

"""S2FGL server: the repository from uploaded prototypes, reproducible anchor sampling."""

import numpy as np
import torch
from flwr.app import ArrayRecord, RecordDict

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.clients.s2fgl import PROTOTYPES
from fgl_flower.models.s2fgl import anchor_subsets, build_repository
from fgl_flower.parse import parse_run_config
from fgl_flower.strategies.s2fgl import S2FGLStrategy


def strategy(num_clients=10, seed=0):
    flat = load_app_defaults()
    flat.update({"method": "s2fgl", "model": "acmgcn", "num-clients": num_clients, "seed": seed})
    return S2FGLStrategy(parse_run_config(flat))


def uploads(m=10, c=3, d=4):
    torch.manual_seed(0)
    protos, counts = torch.randn(m, c, d), torch.randint(0, 5, (m, c)).float()
    return (
        protos,
        counts,
        [
            RecordDict({PROTOTYPES: ArrayRecord({"prototypes": p, "counts": n})})
            for p, n in zip(protos, counts)
        ],
    )


def test_repository_is_the_count_weighted_mean_over_the_seeded_anchor_subsets():
    protos, counts, contents = uploads()
    repo = strategy().repository_from(5, contents)
    assert repo.shape == (4 * 3, 4)
    from fgl_flower.clients.base import derive_seed

    subsets = anchor_subsets(10, 4, 0.7, np.random.default_rng(derive_seed(0, 5, "anchors")))
    assert torch.allclose(repo, build_repository(protos, counts, subsets))


def test_anchor_draws_depend_on_seed_and_round_only():
    _, _, contents = uploads()
    a, b = strategy().repository_from(2, contents), strategy().repository_from(2, contents)
    assert torch.equal(a, b)
    assert not torch.equal(a, strategy().repository_from(3, contents))
    assert not torch.equal(a, strategy(seed=1).repository_from(2, contents))


def weight_replies(sizes):
    from flwr.app import Message, MetricRecord

    from fgl_flower.protocol import METRICS, NUM_EXAMPLES

    return [
        Message(
            RecordDict({METRICS: MetricRecord({NUM_EXAMPLES: n})}),
            dst_node_id=1,
            message_type="train",
        )
        for n in sizes
    ]


def test_weights_are_the_clients_own_unless_the_code_bug_is_asked_for(messages):
    sizes = [float(n) for n in range(10, 20)]
    assert strategy().aggregation_weights(3, weight_replies(sizes)) == sizes
    flat = load_app_defaults()
    flat.update(
        {"method": "s2fgl", "model": "acmgcn", "num-clients": 10, "s2fgl.shuffle-weights": True}
    )
    shuffled = S2FGLStrategy(parse_run_config(flat))
    a, b = (shuffled.aggregation_weights(r, weight_replies(sizes)) for r in (3, 4))
    assert sorted(a) == sizes and a != sizes and a != b
    assert a == shuffled.aggregation_weights(3, weight_replies(sizes))  # seeded by round

"""Run-config changes that let a test run any registered method (imported by tests)."""

from __future__ import annotations

import pytest

from fgl_flower.methods import METHODS

#: What a method needs besides the app defaults to run in a test: S2FGL and FedFA their backbone, O-pFGL
#: DENSE and Co-Boost (one-shot) one round and short optimisations (minutes a run by default),
#: FedSage+, FedDEP and AdaFGL fewer
#: rounds in their first phase than the tests' rounds.
NEEDS = {
    "s2fgl": {"model": "acmgcn", "hidden": 16},
    "fedfa": {"model": "acmgcn", "hidden": 16},
    "opfgl": {"num-rounds": 1, "opfgl.condense-steps": 20, "opfgl.max-steps": 100},
    # FedSage+: three generator rounds (after two local epochs; the resume test breaks into
    # the third), then a classifier round
    "fedsageplus": {"num-rounds": 4, "fedsageplus.gen-rounds": 3, "fedsageplus.pretrain-epochs": 2},
    # FedDEP: as FedSage+ (short encoder and clustering: 5 + 10 steps)
    "feddep": {
        "num-rounds": 4,
        "model": "graphsage",
        "feddep.gen-rounds": 3,
        "feddep.pretrain-epochs": 2,
        "feddep.encoder-epochs": 5,
        "feddep.kmeans-iters": 10,
    },
    # AdaFGL: two FedAvg rounds build the extractor, two personalized rounds follow (the resume
    # test breaks into the first of them)
    "adafgl": {"num-rounds": 4, "adafgl.fed-rounds": 2},
    # FGGP classifies the last hidden layer, which two layers leave without a dropout before
    # it: three, so that eval-dropout has a dropout to keep
    "fggp": {"num-layers": 3},
    # DENSE (one-shot): a short distillation (200 epochs of 30 generator steps by default)
    "dense": {
        "num-rounds": 1,
        "dense.epochs": 2,
        "dense.g-steps": 2,
        "dense.num-gen": 16,
        "dense.topk": 3,
    },
    # FedLoG: short first-round pretraining (100 generator epochs of 20 random GNNs by default)
    "fedlog": {
        "model": "graphsage",
        "fedlog.gen-epochs": 2,
        "fedlog.gen-inits": 2,
        "fedlog.pre-epochs": 3,
        "fedlog.num-proto": 3,
    },
    # FedGL: its pseudo-graph on (off by default), so that resume, sampling, fused evaluation,
    # reused clients and eval-dropout cover it too
    "fedgl": {"fedgl.graph-weight": 0.5},
    "coboost": {
        "num-rounds": 1,
        "coboost.epochs": 3,
        "coboost.g-steps": 2,
        "coboost.num-gen": 16,
        "coboost.topk": 3,
    },
}

#: A small graph-classification federation (MUTAG, 188 graphs) for graph-only methods.
GRAPH_TASK = {
    "dataset": "MUTAG",
    "partition": "dirichlet",
    "model": "gin",
    "num-layers": 2,
    "hidden": 16,
    "split-mode": "stratified",
    "data.dirichlet.min-size": 5,
}


def graph_only(method: str) -> bool:
    return "node" not in METHODS.get(method).tasks


def for_method(flat: dict, method: str, request: pytest.FixtureRequest) -> dict:
    """``flat`` with ``method``, on MUTAG if the method has no node task (skips the test
    without the offline data)."""
    flat["method"] = method
    if graph_only(method):
        flat.update(GRAPH_TASK, **{"data-root": str(request.getfixturevalue("data_root"))})
    return flat

"""Client sampling by partition id and fused evaluation."""

import pytest
from methods_data import NEEDS, for_method
from run_records import rounds

from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods import METHODS
from fgl_flower.parse import parse_run_config
from fgl_flower.strategies.base import FGLStrategy
from fgl_flower.strategies.sampling import sample_clients, sample_size


def test_sample_size_follows_flowers_rule():
    assert sample_size(1000, 0.05, 1) == 50
    assert sample_size(100, 0.29, 1) == 29  # not 28: fraction * K rounds up from 28.999...
    assert sample_size(10, 0.01, 2) == 2
    assert sample_size(10, 1.0, 1) == 10
    assert sample_size(3, 0.5, 5) == 3


def test_same_seed_same_clients_other_round_or_seed_other_clients():
    a = sample_clients(1000, 0.05, 1, seed=0, server_round=3)
    assert a == sample_clients(1000, 0.05, 1, seed=0, server_round=3)
    assert a == sorted(set(a)) and len(a) == 50 and all(0 <= p < 1000 for p in a)
    assert a != sample_clients(1000, 0.05, 1, seed=0, server_round=4)
    assert a != sample_clients(1000, 0.05, 1, seed=1, server_round=3)
    assert sample_clients(7, 1.0, 1, seed=0, server_round=1) == list(range(7))


def test_partial_participation_trains_and_evaluates_the_sampled_clients(flat, tmp_path):
    flat.update({"method": "fedavg", "num-clients": 6, "num-rounds": 3, "fraction-train": 0.5})
    run_inprocess(flat)
    for r in rounds(tmp_path / "run"):
        expected = sample_clients(6, 0.5, 1, 0, r["round"])
        assert r["train_clients"] == expected
        # the global model of round r is evaluated by the clients that train in round r+1
        assert r["eval_clients"] == sample_clients(6, 0.5, 1, 0, r["round"] + 1)
        assert sorted(int(k) for k in r["clients"]) == r["eval_clients"]
        assert r["messages_down"] == (6 if r["round"] == 3 else 3)  # + the final evaluation


def test_one_shot_opfgl_refuses_partial_participation(flat):
    flat.update({"method": "opfgl", "num-rounds": 1, "fraction-train": 0.5})
    with pytest.raises(ConfigError, match="one-shot.*fraction-train=1"):
        parse_run_config(flat)


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("fraction-train", 0.0, "fraction-train must be in"),
        ("fraction-train", 1.5, "fraction-train must be in"),
        ("min-train-clients", 9, "exceeds num-clients"),
        ("cpus-per-client", 0, "cpus-per-client must be at least 1"),
        ("gpus-per-client", -1.0, "gpus-per-client must be non-negative"),
    ],
)
def test_bad_participation_and_resource_values(flat, key, value, match):
    with pytest.raises(ConfigError, match=match):
        parse_run_config(dict(flat, **{key: value}))


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_fused_evaluation_gives_the_same_numbers(flat, method, fraction, tmp_path, request):
    """Evaluating round r in round r+1's train message equals a separate evaluate message;
    with ``fraction-train = 0.5`` it also shows that every multi-round method runs on sampled
    clients."""
    if method == "opfgl" and fraction < 1:
        pytest.skip("one-shot")
    for_method(flat, method, request)
    flat.update(
        {
            "num-clients": 4,
            "num-rounds": 3,
            "fraction-train": fraction,
            **({"fedavg.finetune-epochs": 2} if method == "fedavg" else {}),
            **NEEDS.get(method, {}),
        }
    )
    fused = run_inprocess(dict(flat, **{"out-dir": str(tmp_path / "f")}))
    plain = run_inprocess(dict(flat, **{"fused-evaluation": False, "out-dir": str(tmp_path / "p")}))
    assert fused["rounds_completed"] == plain["rounds_completed"] == int(flat["num-rounds"])
    for key in ("final", "best_val", "last"):
        assert fused[key] == plain[key]
    a, b = rounds(tmp_path / "f"), rounds(tmp_path / "p")
    assert [r["clients"] for r in a] == [r["clients"] for r in b]
    assert [r["train"] for r in a] == [r["train"] for r in b]
    strategy = METHODS.get(method).strategy_class()
    if strategy.evaluate_with_next_train and not strategy.evaluates_in_train:
        sent = [sum(r["messages_down"] for r in rs) for rs in (a, b)]
        per_round = len(a[0]["train_clients"])
        num_rounds = int(flat["num-rounds"])
        evaluated = sum("eval" in r for r in a)  # FedSage+ evaluates no generator round
        assert evaluated == sum("eval" in r for r in b)
        assert sent[1] - sent[0] == (evaluated - 1) * per_round  # E - 1 evaluate batches fewer
        if strategy.prepare_round is FGLStrategy.prepare_round:  # no exchange but these
            assert sent == [
                (num_rounds + 1) * per_round,
                2 * num_rounds * per_round,
            ]  # R + 1 batches instead of 2R

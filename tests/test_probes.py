"""fgl_flower.probes: what counts as dead, the per-round summary, and the watcher's state."""

import json
import math

from fgl_flower.probes import Probe, ProbeWatch, collect_probes, split_probes, summarize_probe


def test_dead_bounds_and_undefined_values():
    low = Probe("a", "x", dead_below=0.5)
    assert low.dead(0.4) and not low.dead(0.5) and low.dead(float("nan")) and low.dead(None)
    high = Probe("b", "x", dead_above=0.99)
    assert high.dead(1.0) and not high.dead(0.99)
    free = Probe("c", "x")  # recorded only: never dead, also when undefined
    assert not free.dead(float("nan")) and not free.dead(None) and not free.dead(-1e9)


def test_collect_splits_probe_keys_and_summarizes_per_client():
    rest, probes = split_probes({"val_acc": 0.5, "probe.latent.nonempty": 1.0})
    assert rest == {"val_acc": 0.5} and probes == {"latent.nonempty": 1.0}
    out = collect_probes(
        {1: {"probe.x": 2.0}, 0: {"probe.x": 1.0, "probe.y": float("nan")}, 2: {"acc": 1.0}}
    )
    assert out["x"] == {"mean": 1.5, "min": 1.0, "max": 2.0, "clients": {"0": 1.0, "1": 2.0}}
    assert math.isnan(out["y"]["mean"]) and list(out["y"]["clients"]) == ["0"]
    assert list(summarize_probe({"server": 3.0, 10: 1.0, 2: 2.0})["clients"]) == [
        "2",
        "10",
        "server",
    ]


def test_the_watch_warns_once_per_death_and_revival_and_its_state_survives_json():
    watch = ProbeWatch([Probe("a", "doc", dead_below=0.5, why="gone"), Probe("b", "doc")])
    rnd = lambda a0, a1: {
        "a": summarize_probe({0: a0, 1: a1}),
        "b": summarize_probe({0: float("nan")}),
    }  # noqa: E731
    assert watch.check(1, rnd(1.0, 1.0)) == []
    died = watch.check(2, rnd(0.1, 1.0))
    assert len(died) == 1 and "a = 0.1 on client 0 (< 0.5: dead). gone" in died[0]
    assert watch.check(3, rnd(0.2, 1.0)) == []  # still dead: no second warning
    assert watch.check(3, rnd(0.2, 0.0), skip=["a"]) == []  # idle by design this round
    assert watch.dead_now() == {"a": ["0"]}
    resumed = ProbeWatch(watch.probes.values())
    resumed.load_state(json.loads(json.dumps(watch.state())))
    assert resumed.check(4, rnd(0.3, 1.0)) == [] and resumed.dead_now() == {"a": ["0"]}
    back = resumed.check(5, rnd(0.9, 1.0))
    assert back == ["Round 5: a = 0.9 on client 0 is alive again."] and resumed.dead_now() == {}
    # a value stored as JSON null (NaN) after a resume is dead for a bounded probe
    assert "undefined" in resumed.check(6, {"a": {"clients": {"0": None}}})[0]


def test_a_checkpoint_keeps_which_probes_are_dead(flat):
    from flwr.app import ArrayRecord

    from fgl_flower.methods import METHODS
    from fgl_flower.parse import parse_run_config
    from fgl_flower.strategies.base import FGLStrategy

    flat["method"] = "fedhero"
    strategy = METHODS.get("fedhero").build_strategy(parse_run_config(flat))
    strategy.probe_watch.check(3, {"latent.nonempty": summarize_probe({1: 0.0})})
    records = strategy.checkpoint_records(3, ArrayRecord(), None)
    fresh = FGLStrategy(parse_run_config({**flat, "resume": True})).watch(
        METHODS.get("fedhero").probes
    )
    fresh.restore(records)
    assert fresh.probe_watch.dead_now() == {"latent.nonempty": ["1"]}

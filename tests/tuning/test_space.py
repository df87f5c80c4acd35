"""Search spaces: their text, their checks, and a space declared by every method."""

from __future__ import annotations

import pytest

from fgl_flower.errors import ConfigError
from fgl_flower.launch import flat_config
from fgl_flower.methods import METHODS
from fgl_flower.tuning.space import (
    SHARED_SPACE,
    Choice,
    Range,
    check_space,
    parse_param,
    study_space,
)


def test_parse_ranges_and_choices():
    assert parse_param("lr", "0.001..0.3:log", float) == Range(0.001, 0.3, log=True)
    assert parse_param("local-epochs", "1..10", int) == Range(1, 10, integer=True)
    assert parse_param("dropout", "0..0.5", float) == Range(0.0, 0.5)
    assert parse_param("weight-decay", "0,1e-4", float) == Choice((0.0, 1e-4))
    assert parse_param("fedhero.metric", "cos,att", str) == Choice(("cos", "att"))
    assert str(Range(0.001, 0.3, log=True)) == "0.001..0.3:log"


@pytest.mark.parametrize(
    ("key", "text", "typ", "says"),
    [
        ("lr", "0.3..0.001", float, "empty range"),
        ("lr", "0.1..0.1", float, "empty range"),
        ("weight-decay", "0..0.1:log", float, "log scale needs low > 0"),
        ("lr", "0.1..1:ln", float, "only scale"),
        ("lr", "0.1", float, "fix one value with --set lr=VALUE"),
        ("lr", "0.1,0.1", float, "fix one value"),
        ("lr", "a..b", float, "expected a float"),
        ("fedhero.metric", "cos..gat", str, "no range"),
    ],
)
def test_bad_params_say_what_is_wrong(key, text, typ, says):
    with pytest.raises(ConfigError, match=says):
        parse_param(key, text, typ)


def _base(method: str, **overrides):
    return {**flat_config({"method": method, **overrides}), "out-dir": ""}


@pytest.mark.parametrize(
    ("method", "space", "says"),
    [
        ("fedprox", {"lrr": "0.01..0.1"}, "Did you mean 'lr'"),
        ("fedprox", {"seed": "0..3"}, "decides what the study measures"),
        ("fedprox", {"num-rounds": "10..50"}, "decides what the study measures"),
        ("fedprox", {"data.louvain.resolution": "0.5..2"}, "decides what the study measures"),
        ("fedprox", {"fedhero.lam": "0.1..1"}, "an option of method 'fedhero'"),
        ("fedhero", {"fedhero.metric": "cos,bogus"}, "refuses fedhero.metric='bogus'"),
        ("fedhero", {"fedhero.alpha": "0.5..1.5"}, r"refuses fedhero.alpha=1.5: .*\[0, 1\]"),
        ("fedprox", {"dropout": "0.5..1.5"}, "refuses dropout=1.5"),
    ],
)
def test_bad_spaces_stop_before_any_trial(method, space, says):
    with pytest.raises(ConfigError, match=says):
        check_space(space, _base(method))


def test_overrides_add_replace_and_drop_keys():
    space = study_space("fedprox", {"lr": "0.01..0.5:log", "dropout": "none", "hidden": "32,64"})
    assert space["lr"] == "0.01..0.5:log"
    assert "dropout" not in space
    assert space["hidden"] == "32,64" and space["fedprox.mu"] == "0.0001..1:log"
    assert set(SHARED_SPACE) - {"dropout"} <= set(space)


def test_a_method_without_a_declared_space_needs_every_key(monkeypatch):
    from dataclasses import replace

    from fgl_flower.methods import register_method

    for table in ("_items", "_names"):  # the registry as it was, after this test
        monkeypatch.setattr(METHODS, table, dict(getattr(METHODS, table)))
    register_method(replace(METHODS.get("fedavg"), name="nospace-demo", space=None))
    with pytest.raises(ConfigError, match="declares no search space"):
        study_space("nospace-demo")
    assert study_space("nospace-demo", {"lr": "0.01..0.1"}) == {"lr": "0.01..0.1"}


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_declares_a_space_its_checks_accept(method):
    """The list comes from the registry: a new method without a space fails here."""
    spec = METHODS.get(method)
    assert spec.space is not None, f"{method}: declare MethodSpec.space ({{}}: shared keys only)"
    options = {k.rpartition(":")[2] for k in spec.space}
    assert options <= set(spec.options), f"{method}: space keys must be its options"
    params = check_space(study_space(method), _base(method))
    assert set(SHARED_SPACE) <= set(params)


def test_a_key_limited_to_a_data_level_is_tuned_on_that_level_only():
    space = study_space("gcfl")
    assert space["node:gcfl.eps1-node"] and space["graph:gcfl.eps1"]
    node = check_space(space, _base("gcfl"))
    graph = check_space(space, _base("gcfl", dataset="synthetic-graphs", partition="random"))
    assert "gcfl.eps1-node" in node and "gcfl.eps1" not in node
    assert "gcfl.eps1" in graph and "gcfl.eps1-node" not in graph
    with pytest.raises(ConfigError, match="level prefix is one of node, graph"):
        check_space({"edge:lr": "0.01..0.1"}, _base("gcfl"))


def test_the_tuning_page_shows_the_shared_space_as_the_code_has_it():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "tuning.md").read_text()
    for key, text in SHARED_SPACE.items():
        assert f"| `{key}` | `{text}` |" in page, key

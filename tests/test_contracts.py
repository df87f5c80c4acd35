"""Contract tests: the app config, pyproject, README and the registries must agree."""

import json
import re
import tomllib
from pathlib import Path

import pytest

from fgl_flower.app_defaults import app_config_text, load_app_defaults, sync_pyproject
from fgl_flower.config import CORE_KEYS
from fgl_flower.datasets import DATASETS, PARTITIONERS
from fgl_flower.datasets.catalog import NODE_OPTIONS
from fgl_flower.datasets.checks import EDGE_OPTIONS
from fgl_flower.datasets.files import CSV_OPTIONS
from fgl_flower.methods import METHODS

REPO = Path(__file__).resolve().parents[1]


def app_config() -> dict:
    return tomllib.loads(app_config_text())["tool"]["flwr"]["app"]["config"]


def test_the_checkouts_pyproject_carries_the_generated_app_config():
    """``flwr run .`` reads the checkout's pyproject.toml: its app part is the generated one
    (rewrite it with ``python -m fgl_flower.app_defaults --write pyproject.toml``)."""
    text = (REPO / "pyproject.toml").read_text()
    assert sync_pyproject(text) == text, (
        "run: python -m fgl_flower.app_defaults --write pyproject.toml"
    )


@pytest.mark.parametrize("name", list(METHODS))
def test_every_option_says_what_it_means(name):
    spec = METHODS.get(name)
    assert set(spec.option_help) == set(spec.options)
    assert all(spec.option_help.values()), f"{name}: an option without a meaning"


def test_core_keys_are_the_plain_keys_of_pyproject():
    plain = {k for k, v in app_config().items() if not isinstance(v, dict)}
    assert plain == set(CORE_KEYS)


@pytest.mark.parametrize("name", list(METHODS))
def test_method_options_match_pyproject(name):
    spec = METHODS.get(name)
    table = app_config().get(name, {})
    assert table == dict(spec.options), (
        f"[tool.flwr.app.config.{name}] must equal MethodSpec.options"
    )


def test_every_pyproject_section_is_a_method_or_data():
    sections = {k for k, v in app_config().items() if isinstance(v, dict)}
    assert sections <= set(METHODS) | {"data"}


def _defaults(options) -> dict:
    return {k: ("" if o.default is None else o.default) for k, o in options.items()}


def test_data_options_match_partitioners_and_synthetic():
    data = app_config()["data"]
    for name, part in PARTITIONERS.items():
        if part.options:
            assert data.get(name) == _defaults(part.options), f"data.{name}"
        else:
            assert name not in data
    generated = ("synthetic", "synthetic-graphs")
    for name in generated:
        assert data[name] == _defaults(DATASETS.get(name).options), f"data.{name}"
    # Options of every node dataset and of dataset files: "" (= the default) unless set.
    plain = {*NODE_OPTIONS, *EDGE_OPTIONS, *CSV_OPTIONS}
    assert {k: v for k, v in data.items() if not isinstance(v, dict)} == dict.fromkeys(plain, "")
    assert set(data) <= set(PARTITIONERS) | set(generated) | plain


def test_defaults_parse():
    from fgl_flower.parse import parse_run_config

    cfg = parse_run_config(load_app_defaults())
    assert cfg.dataset == "synthetic" and cfg.method in METHODS


def test_readme_method_table_lists_exactly_the_registry():
    text = (REPO / "README.md").read_text()
    table = text.split("<!-- methods -->")[1].split("<!-- /methods -->")[0]
    names = set(re.findall(r"^\| `([\w-]+)` \|", table, flags=re.M))
    assert names == set(METHODS)


def test_the_datasets_pages_partitioner_list_matches_registry():
    text = (REPO / "docs" / "datasets.md").read_text()
    table = text.split("<!-- partitioners -->")[1].split("<!-- /partitioners -->")[0]
    names = set(re.findall(r"^\| `([\w-]+)` \|", table, flags=re.M))
    assert names == set(PARTITIONERS)


#: Experiment files; each folder's claims file (the results index's) is not one.
EXPERIMENT_FILES = sorted(
    p for p in (REPO / "experiments").glob("*/*.toml") if p.name != "claims.toml"
)


@pytest.mark.parametrize("path", EXPERIMENT_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_experiment_rows_are_valid_run_configs(path):
    """Every row of every experiment file parses into a run config its method accepts
    (data availability is not checked: that is the run's own first step)."""
    from fgl_flower.bench import load_experiment
    from fgl_flower.cli import build_run_config, parser
    from fgl_flower.parse import parse_run_config
    from fgl_flower.server_app import check_method_task

    exp = load_experiment(path, root=REPO)
    for row in exp.rows:
        args = parser().parse_args(row.command(0, str(REPO / "runs" / "contract"))[1:])
        cfg = parse_run_config(build_run_config(args))
        check_method_task(cfg)


def test_every_run_config_key_has_a_meaning_and_fgl_config_lists_it(capsys):
    from fgl_flower.app_defaults import describe_keys
    from fgl_flower.cli import main

    rows = describe_keys()
    assert [k for k, _, m in rows if not m] == []
    assert {k for k, _, _ in rows} == set(load_app_defaults())
    assert main(["config"]) == 0
    listed = {
        line.split()[0]
        for line in capsys.readouterr().out.splitlines()
        if line and not line.startswith("Set ")
    }
    assert listed == set(load_app_defaults())


def test_fgl_config_lists_every_registered_method(capsys):
    from fgl_flower.cli import main
    from fgl_flower.methods import METHODS

    assert main(["config", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out) if r["key"] == "method")
    listed = row["meaning"].rsplit("[", 1)[1].rstrip("]").split(" | ")
    assert listed == list(METHODS) and "fedhero" in listed


def test_cli_partition_choices_are_the_registry():
    from fgl_flower.cli import PARTITIONS
    from fgl_flower.datasets import PARTITIONERS

    assert set(PARTITIONS) == set(PARTITIONERS)


def test_fgl_version(capsys):
    import pytest

    from fgl_flower.cli import main

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("fgl-flower 0.1.0 (Flower 1.42")


@pytest.mark.parametrize("name", sorted(name for name, _ in METHODS.items()))
def test_model_init_reaches_the_model_or_stops_the_run(name):
    """``model-init`` is applied by the run's backbone (``build_run_model``). A method whose
    client builds its own model declares ``own_init``, and a run that asks it for another
    initialisation stops with a message instead of silently ignoring it."""
    from fgl_flower.clients.base import LearnerClient
    from fgl_flower.errors import ConfigError
    from fgl_flower.launch import flat_config
    from fgl_flower.parse import parse_run_config

    spec = METHODS.get(name)
    flat = flat_config({"method": name, "model-init": "uniform01"})
    if spec.own_init:
        with pytest.raises(ConfigError, match="model-init='uniform01' would not reach it"):
            parse_run_config(flat)
        assert parse_run_config(flat_config({"method": name})).model_init == "default"
    else:
        assert parse_run_config(flat).model_init == "uniform01"
    # own_init only where the client builds its own model; FedFA wraps the run's backbone
    # and FedLit applies model-init itself (tests/models/test_fedlit_model.py)
    client = spec.client_class()
    own_builder = (
        issubclass(client, LearnerClient)
        and client.model_builder is not LearnerClient.model_builder
    )
    assert spec.own_init == (own_builder and name not in {"fedfa", "fedlit"})


def test_the_parse_tables_name_core_keys():
    from fgl_flower.parse import CONVERT, RULES

    assert set(RULES) | set(CONVERT) <= set(CORE_KEYS)

"""The Python API: run a method, read its results and look at a partition, from a notebook
or a script.

>>> import fgl_flower as fgl
>>> result = fgl.run("fedavg", dataset="Cora", partition="louvain", clients=10, rounds=50)
>>> result.final["test_acc"], result.out_dir
>>> fgl.plot_curves({"FedAvg": result})

:func:`run` goes through the same validation as ``fgl run`` (the same errors, before
anything starts) and the same runtimes: in this process by default, ``backend="simulation"``
for Flower's Ray simulation (``flwr run``), ``backend="deployment"`` for a local SuperLink
with one SuperNode per client. Options are run-config keys (``fgl config`` lists them) given
as keyword arguments: ``local_epochs=3`` sets ``local-epochs``, and a dict sets a scope,
``fedprox={"mu": 0.1}`` sets ``fedprox.mu`` and ``data={"louvain": {"resolution": 2.0}}``
sets ``data.louvain.resolution``.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fgl_flower.errors import ConfigError

#: Arguments of :func:`run` and :func:`partition` that name a run-config key differently.
ALIASES = {"clients": "num-clients", "rounds": "num-rounds"}


def _flatten(options: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Keyword arguments as run-config keys: ``_`` becomes ``-``, dicts nest with ``.``."""
    flat: dict[str, Any] = {}
    for name, value in options.items():
        key = prefix + (name if prefix else ALIASES.get(name, name)).replace("_", "-")
        if isinstance(value, Mapping):
            flat.update(_flatten(value, key + "."))
        elif value is not None:
            flat[key] = value
    return flat


def run_config(
    method: str = "fedavg", *, out: str | Path | None = None, **options: Any
) -> dict[str, Any]:
    """The flat run config :func:`run` would use (app defaults plus ``options``), for
    ``flwr run . --run-config`` or a look at the defaults; nothing is validated beyond the
    keys and their types."""
    from fgl_flower.launch import flat_config

    return flat_config(_flatten({"method": method, **options}), out=out)


@dataclass(frozen=True)
class RunResult:
    """A finished (or stopped) run, read from its folder.

    Attributes:
        out_dir: The run folder (``config.json``, ``rounds.jsonl``, ``summary.json``,
            ``curves.png``).
        config: The run's resolved config (``config.json``).
        summary: ``summary.json``: the final, best-validation and last-5 metrics, each
            client's final metrics (``final_clients``), traffic, time and resources.
        rounds: One record per round (``rounds.jsonl``): ``eval`` (metrics of the global
            or personalized models, averaged over clients), ``train``, ``clients`` (each
            client's metrics), bytes up and down, seconds.
    """

    out_dir: Path
    config: dict[str, Any]
    summary: dict[str, Any]
    rounds: list[dict[str, Any]] = field(repr=False)

    @classmethod
    def load(cls, out_dir: str | Path) -> RunResult:
        """Read the run in ``out_dir`` (as ``fgl run`` or :func:`run` wrote it)."""
        path = Path(out_dir).expanduser().resolve()
        if not (path / "summary.json").is_file():
            raise ConfigError(f"{path} holds no finished run (no summary.json).")
        config = (
            json.loads((path / "config.json").read_text())
            if (path / "config.json").exists()
            else {}
        )
        rounds = (
            [
                json.loads(line)
                for line in (path / "rounds.jsonl").read_text().splitlines()
                if line.strip()
            ]
            if (path / "rounds.jsonl").exists()
            else []
        )
        return cls(path, config, json.loads((path / "summary.json").read_text()), rounds)

    @property
    def final(self) -> dict[str, Any]:
        """Metrics after the last round (weighted over clients, ``*_mean`` unweighted)."""
        return self.summary.get("final", {})

    @property
    def best(self) -> dict[str, Any]:
        """Metrics at the round selected on validation (``select-by``)."""
        return self.summary.get("best_val", {})

    @property
    def clients(self) -> dict[int, dict[str, float]]:
        """Each client's metrics after the last round, by partition id."""
        return {int(k): v for k, v in self.summary.get("final_clients", {}).items()}

    def history(self, key: str = "test_acc", where: str = "eval") -> list[tuple[int, float]]:
        """``(round, value)`` of ``rounds[i][where][key]`` over the rounds that have it
        (``where``: ``eval`` or ``train``)."""
        return [(r["round"], r[where][key]) for r in self.rounds if key in r.get(where, {})]

    def client_history(self, key: str = "test_acc") -> dict[int, list[tuple[int, float]]]:
        """Per client, ``(round, value)`` of its own ``key``."""
        out: dict[int, list[tuple[int, float]]] = {}
        for r in self.rounds:
            for pid, metrics in r.get("clients", {}).items():
                if key in metrics:
                    out.setdefault(int(pid), []).append((r["round"], metrics[key]))
        return out

    def to_frame(self):
        """The rounds as a ``pandas.DataFrame`` (one row per round, ``eval_*`` and
        ``train_*`` columns, bytes and seconds); needs pandas (the ``notebooks`` extra)."""
        import pandas as pd

        rows = []
        for r in self.rounds:
            row = {
                "round": r["round"],
                "time_s": r.get("time_s"),
                "bytes_up": r.get("bytes_up"),
                "bytes_down": r.get("bytes_down"),
            }
            row.update({f"eval_{k}": v for k, v in r.get("eval", {}).items()})
            row.update({f"train_{k}": v for k, v in r.get("train", {}).items()})
            rows.append(row)
        return pd.DataFrame(rows).set_index("round")

    def clients_frame(self):
        """Each client's final metrics as a ``pandas.DataFrame`` indexed by partition id."""
        import pandas as pd

        return pd.DataFrame.from_dict(self.clients, orient="index").sort_index()

    def __str__(self) -> str:
        from fgl_flower.datasets.files import dataset_label
        from fgl_flower.results import HEADLINES, headline

        s, f = self.summary, self.final
        m = headline(f)
        scale = HEADLINES[m][2]
        return (
            f"{s.get('method')} on {dataset_label(str(s.get('dataset')))} ({s.get('partition')}, "
            f"{s.get('num_clients')} clients, {s.get('num_rounds')} rounds, seed {s.get('seed')}): "
            f"final test {m} "
            f"{scale * f.get(f'test_{m}', float('nan')):.2f} (client mean "
            f"{scale * f.get(f'test_{m}_mean', float('nan')):.2f}); {self.out_dir}"
        )


def run(
    method: str = "fedavg",
    *,
    dataset: str | Path | Any = None,
    partition: str | Any = None,
    clients: int | None = None,
    rounds: int | None = None,
    backend: str = "inprocess",
    out: str | Path | None = None,
    overwrite: bool = False,
    progress: bool = True,
    verbose: bool = False,
    **options: Any,
) -> RunResult:
    """Run ``method`` and return its :class:`RunResult`.

    Args:
        method: A registered method (``fgl methods``), including one registered in this
            process with :func:`~fgl_flower.methods.register_method` (in-process only).
        dataset: As ``fgl run --dataset`` (a catalog name or a dataset file; the app
            default if None), or a graph object: a PyG ``Data`` (node tasks) or a list or
            PyG dataset of ``Data`` (graph tasks), stored once in the cache by its content
            (docs/own-data.md).
        partition: As ``fgl run --partition``, or an array of one client id per node
            (graph): the ``assign`` partition (``clients`` 0 or the ids' count).
        clients: As ``fgl run --clients``.
        rounds: As ``fgl run --rounds``.
        backend: ``"inprocess"`` (the clients one after another in this process),
            ``"simulation"`` (``flwr run`` on Ray) or ``"deployment"`` (a local SuperLink
            and SuperNodes, started and stopped here).
        out: The run folder (default ``./runs/<method>-<dataset>-...``); one that holds a
            run is refused unless ``overwrite``.
        progress: Show a progress bar (tqdm; a widget in Jupyter when ipywidgets is
            installed). The run's own per-round log lines are off unless ``verbose``.
        verbose: Show the run's log (Flower's output and a line per round).
        **options: Run-config keys (``seed=1``, ``local_epochs=3``,
            ``fedprox={"mu": 0.1}``; see the module docstring).

    Raises:
        ConfigError: Bad input, before anything starts (the same messages as ``fgl run``).
        FGLError: The run failed (failed clients, divergence, a runtime that stopped).
    """
    from fgl_flower.datasets.files import dataset_label
    from fgl_flower.launch import ENGINES, execute, flat_config, validate

    if backend not in ENGINES:
        raise ConfigError(f"backend={backend!r}: use one of {', '.join(ENGINES)}.")
    overrides = _run_keys(
        dataset, partition, method=method, clients=clients, rounds=rounds, **options
    )
    overrides.setdefault("progress", verbose)
    flat = flat_config(overrides, out=out)
    _check_backend(str(flat["method"]), backend)
    with _quiet(not verbose):
        cfg = validate(flat, backend, overwrite=overwrite)
        out_dir = Path(str(cfg.flat()["out-dir"]))
        for name in (
            "rounds.jsonl",
            "summary.json",
        ):  # an overwritten run's: not this run's progress
            (out_dir / name).unlink(missing_ok=True)
        log = out_dir / "flwr.log"  # Flower's output of a simulation or deployment
        with (
            _progress(
                out_dir / "rounds.jsonl",
                cfg.num_rounds,
                f"{cfg.method} on {dataset_label(cfg.dataset)}",
                progress,
            ),
            open(log, "w") if not verbose and backend != "inprocess" else _nothing() as stream,
        ):
            execute(cfg, backend, stream=stream)
    return RunResult.load(out_dir)


def tune(
    method: str = "fedavg",
    *,
    dataset: str | Path | Any = None,
    partition: str | Any = None,
    clients: int | None = None,
    rounds: int | None = None,
    trials: int = 20,
    trial_rounds: int | None = None,
    space: Mapping[str, str] | None = None,
    metric: str = "",
    pruner: str = "median",
    sampler_seed: int = 0,
    final_seeds: Sequence[int] = (0, 1, 2),
    jobs: int = 1,
    backend: str = "inprocess",
    study: str | Path | None = None,
    overwrite: bool = False,
    storage: str | None = None,
    **options: Any,
):
    """Tune ``method``'s hyperparameters (``fgl tune``); returns its
    :class:`~fgl_flower.tuning.StudyResult`.

    The run is given as to :func:`run` (``dataset``, ``partition``, ``clients``, ``rounds``
    and run-config keys as keyword arguments): it is the untuned run, and each trial is it
    with the space's values. ``space`` adds or replaces keys of the method's space
    (``{"lr": "0.01..0.5:log", "fedprox.mu": "0.001..1:log", "dropout": "none"}``; see
    :mod:`fgl_flower.tuning.space`). ``trials`` finished trials of ``trial_rounds`` rounds
    each (default ``rounds``) maximise the validation ``metric`` (default the run's
    ``select-by``); ``pruner``: median, halving or none. The best configuration and the
    untuned one are then rerun over ``final_seeds`` at ``rounds``. ``jobs`` trials at a
    time (more than one: each its own ``fgl run`` process); ``backend``: ``"inprocess"``
    or ``"simulation"``. The study lives in ``study`` (default
    ``./studies/<method>-<dataset>-<partition>-c<clients>``) and resumes from it; Optuna's
    storage is ``study.db`` there unless ``storage`` names another (an Optuna storage URL).

    Raises:
        ConfigError: Bad input or a bad space, before any trial.
    """
    from fgl_flower.tuning import StudySpec, run_tune

    if backend not in ("inprocess", "simulation"):
        raise ConfigError(f"backend={backend!r}: trials run 'inprocess' or in 'simulation'.")
    overrides = _run_keys(
        dataset, partition, method=method, clients=clients, rounds=rounds, **options
    )
    _check_backend(str(overrides["method"]), backend if jobs == 1 else "process")
    spec = StudySpec.of(
        overrides,
        space,
        trials=trials,
        trial_rounds=trial_rounds,
        metric=metric,
        pruner=pruner,
        sampler_seed=sampler_seed,
    )
    with _quiet(True):
        return run_tune(
            spec,
            study,
            jobs=jobs,
            engine=backend,
            final_seeds=tuple(final_seeds),
            overwrite=overwrite,
            storage=storage,
        )


def _run_keys(dataset: Any, partition: Any, **options: Any) -> dict[str, Any]:
    """The run-config keys of a call's ``dataset``, ``partition`` (:func:`_data_keys`) and
    other arguments (:func:`_flatten`)."""
    return _flatten(_data_keys(dataset, partition)) | _flatten(options)


def _data_keys(dataset: Any, partition: Any) -> dict[str, Any]:
    """The ``dataset`` and ``partition`` arguments as run-config keys: a name or path as
    given; a graph object stored in the cache by its content
    (:func:`~fgl_flower.datasets.objects.store_object`); an array of client ids as the
    file stored in the cache (:func:`~fgl_flower.datasets.partition.assign.store_assignment`),
    which :func:`~fgl_flower.launch.flat_config` turns into the ``assign`` partition."""
    keys: dict[str, Any] = {"dataset": dataset, "partition": partition}
    if isinstance(dataset, Path):
        keys["dataset"] = str(dataset)
    elif dataset is not None and not isinstance(dataset, str):
        from fgl_flower.datasets.objects import store_object

        keys["dataset"] = str(store_object(dataset))
    if isinstance(partition, Path):
        keys["partition"] = str(partition)
    elif partition is not None and not isinstance(partition, str):
        from fgl_flower.datasets.partition.assign import store_assignment

        keys["partition"] = str(store_assignment(partition))
    return keys


def load_result(out_dir: str | Path) -> RunResult:
    """The :class:`RunResult` of the run in ``out_dir`` (``fgl run --out``, or :func:`run`)."""
    return RunResult.load(out_dir)


def _check_backend(method: str, backend: str) -> None:
    """A method whose classes live in ``__main__`` (a notebook) cannot reach other processes."""
    from fgl_flower.methods import METHODS

    spec = METHODS.get(method)
    local = [
        c
        for c in (spec.strategy, spec.client)
        if not isinstance(c, str) and c.__module__ == "__main__"
    ]
    if local and backend != "inprocess":
        raise ConfigError(
            f"Method {spec.name!r} is defined in this notebook or script ({local[0].__name__} "
            f"lives in __main__), which the {backend} processes cannot import: run it with "
            "backend='inprocess', or move its classes into an importable module."
        )


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


@contextmanager
def _quiet(on: bool) -> Iterator[None]:
    """Flower's INFO lines off (warnings and errors stay) while a run shows a progress bar,
    and none of the notices ``fgl run`` hides either: ``tqdm.auto`` imported by PyG in
    Jupyter without ipywidgets (the run's own bar is text there), torch's sparse-CSR beta
    and invariant-check notices."""
    from flwr.supercore import log  # noqa: F401  (configures Flower's logger first)

    logger = logging.getLogger("flwr")
    level = logger.level
    if on:
        logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            for notice in (
                "IProgress not found",
                "Sparse CSR tensor support is in beta",
                "Sparse invariant checks are implicitly disabled",
            ):
                warnings.filterwarnings("ignore", message=notice)
            yield
    finally:
        logger.setLevel(level)


def _bar(total: int, desc: str):
    try:  # the Jupyter widget only where it can render; else text, which notebooks keep
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="round", mininterval=1.0)


@contextmanager
def _progress(rounds_file: Path, total: int, desc: str, on: bool) -> Iterator[None]:
    """A progress bar following ``rounds.jsonl`` (written by the server, wherever it runs)."""
    if not on:
        yield
        return
    bar = _bar(total, desc)
    stop = threading.Event()

    def follow() -> None:
        done = 0
        while True:
            finished = stop.is_set()
            lines = rounds_file.read_text().splitlines() if rounds_file.exists() else []
            records = []
            for line in lines:
                try:
                    records.append(json.loads(line))
                except ValueError:  # being written
                    break
            if len(records) > done:
                bar.update(len(records) - done)
                done = len(records)
                ev = records[-1].get("eval", {})
                bar.set_postfix(
                    {k: f"{100 * ev[k]:.2f}" for k in ("val_acc", "test_acc") if k in ev},
                    refresh=False,
                )
            if finished:
                return
            stop.wait(0.2)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        bar.close()


@dataclass(frozen=True)
class Partition:
    """A dataset split into clients, as a run with the same settings sees it.

    Attributes:
        config: The flat run config it was built from.
        stats: Per client (by partition id): nodes, edges, class counts, edge and node
            homophily (node tasks), or graphs and class counts (graph tasks), as
            ``fgl partition-stats``.
    """

    config: dict[str, Any]
    stats: list[dict[str, Any]] = field(repr=False)

    @property
    def num_clients(self) -> int:
        return len(self.stats)

    def label_mix(self) -> list[list[float]]:
        """Per client, the share of each class among its nodes (or graphs)."""
        return [[c / max(sum(s["class_counts"]), 1) for c in s["class_counts"]] for s in self.stats]

    def client(self, partition_id: int):
        """Client ``partition_id``'s data (graph, features, labels and split masks for node
        tasks; train/val/test graphs for graph tasks)."""
        from fgl_flower.datasets import load_client_data
        from fgl_flower.parse import parse_run_config

        return load_client_data(parse_run_config(self.config).data_config(), partition_id)

    def to_frame(self):
        """The statistics as a ``pandas.DataFrame`` indexed by client (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.stats).set_index("client")


def partition(
    dataset: str | Path | Any = None,
    partition: str | Any = None,
    clients: int | None = None,
    **options: Any,
) -> Partition:
    """Build (or load from the cache) a partition and its per-client statistics, with the
    same options as :func:`run` (``seed``, ``partition_seed``, ``split``, ``data={...}``;
    ``clients=0``: the partition's natural count)."""
    from fgl_flower.datasets import partition_stats, validate_data_config
    from fgl_flower.launch import flat_config, resolve_num_clients
    from fgl_flower.parse import parse_run_config

    flat = flat_config(_run_keys(dataset, partition, clients=clients, **options))
    cfg = parse_run_config(flat)
    validate_data_config(cfg.data_config())
    with _quiet(True):
        cfg = resolve_num_clients(cfg)
        return Partition(cfg.flat(), partition_stats(cfg.data_config()))

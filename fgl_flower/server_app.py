"""The ServerApp: resolves the run's method and runs its strategy."""

from __future__ import annotations

import time
from logging import INFO, WARNING
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from flwr.supercore import log

from fgl_flower.checkpoint import Checkpointer
from fgl_flower.config import FOLLOW_FEDERATION, RunConfig
from fgl_flower.datasets import cache_dir
from fgl_flower.datasets.files import dataset_label
from fgl_flower.datasets.resolve import run_task
from fgl_flower.errors import ConfigError, FGLError
from fgl_flower.methods import METHODS
from fgl_flower.models import MODELS
from fgl_flower.parse import parse_run_config
from fgl_flower.results import RunRecorder, headline, results_written
from fgl_flower.tasks import Task, check_select_by

app = ServerApp()


def resolve_out_dir(cfg: RunConfig) -> Path:
    """``out-dir`` if set (must be absolute), else a fresh folder in the user cache."""
    if cfg.out_dir:
        path = Path(cfg.out_dir).expanduser()
        if not path.is_absolute():
            raise ConfigError(f"out-dir={cfg.out_dir!r} must be an absolute path.")
        return path
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (
        cache_dir()
        / "runs"
        / f"{cfg.method}-{dataset_label(cfg.dataset)}-{cfg.partition}-c{cfg.num_clients}-s{cfg.seed}-{stamp}"
    )


def require_task(method: str, task: Task, dataset: str) -> None:
    """A method refuses a task its spec does not list, naming those that run it."""
    spec = METHODS.get(method)
    if task.name not in spec.tasks:
        can = sorted(n for n, s in METHODS.items() if task.name in s.tasks)
        raise ConfigError(
            f"Method {method!r} runs {', '.join(spec.tasks)} tasks, not {task.name} "
            f"({dataset!r}); methods that run it: {', '.join(can) or 'none'}."
        )


def check_method_task(cfg: RunConfig) -> None:
    """Method, model, dataset and ``select-by`` serve the run's task (``task``: node or graph
    classification, link prediction, graph regression)."""
    task = run_task(cfg)
    require_task(cfg.method, task, cfg.dataset)
    model = MODELS.get(cfg.model)
    if model.task != task.level:
        fits = [n for n, s in MODELS.items() if s.task == task.level]
        raise ConfigError(
            f"Model {cfg.model!r} is for {model.task}-level tasks, but dataset {cfg.dataset!r} "
            f"is {task.level}-level: set model to one of {', '.join(fits)}."
        )
    check_select_by(task, cfg.select_by)


def follow_federation(grid: Grid, cfg: RunConfig) -> RunConfig:
    """``cfg`` with ``num-clients`` set to the ``num-partitions`` of ``grid``'s SuperNodes."""
    from fgl_flower.strategies.grid import MeteredGrid

    num = MeteredGrid(grid).federation_size(cfg.round_timeout)
    log(INFO, "num-clients follows the federation: %d (its SuperNodes' num-partitions)", num)
    return parse_run_config({**cfg.flat(), "num-clients": num})


def warn_client_checkpoints(cfg: RunConfig, checkpoint_dir: Path) -> None:
    """Under SecAgg+ or DP, say where the clients keep what those protect: each client's
    checkpoint holds its trained model before masking or clipping."""
    from fgl_flower.checkpoint import client_root
    from fgl_flower.dp.options import dp_settings
    from fgl_flower.secagg.protocol import SECURE_AGGREGATION

    protected = [
        name
        for name, on in (
            ("SecAgg+", dict(cfg.method_options).get(SECURE_AGGREGATION)),
            ("differential privacy", dp_settings(cfg) is not None),
        )
        if on
    ]
    if protected:
        log(
            WARNING,
            "%s protect what the clients send, not what they keep: each client checkpoints its "
            "trained model (before masking and clipping) and optimizer state privately, on its own machine "
            "(here: %s, mode 700; a SuperNode's --node-config checkpoint-dir instead), apart from the results. "
            "Delete that folder when the run is done, or run with checkpoint-every=0 (no resume).",
            " and ".join(protected),
            client_root(checkpoint_dir),
        )


def run(grid: Grid, cfg: RunConfig) -> dict:
    """Run ``cfg`` on ``grid`` and write its results; returns the summary. A ``num-clients``
    left to follow the federation (the app's default) is read from the SuperNodes first."""
    check_method_task(cfg)
    if cfg.num_clients == FOLLOW_FEDERATION:
        cfg = follow_federation(grid, cfg)
    if cfg.num_clients == 0:  # the SuperNodes were started for some count: it must be known
        raise ConfigError(
            f"num-clients=0 (the natural number of clients of {cfg.partition}) must be "
            "resolved before the run starts: `fgl run` does; with `flwr run`, set "
            "num-clients to the count `fgl partition-stats --clients 0` shows."
        )
    out_dir = resolve_out_dir(cfg)
    recorder = RunRecorder(out_dir, cfg)
    log(INFO, "Writing results to %s", out_dir)
    strategy = METHODS.get(cfg.method).build_strategy(cfg)
    checkpointer = None
    if cfg.checkpoint_every and (cfg.checkpoint_dir or cfg.out_dir):
        checkpointer = Checkpointer(
            cfg.checkpoint_dir or out_dir / "checkpoint", cfg.checkpoint_every
        )
        warn_client_checkpoints(cfg, checkpointer.directory)
    elif cfg.checkpoint_every:  # the clients cannot know the folder the server picked
        log(INFO, "No checkpoints: set out-dir (or checkpoint-dir) to make the run resumable.")
    try:
        strategy.start(
            grid, timeout=cfg.round_timeout, recorder=recorder, checkpointer=checkpointer
        )
    except FGLError as e:  # failed clients, divergence: summarize the rounds that finished
        recorder.finish({"stopped": str(e)})
        raise
    summary = recorder.finish()
    best = summary.get("best_val", {})
    key = f"test_{headline(best)}"
    log(
        INFO,
        "Done: best-val round %s %s %.4f; final %s %.4f; %s",
        best.get("round"),
        key,
        best.get(key, float("nan")),
        key,
        summary.get("final", {}).get(key, float("nan")),
        results_written(out_dir),
    )
    return summary


@app.main()
def main(grid: Grid, context: Context) -> None:
    run(grid, parse_run_config(context.run_config))

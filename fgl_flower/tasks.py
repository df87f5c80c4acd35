r"""What a run learns: node or graph classification, link prediction, graph regression.

A :class:`Task` names its data level (``"node"``: one graph split into subgraphs; ``"graph"``:
many graphs split among clients), the evaluation metrics every client reports with the count
each is weighted by, and the validation metric that picks the reported round by default.
The run-config key ``task`` chooses one (``auto``: the dataset's own, classification, or
regression where its targets are real numbers); a method lists the tasks it runs in its spec
(:attr:`~fgl_flower.methods.spec.MethodSpec.tasks`) and refuses the others before training.

Torch-free: the launcher checks a task before torch is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fgl_flower.errors import ConfigError
from fgl_flower.registry import Registry

SPLITS = ("val", "test")

#: Metric names (the part after ``val_``/``test_``) where lower is better.
LOWER_IS_BETTER = ("loss", "mse", "mae")

#: The ``k`` of the link metrics ``hits@k``.
HITS_AT = (10, 50, 100)


def lower_is_better(metric: str) -> bool:
    """Whether a smaller value of ``metric`` (e.g. ``val_loss``, ``test_mse``) is better."""
    return metric.rsplit("_", 1)[-1] in LOWER_IS_BETTER


def _per_split(*names: str) -> dict[str, str]:
    return {f"{s}_{m}": f"num-{s}" for s in SPLITS for m in names}


@dataclass(frozen=True)
class Task:
    """One learning task.

    Attributes:
        name: Its run-config name.
        level: ``"node"`` or ``"graph"``: the data it reads and the backbone it trains.
        summary: One line for ``fgl tasks`` and the docs.
        eval_metrics: Per-client evaluation metric -> the count it is weighted by when the
            clients are pooled (``eval-weight = split``).
        select_by: The validation metric that picks the reported round by default.
        defaults: Run-config values ``fgl run`` and the Python API use where the user gives
            none (its ``select_by``; link prediction's 0.8/0.1/0.1 edge split).
        classes: It predicts classes (so every class needs a training example somewhere).
    """

    name: str
    level: str
    summary: str
    eval_metrics: Mapping[str, str] = field(default_factory=dict)
    select_by: str = "val_acc"
    defaults: Mapping[str, str] = field(default_factory=dict)
    classes: bool = True

    @property
    def selectable(self) -> tuple[str, ...]:
        """The ``select-by`` values this task reports."""
        return tuple(m for m in self.eval_metrics if m.startswith("val_"))


TASKS: Registry[Task] = Registry("task")

_CLASSIFY = _per_split("loss", "acc", "f1", "f1_all")
TASKS.register(
    "node",
    Task(
        "node",
        "node",
        "node classification on each client's subgraph",
        {**_CLASSIFY, "test_minority_acc": "num-test-minority"},  # FedSpray's minority accuracy
    ),
)
TASKS.register(
    "graph", Task("graph", "graph", "graph classification over each client's graphs", _CLASSIFY)
)
TASKS.register(
    "link",
    Task(
        "link",
        "node",
        "link prediction inside each client's subgraph (held-out edges against sampled non-edges)",
        _per_split("loss", "auc", "ap", "mrr", *(f"hits@{k}" for k in HITS_AT)),
        select_by="val_auc",
        defaults={"select-by": "val_auc", "split": "0.8,0.1,0.1"},
        classes=False,
    ),
)
TASKS.register(
    "graph-regression",
    Task(
        "graph-regression",
        "graph",
        "a real-valued target per graph (mean squared error)",
        _per_split("loss", "mse", "mae"),
        select_by="val_mse",
        defaults={"select-by": "val_mse"},
        classes=False,
    ),
)

#: The run-config value that takes the dataset's own task.
AUTO = "auto"


def resolve_task(asked: str, level: str, regression: bool, dataset: str) -> Task:
    """The task a run learns: ``asked`` (a name or :data:`AUTO`) on a dataset of ``level``
    whose targets are real numbers if ``regression``; ``ConfigError`` where they disagree."""
    if asked == AUTO:
        if level == "node":
            return TASKS.get("node")
        return TASKS.get("graph-regression" if regression else "graph")
    task = TASKS.get(asked)
    if task.level != level:
        fits = sorted(n for n, t in TASKS.items() if t.level == level)
        raise ConfigError(
            f"task={task.name} learns on {task.level}-level data, but {dataset!r} is "
            f"{level}-level: use task={' or '.join(fits)} (or auto)."
        )
    if level == "graph" and regression != (task.name == "graph-regression"):
        what = "real-valued targets" if regression else "class targets"
        fit = "graph-regression" if regression else "graph"
        raise ConfigError(
            f"task={task.name}, but {dataset!r} has {what}: use task={fit} (or auto)"
            + (
                ""
                if regression
                else "; synthetic-graphs has data.synthetic-graphs.target=regression"
            )
            + "."
        )
    return task


def check_select_by(task: Task, select_by: str) -> None:
    """``select-by`` must be a validation metric the task reports."""
    if select_by not in task.selectable:
        raise ConfigError(
            f"select-by={select_by}: task {task.name} reports {', '.join(task.selectable)}; "
            f"set select-by={task.select_by} (its default)."
        )

"""Starting a run: one path for the ``fgl`` command line and the Python API.

:func:`flat_config` turns overrides into a whole flat run config (app defaults, typed like
them, unknown keys refused with the closest known ones), :func:`validate` checks everything
that can fail before training (config, data, devices, the output folder) and builds the
partition, and :func:`execute` runs it in one of the :data:`ENGINES`.
"""

from __future__ import annotations

import difflib
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from fgl_flower.errors import ConfigError, FGLError

if TYPE_CHECKING:
    from fgl_flower.tasks import Task

Scalar = int | float | bool | str

#: Where a run's clients execute: this process, Flower's Ray simulation (``flwr run``), or a
#: local SuperLink with one SuperNode per client.
ENGINES = ("inprocess", "simulation", "deployment")

#: Clients of a run that starts its own federation (every engine here) when ``num-clients``
#: is left at the app's default, which follows the federation (``flwr run .``'s SuperNodes).
OWN_FEDERATION_CLIENTS = 5


#: The ``fgl run`` flags an experiment row gives, and the run-config key of each.
ROW_FLAGS = {
    "method": "method",
    "dataset": "dataset",
    "partition": "partition",
    "clients": "num-clients",
    "rounds": "num-rounds",
    "model": "model",
}


def set_flags(overrides: Mapping[str, Scalar]) -> list[str]:
    """``overrides`` as ``fgl run`` flags: ``--set key=value`` per key, sorted (booleans as
    ``true``/``false``, as the app config writes them)."""
    return [
        arg
        for key, value in sorted(overrides.items())
        for arg in ("--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    ]


def typed(key: str, value: Any, defaults: Mapping[str, Scalar], where: str = "") -> Scalar:
    """``value`` converted to the type of ``key``'s default (text is parsed); an unknown
    key is a :class:`ConfigError` naming the closest known keys."""
    from fgl_flower.config import coerce_value

    if key not in defaults:
        close = difflib.get_close_matches(key, list(defaults), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(
            f"{where}{key}: unknown run-config key.{hint} `fgl config` lists every key "
            "with its default and meaning."
        )
    return coerce_value(f"{where}{key}", value, type(defaults[key]))


def flat_config(
    overrides: Mapping[str, Any], out: str | Path | None = None, where: str = ""
) -> dict[str, Scalar]:
    """The app defaults (``pyproject.toml``) with ``overrides`` applied, ready to validate.

    A one-shot method (O-pFGL) gets its fixed number of rounds unless ``num-rounds`` is
    overridden; a method's ``defaults`` (:class:`~fgl_flower.methods.MethodSpec`) fill the
    keys not overridden (``partition`` only with ``dataset``), and its ``demo`` values too in
    a run that names no dataset; a ``model`` left unset that does
    not serve the dataset's task becomes that task's backbone (``gin`` on graphs); a dataset group gets
    ``partition = per-dataset`` and its natural client count unless they are given; a
    ``num-clients`` left to follow the federation becomes :data:`OWN_FEDERATION_CLIENTS`
    (these engines start their own federation, sized by it); ``out-dir`` becomes ``out`` (default ``./runs/<method>-<dataset>-...``) and
    paths are made absolute (clients may run in another working directory). ``where``
    prefixes error messages (``"--set "`` for the command line).
    """
    from fgl_flower.app_defaults import load_app_defaults
    from fgl_flower.config import FOLLOW_FEDERATION
    from fgl_flower.datasets.catalog import DATASET_GROUPS, DATASETS
    from fgl_flower.datasets.files import is_file_reference
    from fgl_flower.datasets.partition.assign import is_assignment_file
    from fgl_flower.datasets.resolve import level_of
    from fgl_flower.methods import METHODS, method_option_defaults
    from fgl_flower.models.registry import model_for_task
    from fgl_flower.server_app import require_task

    defaults = load_app_defaults()
    known = {**method_option_defaults(), **defaults}  # a method registered at run time too
    flat: dict[str, Scalar] = dict(defaults)
    for key, value in overrides.items():
        flat[key] = typed(key, value, known, where)
    spec = METHODS.get(str(flat["method"]))
    if spec.fixed_rounds is not None and "num-rounds" not in overrides:
        flat["num-rounds"] = spec.fixed_rounds
    for key, value in spec.defaults.items():  # the method's demo where the user said nothing
        if key not in overrides and (key != "partition" or "dataset" not in overrides):
            flat[key] = value
    if "dataset" not in overrides:  # the no-option demo: small where the method is long
        flat.update({key: value for key, value in spec.demo.items() if key not in overrides})
    if is_assignment_file(str(flat["partition"])):  # --partition clients.npy: assign
        flat["data.assign.file"] = flat["partition"]
        flat["partition"] = "assign"
        if "num-clients" not in overrides:
            flat["num-clients"] = 0  # as many as the file names (an explicit count is checked)
    dataset = str(flat["dataset"])
    if is_file_reference(dataset):  # clients may run in another working directory
        flat["dataset"] = dataset = str(Path(dataset).expanduser().resolve())
    if dataset in DATASETS or dataset in DATASET_GROUPS or is_file_reference(dataset):
        if "model" not in overrides:
            flat["model"] = model_for_task(str(flat["model"]), level_of(dataset))
        task = task_of_run(flat)
        require_task(str(flat["method"]), task, dataset)  # before the method's own checks
        for key, value in task.defaults.items():  # e.g. link prediction's select-by
            if key not in overrides:
                flat[key] = value
    if _is_group(str(flat["dataset"])):  # one client per member dataset
        if "partition" not in overrides:
            flat["partition"] = "per-dataset"
        if "num-clients" not in overrides:
            flat["num-clients"] = 0  # the group's natural count
    if flat["num-clients"] == FOLLOW_FEDERATION:
        if "num-clients" in overrides:
            raise ConfigError(
                f"{where}num-clients={FOLLOW_FEDERATION} follows the SuperNodes of a federation that "
                "`flwr run .` is given, but this run starts its own federation: give the number "
                f"of clients, or leave it out for {OWN_FEDERATION_CLIENTS}."
            )
        flat["num-clients"] = OWN_FEDERATION_CLIENTS
    path = Path(out).expanduser().resolve() if out else default_out_dir(flat)
    flat["out-dir"] = str(path)
    for key in ("data-root", "data.files.dir", "data.assign.file", "data.nodes"):
        if flat.get(key):
            flat[key] = str(Path(str(flat[key])).expanduser().resolve())
    return flat


def task_of_run(flat: Mapping[str, Scalar]) -> Task:
    """The task of a flat config's run (``auto``: its dataset's own; ``ConfigError``)."""
    from fgl_flower.datasets.resolve import dataset_task
    from fgl_flower.registry import _norm

    dataset = str(flat["dataset"])
    scopes = {"", _norm(dataset)}
    options = {
        k.rpartition(".")[2]: v
        for k, v in flat.items()
        if k.startswith("data.") and _norm(k[5:].rpartition(".")[0]) in scopes and v != ""
    }
    return dataset_task(str(flat["task"]), dataset, options)


def _is_group(dataset: str) -> bool:
    from fgl_flower.datasets.catalog import DATASET_GROUPS

    return dataset in DATASET_GROUPS


def default_out_dir(flat: Mapping[str, Scalar]) -> Path:
    """``./runs/<method>-<dataset>-<partition>-c<clients>-s<seed>-<time>`` (a dataset file:
    its stem)."""
    from fgl_flower.datasets.files import dataset_label

    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"{flat['method']}-{dataset_label(str(flat['dataset']))}-{flat['partition']}-c{flat['num-clients']}-s{flat['seed']}-{stamp}"
    return (Path.cwd() / "runs" / name).resolve()


def check_out_dir(out: Path, resume: bool = False, overwrite: bool = False) -> None:
    """``out`` can be written, and holds no earlier run unless resumed or overwritten."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; choose a folder.")
    earlier = [n for n in ("summary.json", "rounds.jsonl") if (out / n).exists()]
    if earlier and not (resume or overwrite):
        raise ConfigError(
            f"--out {out} already holds a run ({', '.join(earlier)}): choose "
            f"another folder, continue it with --resume {out}, or pass --overwrite."
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise ConfigError(
            f"--out {out}: cannot write there ({e.strerror}); choose a writable folder."
        ) from None


def prepare(flat: Mapping[str, Scalar], engine: str = "inprocess", gpus: Sequence[str] = ()):
    """Validate everything that can fail before training, and build the partition cache.

    Returns the run's config with ``num-clients = 0`` resolved to the partition's natural
    count (:func:`resolve_num_clients`); run it with ``cfg.flat()``.
    """
    from fgl_flower.datasets import validate_data_config
    from fgl_flower.parse import parse_run_config
    from fgl_flower.server_app import check_method_task

    if engine not in ENGINES:
        raise ConfigError(f"engine {engine!r}: use one of {', '.join(ENGINES)}.")
    cfg = parse_run_config(flat)
    check_method_task(cfg)
    if cfg.data_root and not Path(cfg.data_root).is_dir():
        raise ConfigError(
            f"data-root {cfg.data_root} is not a folder: point it at the folder "
            "holding the raw datasets (or unset it to use $FGL_DATA_ROOT)."
        )
    validate_data_config(cfg.data_config())
    check_resources(cfg, engine, gpus)
    cfg = resolve_num_clients(cfg)
    from fgl_flower.datasets.class_check import check_training_classes

    # builds and caches the whole partition (torch only where it is not cached yet)
    check_training_classes(cfg.data_config(), allow=cfg.untrained_classes == "allow")
    return cfg


def resolve_num_clients(cfg):
    """``cfg`` with ``num-clients = 0`` replaced by the partition's natural number of clients
    (a dataset group's size, ``louvain-merge``'s large communities), parsed again so every
    check sees the count; ``cfg`` itself otherwise. Builds that partition's cache."""
    if cfg.num_clients != 0:
        return cfg
    from fgl_flower.datasets import natural_num_clients
    from fgl_flower.parse import parse_run_config

    return parse_run_config({**cfg.flat(), "num-clients": natural_num_clients(cfg.data_config())})


def visible_gpus() -> int:
    """GPUs torch sees here; torch is imported only where this count matters (importing it
    takes seconds, and a CPU simulation's launcher needs it for nothing else)."""
    import torch

    return torch.cuda.device_count()


def check_resources(cfg, engine: str, gpus: Sequence[str] = ()) -> None:
    """The run's devices and resources exist on this machine (``engine``: one of
    :data:`ENGINES`); one :class:`ConfigError` saying what to change."""
    import os

    from fgl_flower.device import resolve_device
    from fgl_flower.runtime.simulation import check_client_resources

    if engine != "simulation":
        if gpus:
            visible = visible_gpus()
            bad = [g for g in gpus if not g.isdigit() or int(g) >= visible]
            if bad:
                raise ConfigError(
                    f"--gpus {','.join(gpus)}: this machine has {visible} GPU(s) "
                    f"(ids 0..{visible - 1}); no GPU {', '.join(bad)}."
                )
            return
        resolve_device(cfg.device)  # the clients run on this machine, in this environment
        return
    cores = os.cpu_count() or 1
    if cfg.cpus_per_client > cores:
        raise ConfigError(
            f"--cpus-per-client {cfg.cpus_per_client}: this machine has {cores} CPUs, "
            "and Ray would never start a client that needs more."
        )
    if cfg.gpus_per_client > 0 and visible_gpus() == 0:
        raise ConfigError(
            f"--gpus-per-client {cfg.gpus_per_client}: this machine has no GPU visible "
            "to torch; leave it at 0 (CPU clients)."
        )
    check_client_resources(cfg.cpus_per_client, cfg.gpus_per_client)
    if cfg.device.startswith("cuda") and cfg.gpus_per_client == 0:
        raise ConfigError(
            f"device={cfg.device!r} in simulation needs a GPU share per client: Ray "
            "hides the GPUs from clients that reserve none. Add e.g. "
            "--gpus-per-client 0.25 (four clients per GPU), or use device='auto'."
        )
    if cfg.device == "cpu" and cfg.gpus_per_client > 0:
        raise ConfigError(
            f"--gpus-per-client {cfg.gpus_per_client} with device='cpu' reserves GPUs "
            "that no client uses; drop one of the two."
        )


def validate(
    flat: Mapping[str, Scalar],
    engine: str,
    gpus: Sequence[str] = (),
    *,
    resume: bool = False,
    overwrite: bool = False,
):
    """:func:`check_out_dir` and :func:`prepare` for the run folder ``flat["out-dir"]``;
    returns the prepared config. A refused run leaves only ``error.txt`` (the reason) in a
    folder that was empty, and raises."""
    out = Path(str(flat["out-dir"]))
    try:
        check_out_dir(out, resume=resume, overwrite=overwrite)
        return prepare(flat, engine, gpus)
    except FGLError as e:
        if not out.exists() or (out.is_dir() and not any(out.iterdir())):
            try:
                out.mkdir(parents=True, exist_ok=True)
                (out / "error.txt").write_text(f"{e}\n")
            except OSError:
                pass
        raise


def execute(
    cfg,
    engine: str,
    *,
    gpus: Sequence[str] = (),
    secure: bool = False,
    ray_address: str | None = None,
    stream: TextIO | None = None,
) -> Path:
    """Run the prepared ``cfg`` (:func:`validate`) on ``engine``; returns its run folder,
    which holds ``summary.json``. ``stream`` receives the output of ``flwr run``
    (default: stdout). Raises :class:`FGLError` if the run did not finish."""
    from fgl_flower.paths import app_dir

    flat = cfg.flat()
    out = Path(str(flat["out-dir"]))
    if engine == "inprocess":
        from fgl_flower.inprocess import run_inprocess

        run_inprocess(flat)
        code = 0
    else:
        from fgl_flower.results import results_written
        from fgl_flower.runtime import run_deployment, run_simulation

        done = results_written(out)  # the ServerApp's last line: what is left is stopped
        if engine == "deployment":
            code = run_deployment(
                app_dir(), flat, cfg.num_clients, gpus=gpus, secure=secure, stream=stream, done=done
            )
        else:
            code = run_simulation(
                app_dir(),
                flat,
                cfg.num_clients,
                cpus_per_client=cfg.cpus_per_client,
                gpus_per_client=cfg.gpus_per_client,
                ray_address=ray_address,
                stream=stream,
                done=done,
            )
    if code != 0 or not (out / "summary.json").exists():
        raise FGLError(failure_message(code, out))
    return out


def failure_message(code: int, out: Path) -> str:
    """What a run that ended without its summary left: its finished rounds, if any."""
    rounds = out / "rounds.jsonl"
    kept = (
        f"Finished rounds are in {rounds}."
        if rounds.is_file() and rounds.stat().st_size
        else "No round finished."
    )
    return f"The run failed (exit code {code}); see the log above. {kept}"

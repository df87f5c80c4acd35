"""Tuned rows of an experiment file: a row that says ``tune = {...}`` runs with the best
configuration of a study (``fgl tune``) instead of its own values.

::

    [defaults]
    tune = { trials = 12, trial-rounds = 100, space = { lr = "0.001..0.05:log" } }

    [[row]]
    method = "fedprox"            # tuned with the budget above, then run over the seeds
    ...

``tune`` (in ``[defaults]`` for every row, or in a row; a row's keys win, ``space`` merged):
``trials``, ``trial-rounds`` (default the row's rounds), ``seed`` (the trials' run seed,
default 0: pick one whose validation part is no reported seed's test part, e.g. with
five-group rotations the seed after the last reported one's neighbour), ``metric`` (default
the run's ``select-by``), ``pruner``, ``sampler-seed`` and ``space`` (added to the method's
space; ``"none"`` drops a key). ``fgl bench`` first runs each tuned row's study (resumable,
in ``<out>/<row>-tuned/study``) and records its outcome in ``<doc stem>.studies.jsonl``
beside the document (the best parameters, the trial counts and times: a page renders, and a
row runs, where the study folder is not); then the row runs its seeds with the best
parameters, recorded like any run. A row whose study is not recorded yet waits (the table
lists it below).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from fgl_flower.errors import ConfigError

#: Keys of a ``tune`` table.
TUNE_KEYS = ("trials", "trial-rounds", "seed", "metric", "pruner", "sampler-seed", "space")


def merge_tune(defaults: Mapping[str, Any], own: Mapping[str, Any], where: str) -> dict:
    """A row's ``tune`` table: ``defaults``' with the row's keys (``space`` merged)."""
    if not defaults and not own:
        return {}
    merged = {**defaults, **own}
    merged["space"] = {**defaults.get("space", {}), **own.get("space", {})}
    unknown = sorted(set(merged) - set(TUNE_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown tune keys {unknown}; known: {', '.join(TUNE_KEYS)}.")
    return merged


def study_spec(row) -> Any:
    """The :class:`~fgl_flower.tuning.StudySpec` of a tuned ``row`` (its run without the
    seed, its budget and space)."""
    from fgl_flower.launch import ROW_FLAGS
    from fgl_flower.tuning import StudySpec

    t = row.tune
    overrides = {ROW_FLAGS[k]: v for k, v in row.args.items() if k in ROW_FLAGS}
    overrides.update(row.overrides)
    if "seed" in t:  # the trials' seed (the rows' seeds are the reruns')
        overrides["seed"] = int(t["seed"])
    return StudySpec.of(
        overrides,
        t.get("space", {}),
        trials=int(t.get("trials", 20)),
        trial_rounds=t.get("trial-rounds"),
        metric=str(t.get("metric", "")),
        pruner=str(t.get("pruner", "median")),
        sampler_seed=int(t.get("sampler-seed", 0)),
    )


def study_key(row) -> str:
    """What identifies ``row``'s study in the records: its spec as canonical JSON."""
    return json.dumps(study_spec(row).to_json(), sort_keys=True)


def studies_path(doc: Path) -> Path:
    """The study records of results page ``doc``: ``<stem>.studies.jsonl`` beside it."""
    return doc.with_name(f"{doc.stem}.studies.jsonl")


def load_studies(path: Path) -> dict[str, dict[str, Any]]:
    """``study key -> record`` of ``path`` (none if it does not exist)."""
    if not path.exists():
        return {}
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            entry = json.loads(line)
            out[json.dumps(entry["study"], sort_keys=True)] = entry
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{path}:{n}: not a study record ({e}); restore it from git.") from e
    return out


def resolve(rows: list, doc: Path) -> tuple[list, list]:
    """``rows`` with each tuned row's best values (``Row.tuned``, which its command sets
    over its own) where its study is recorded, and the tuned rows still waiting for one."""
    studies = load_studies(studies_path(doc))
    ready, pending = [], []
    for row in rows:
        if not row.tune:
            ready.append(row)
            continue
        record = studies.get(study_key(row))
        if record is None:
            pending.append(row)
        else:
            ready.append(replace(row, tuned=dict(record["best"]["params"])))
    return ready, pending


def tune_command(row, study: Path) -> list[str]:
    """The ``fgl tune`` of a tuned ``row``'s study (its search only: no final seeds, the
    benchmark runs those)."""
    from fgl_flower.launch import ROW_FLAGS, set_flags

    spec = study_spec(row)
    cmd = ["fgl", "tune"]
    for k in ROW_FLAGS:
        if k in row.args:
            cmd += [f"--{k}", str(row.args[k])]
    if "seed" in row.tune:
        cmd += ["--seed", str(row.tune["seed"])]
    cmd += set_flags(row.overrides)
    for k, v in sorted(row.tune.get("space", {}).items()):
        cmd += ["--space", f"{k}={v}"]
    cmd += ["--trials", str(spec.trials), "--pruner", spec.pruner]
    cmd += ["--sampler-seed", str(spec.sampler_seed), "--final-seeds", "none"]
    if spec.trial_rounds is not None:
        cmd += ["--trial-rounds", str(spec.trial_rounds)]
    if spec.metric:
        cmd += ["--metric", spec.metric]
    if row.inprocess:
        cmd.append("--inprocess")
    return cmd + ["--study", str(study)]


def study_record(row, study: Path) -> dict[str, Any]:
    """The record of ``row``'s finished study (from its ``report.json``)."""
    report = json.loads((study / "report.json").read_text())
    return {
        "study": study_spec(row).to_json(),
        "best": report["best"],
        "metric": report["metric"],
        "trials": report["trials"],
        "search_seconds": report["search_seconds"],
        "default": report["default"],
    }

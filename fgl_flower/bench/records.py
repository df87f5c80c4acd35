"""Run records: what the tables read of every finished run, kept in
``<doc stem>.runs.jsonl`` beside the document, so tables render where the run folders are not."""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fgl_flower.bench.columns import COLUMNS, HISTORY_KEYS, eval_history, read_points
from fgl_flower.bench.experiment import Experiment, Row, record_key
from fgl_flower.datasets.root import file_lock
from fgl_flower.errors import ConfigError
from fgl_flower.results import atomic_write_text


def _bench_file(out: Path) -> dict[str, Any]:
    path = out / "bench.json"
    return json.loads(path.read_text()) if path.exists() else {}


def folder_command(out: Path) -> str | None:
    """The record key of the command that ran in run folder ``out`` (``bench.json``; folders
    of ``fgl bench`` before 2026-11-29 and of plain ``fgl run`` do not say: ``None``)."""
    return _bench_file(out).get("command")


def folder_codes(out: Path) -> list[str]:
    """The code versions (:func:`~fgl_flower.provenance.code_version`) that ran in ``out``,
    the first first (more than one: a run resumed by other code); ``[]`` where not said."""
    return list(_bench_file(out).get("code", []))


def _folder_summary(exp: Experiment, row: Row, seed: int) -> dict[str, Any] | None:
    """The summary of ``row``'s run of ``seed`` in its run folder (with ``wall_s`` from
    ``bench.json`` unless the run was resumed), or ``None``; also ``None`` for a folder whose
    ``bench.json`` names another command (the row changed since, e.g. its ``[defaults]``,
    which the folder name does not show)."""
    path = exp.out / row.slug / f"seed{seed}" / "summary.json"
    if not path.exists():
        return None
    bench, key = _bench_file(path.parent), record_key(exp, row)
    if bench.get("command", key) != key:
        return None
    summary = json.loads(path.read_text())
    summary["_dir"] = str(path.parent)
    if bench.get("code"):
        summary["code"] = bench["code"]
    if "wall_s" in bench and not bench.get("resumed"):
        summary["wall_s"] = bench["wall_s"]
    return summary


def collect(exp: Experiment, row: Row, records: Records | None = None) -> list[Mapping[str, Any]]:
    """The summaries of ``row``'s finished seeds: from the run folder, else from
    ``records``."""
    key = record_key(exp, row)
    summaries = []
    for seed in exp.seeds:
        summary = _folder_summary(exp, row, seed)
        if summary is None and records is not None:
            summary = records.get((key, seed))
        if summary is not None:
            summaries.append(summary)
    return summaries


#: ``(record key, seed) -> run record`` (:func:`run_record`).
Records = dict[tuple[str, int], dict[str, Any]]


#: Summary keys a run record keeps whole: the seed, the run's length and time, the probes.
RECORD_KEYS = (
    "seed",
    "total_time_s",
    "total_server_time_s",
    "rounds_completed",
    "num_rounds",
    "wall_s",
    "probes",
    "probes_dead",
    "code",
)
#: Keys of a summary point that say which round(s) it is, kept with its values.
POINT_META = ("round", "rounds", "selected_by")
#: Bulky parts kept only where a column of the experiment reads them (:attr:`Column.reads`).
OPTIONAL_KEYS = ("final_clients", "history")


def column_reads(exp: Experiment) -> set[str]:
    """The optional record parts that ``exp``'s columns (shown or paired) read."""
    return {part for name in exp.columns + exp.paired for part in COLUMNS[name].reads}


def run_record(
    summary: Mapping[str, Any], reads: set[str] | frozenset[str] = frozenset(OPTIONAL_KEYS)
) -> dict[str, Any]:
    """The record of a run: what :func:`trimmed` keeps of its summary (:data:`RECORD_KEYS`,
    the point values some column reads, ``final_clients`` if in ``reads``), and with
    ``history`` in ``reads`` the per-round :data:`HISTORY_KEYS` (:func:`eval_history`)."""
    record = trimmed(summary, reads)
    if "history" in reads:
        history = {k: h for k in HISTORY_KEYS if (h := eval_history(summary, k))}
        if history:
            record["history"] = history
    return record


def _points(summary: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Of each summary point that columns read, those values (and :data:`POINT_META`)."""
    return {
        point: {k: v for k, v in summary[point].items() if k in keys or k in POINT_META}
        for point, keys in read_points().items()
        if isinstance(summary.get(point), Mapping)
    }


def trimmed(record: Mapping[str, Any], reads: set[str] | frozenset[str]) -> dict[str, Any]:
    """``record`` (a summary, or a record written by an earlier version) as a run record
    keeps it: :data:`RECORD_KEYS`, of each summary point the values some column reads
    (:func:`~fgl_flower.bench.columns.read_points`, with :data:`POINT_META`), and the
    :data:`OPTIONAL_KEYS` in ``reads``."""
    kept = {
        k: v for k, v in record.items() if k in RECORD_KEYS or (k in OPTIONAL_KEYS and k in reads)
    }
    kept.update(_points(record))
    return kept


def records_path(doc: Path) -> Path:
    """The run records of results page ``doc``: ``<stem>.runs.jsonl`` beside it."""
    return doc.with_name(f"{doc.stem}.runs.jsonl")


def load_records(path: Path) -> Records:
    """The records in ``path`` (none if it does not exist)."""
    if not path.exists():
        return {}
    records: Records = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            entry = json.loads(line)
            records[(entry["command"], int(entry["seed"]))] = entry["run"]
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(
                f"{path}:{n}: not a run record ({e}); restore the file from git."
            ) from e
    return records


def records_lock(path: Path):
    """An inter-process lock for ``path``'s records (its lock file is outside the repo)."""
    tag = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    return file_lock(Path(tempfile.gettempdir()) / f"fgl-bench-records-{tag}.lock")


def sync_records(path: Path, exps: list[Experiment], lock: bool = True) -> Records:
    """Record the runs in ``exps``' run folders in ``path`` (a folder's run replaces its
    record), drop records no row of ``exps`` would show, and return the records; under
    :func:`records_lock` unless the caller holds it (``lock=False``)."""
    with records_lock(path) if lock else contextlib.nullcontext():
        old = load_records(path)
        shown: dict[str, set[int]] = {}
        reads: dict[str, set[str]] = {}
        for exp in exps:
            for row in exp.rows:
                key = record_key(exp, row)
                shown.setdefault(key, set()).update(exp.seeds)
                reads.setdefault(key, set()).update(column_reads(exp))
        records = {
            k: trimmed(v, reads[k[0]]) for k, v in old.items() if k[1] in shown.get(k[0], ())
        }
        for exp in exps:
            for row in exp.rows:
                key = record_key(exp, row)
                for seed in exp.seeds:
                    summary = _folder_summary(exp, row, seed)
                    if summary is not None:
                        records[(key, seed)] = run_record(summary, reads[key])
        if records != old:
            lines = [
                json.dumps({"command": k, "seed": s, "run": records[(k, s)]}, sort_keys=True)
                for k, s in sorted(records)
            ]
            atomic_write_text(path, "".join(line + "\n" for line in lines))
    return records


def record_study(doc: Path, record: Mapping[str, Any]) -> None:
    """Add (or replace) a tuned row's study ``record`` in the document's study records
    (:func:`~fgl_flower.bench.tuned.studies_path`), under the records' lock."""
    from fgl_flower.bench.tuned import load_studies, studies_path

    path = studies_path(doc)
    with records_lock(path):
        studies = load_studies(path)
        studies[json.dumps(record["study"], sort_keys=True)] = dict(record)
        lines = [json.dumps(studies[k], sort_keys=True) for k in sorted(studies)]
        atomic_write_text(path, "".join(line + "\n" for line in lines))

"""Experiment files: their rows, the ``fgl run`` command of each row, which rows
``--rows`` selects, and which document each file writes (a row's run folder is
checked to hold one command only)."""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fgl_flower.app_defaults import read_toml
from fgl_flower.bench.columns import COLUMNS, DEFAULT_COLUMNS
from fgl_flower.bench.tuned import merge_tune, resolve
from fgl_flower.errors import ConfigError
from fgl_flower.launch import ROW_FLAGS, set_flags

FLAGS = tuple(ROW_FLAGS)


@dataclass
class Row:
    """One table row: a run configuration repeated over seeds."""

    group: str
    args: dict[str, Any]
    overrides: dict[str, Any] = field(default_factory=dict)
    paper: float | str | None = None
    own: dict[str, Any] = field(default_factory=dict)  # the row's own `set` (not defaults')
    inprocess: bool = False  # `fgl run --inprocess`
    id: str = ""  # a name other rows compare against (``versus``)
    versus: str = ""  # the ``id`` of the row this one is compared with, seed by seed
    tune: dict[str, Any] = field(default_factory=dict)  # its study's budget (bench.tuned)
    tuned: dict[str, Any] | None = None  # the study's best values, set over ``overrides``

    @property
    def method(self) -> str:
        """The method as the tables show it (``fedprox, tuned`` for a tuned row)."""
        return f"{self.args.get('method')}" + (", tuned" if self.tune else "")

    @property
    def label(self) -> str:
        """``group (method)``: how the paired table names a row."""
        return f"{self.group} ({self.method})"

    @property
    def slug(self) -> str:
        """Run-folder name: dataset, partition, clients, method, model and the row's own
        overrides (what tells rows of one file apart)."""
        parts = [
            str(self.args.get(k, ""))
            for k in ("dataset", "partition", "clients", "method", "model")
        ]
        extra = "-".join(f"{k}={v}" for k, v in sorted(self.own.items()))
        slug = "-".join(p for p in parts if p) + (f"-{extra}" if extra else "")
        slug += "-tuned" if self.tune else ""  # its tuned values are in its command
        return re.sub(r"[^\w.,=+-]", "_", slug)

    def command(self, seed: int | str, out: str, overwrite: bool = True) -> list[str]:
        """The ``fgl run`` of this row; ``overwrite`` reruns a folder left without a summary
        (what the benchmark needs; the documents show the command without it)."""
        cmd = ["fgl", "run"]
        for k in FLAGS:
            if k in self.args:
                cmd += [f"--{k}", str(self.args[k])]
        cmd += ["--seed", str(seed)]
        if self.inprocess:
            cmd.append("--inprocess")
        cmd += set_flags({**self.overrides, **(self.tuned or {})})
        return cmd + ["--out", out] + (["--overwrite"] if overwrite else [])


@dataclass
class Experiment:
    title: str
    doc: Path
    out: Path
    seeds: list[int]
    rows: list[Row]
    root: Path
    notes: str = ""
    columns: tuple[str, ...] = DEFAULT_COLUMNS
    doc_title: str = ""
    source: Path | None = None  # the experiment file
    order: int = 0  # position among the sections of a shared ``doc``
    paired: tuple[str, ...] = ()  # metric columns compared seed by seed (rows with ``versus``)
    pending: list[Row] = field(default_factory=list)  # tuned rows waiting for their study


def _doc_path(spec: Mapping[str, Any], path: Path, root: Path) -> Path:
    """The results document of experiment file ``path`` (``doc``, or one named after it)."""
    return root / spec.get("doc", f"docs/results/{path.stem}.md")


def load_experiment(path: str | Path, root: Path | None = None) -> Experiment:
    """Parse an experiment file; relative paths are resolved against ``root`` (cwd)."""
    path = Path(path)
    root = root or Path.cwd()
    spec = read_toml(path)
    defaults = spec.get("defaults", {})
    rows = []
    for i, raw in enumerate(spec.get("row", [])):
        merged = {**defaults, **raw}
        fields = {"group", "set", "paper", "inprocess", "id", "versus", "tune"}
        unknown = set(merged) - set(FLAGS) - fields
        if unknown:
            raise ConfigError(f"{path}: row {i} has unknown fields {sorted(unknown)}.")
        rows.append(
            Row(
                group=str(merged.get("group", merged.get("dataset", ""))),
                args={k: merged[k] for k in FLAGS if k in merged},
                overrides={**defaults.get("set", {}), **raw.get("set", {})},
                paper=merged.get("paper"),
                own=dict(raw.get("set", {})),
                inprocess=bool(merged.get("inprocess", False)),
                id=str(raw.get("id", "")),
                versus=str(raw.get("versus", "")),
                tune=merge_tune(defaults.get("tune", {}), raw.get("tune", {}), f"{path}: row {i}"),
            )
        )
    if not rows:
        raise ConfigError(f"{path}: no [[row]] entries.")
    columns = tuple(spec.get("columns", DEFAULT_COLUMNS))
    paired = tuple(spec.get("paired", ()))
    ids = {row.id for row in rows if row.id}
    missing = sorted({row.versus for row in rows if row.versus} - ids)
    if missing:
        raise ConfigError(f"{path}: versus names no row id: {missing}; ids: {sorted(ids)}.")
    unknown = [c for c in columns + paired if c not in COLUMNS]
    if unknown:
        raise ConfigError(f"{path}: unknown columns {unknown}; known: {', '.join(COLUMNS)}.")
    doc = _doc_path(spec, path, root)
    rows, pending = resolve(rows, doc)
    return Experiment(
        title=spec.get("title", path.stem),
        doc=doc,
        out=root / spec.get("out", f"runs/{path.stem}"),
        seeds=list(spec.get("seeds", [0, 1, 2])),
        rows=rows,
        root=root,
        notes=spec.get("notes", ""),
        columns=columns,
        doc_title=spec.get("doc_title", ""),
        source=path,
        order=int(spec.get("order", 0)),
        paired=paired,
        pending=pending,
    )


def select_rows(
    exp: Experiment, patterns: list[str] | None, rows: list[Row] | None = None
) -> list[Row]:
    """The rows (``exp.rows`` unless given) whose run-folder name (:attr:`Row.slug`)
    matches one of the shell-style ``patterns`` (e.g. ``*fedavg*``; all if ``None``)."""
    rows = exp.rows if rows is None else rows
    if patterns is None:
        return list(rows)
    return [row for row in rows if any(fnmatch.fnmatchcase(row.slug, p) for p in patterns)]


def doc_command(exp: Experiment, row: Row) -> str:
    """The command of ``row`` as its table shows it (``SEED`` for the seed)."""
    out = exp.out.relative_to(exp.root) if exp.out.is_relative_to(exp.root) else exp.out
    return shlex.join(row.command("SEED", f"{out}/{row.slug}/seedSEED", overwrite=False))


def record_key(exp: Experiment, row: Row) -> str:
    """What identifies ``row``'s runs in the records: its command without
    :data:`OUTCOME_NEUTRAL_KEYS` (as kept lines are matched)."""
    return _command_key(f"`{doc_command(exp, row)}`")[1:-1]


#: Run-config keys that never change a run's numbers: a kept line still stands for a command
#: that differs from it only in these (checkpoints are bit-exact, a test checks resume;
#: ``untrained-classes`` only decides whether a run starts).
OUTCOME_NEUTRAL_KEYS = ("checkpoint-every", "progress", "untrained-classes")


def _command_key(cell: str) -> str:
    """A command cell as a key for kept lines: without ``--overwrite`` (pages written before
    it was left out show it) and without :data:`OUTCOME_NEUTRAL_KEYS`."""
    cell = cell.replace(" --overwrite`", "`")
    for key in OUTCOME_NEUTRAL_KEYS:
        cell = re.sub(rf" --set {re.escape(key)}=\S+", "", cell)
    return cell


def doc_sections(exps: list[Experiment]) -> dict[Path, list[Experiment]]:
    """Every document written by ``exps`` with all of its sections: the given experiments
    plus the other experiment files in their folders that name the same ``doc`` (so that
    running one file of a shared document keeps the others' tables), ordered by their
    ``order`` key, then file name."""
    by_doc: dict[Path, dict[Path | None, Experiment]] = {}
    for exp in exps:
        by_doc.setdefault(exp.doc, {})[exp.source] = exp
    root = exps[0].root
    folders = {exp.source.parent for exp in exps if exp.source is not None}
    for folder in sorted(folders):
        for path in sorted(folder.glob("*.toml")):
            if any(path in group for group in by_doc.values()):
                continue
            try:
                spec = read_toml(path)
            except ValueError as e:  # tomllib.TOMLDecodeError
                raise ConfigError(
                    f"{path}: not valid TOML ({e}); it sits beside an experiment "
                    "file, so it may hold a section of the same document."
                ) from e
            doc = _doc_path(spec, path, root)
            if doc not in by_doc:
                continue  # another document's experiment, or not an experiment file
            by_doc[doc][path] = load_experiment(path, root)  # a broken section is an error
    return {
        doc: sorted(group.values(), key=lambda e: (e.order, e.source.name if e.source else ""))
        for doc, group in by_doc.items()
    }


def check_run_folders(exps: list[Experiment]) -> None:
    """Raise if two rows of one document (``exps`` and their sibling sections) would share a
    run folder with different commands: a row's folder name holds only its *own* overrides,
    so files whose ``[defaults]`` differ must tell their rows apart in the rows' ``set``
    (:data:`OUTCOME_NEUTRAL_KEYS` may differ)."""
    seen: dict[Path, tuple[str, Path | None]] = {}
    for group in doc_sections(exps).values():
        for exp in group:
            for row in exp.rows:
                folder = exp.out / row.slug
                cmd = _command_key(f"`{shlex.join(row.command('SEED', 'OUT', overwrite=False))}`")
                other = seen.setdefault(folder, (cmd, exp.source))
                if other[0] != cmd:
                    raise ConfigError(
                        f"{exp.source} and {other[1]}: two different runs would share the run "
                        f"folder {folder} ({cmd} vs {other[0]}); put the setting that tells "
                        "them apart in the rows' own `set`."
                    )

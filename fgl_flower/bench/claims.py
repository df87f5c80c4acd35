"""The results index: per paper its headline claims, the paper's number beside ours with a
95 % interval, a verdict in a few words, and a figure (``fgl bench --index``).

A claims file (``experiments/<paper>/claims.toml``) says what a paper claims and which rows
of its experiment files measure it; every number of "ours" is computed from those rows' runs,
as the results pages read them (a run folder on this machine, else its record beside the
page; for a row whose runs predate records, its kept line on the page)::

    paper = "FedSpray (KDD 2024)"
    results = "docs/results/fedspray.md"    # the full tables (repository-relative)
    method = "docs/methods/fedspray.md"     # optional: the method page (the why)
    about = "Physics, 12 official partitions, GCN, 300 rounds, seeds 0-2."
    order = 1                               # position in the index

    [[claim]]
    claim = "FedSpray accuracy, overall / minority (Table 2)"
    row = "table2_physics.toml:Physics-files-12-fedspray-gcn"  # file : run folder (one row)
    metric = ["acc", "minority"]            # columns of COLUMNS, one number each
    paper = [95.59, 80.98]                  # in points; default: the row's ``paper`` ([]: none)
    verdict = "yes: within 0.4 / 1.2"       # starts with one of VERDICTS
    note = "why, in a footnote"             # optional

A claim with ``versus = "file.toml:pattern"`` is a difference: ours is row minus ``versus``,
paired by seed (same partition, splits and initial model), and ``paper`` is the paper's
difference. A claim may read a script's records instead of bench rows: ``records =
"baselines.runs.jsonl"`` (beside ``results``), ``where = {method = "fedavg", side = "ours"}``,
``value = "test_acc"`` (a fraction, or points with ``scale = 1``), and ``versus_where``; a
dotted key reads a nested field (``"job.dataset" = "Cora"``).

Ours: the mean over seeds and the Student-t 95 % interval of the mean (of the paired
differences, for a difference). A row without records shows its kept line's mean, and the
interval that its mean ± population std over n seeds implies (marked :data:`FROM_PAGE`;
none for a column whose cell shows another spread, unless :data:`RUN_STD` names where the
page keeps that std); a
difference involving one is the page's paired line where it has one, else the difference of
the two means with Welch's interval (not paired, so wider than a paired one).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fgl_flower.app_defaults import read_toml
from fgl_flower.bench.columns import COLUMNS
from fgl_flower.bench.experiment import Experiment, Row, doc_command, load_experiment
from fgl_flower.bench.figures import draw, plotted
from fgl_flower.bench.records import collect, load_records, records_path
from fgl_flower.bench.render import Kept, kept_lines, paired_differences, signed
from fgl_flower.errors import ConfigError
from fgl_flower.results import atomic_write_text
from fgl_flower.stats import Estimate

#: How a verdict starts.
VERDICTS = ("yes", "partly", "no", "not tested", "ours only")

#: Marks a number read from a results page's kept line (its runs predate run records).
FROM_PAGE = "†"

INDEX = "docs/results/README.md"

#: The claims file of an experiments folder.
CLAIMS = "claims.toml"

CLAIM_KEYS = {
    "claim",
    "row",
    "versus",
    "metric",
    "paper",
    "verdict",
    "note",
    "records",
    "where",
    "versus_where",
    "value",
    "scale",
}
FILE_KEYS = {"paper", "results", "method", "about", "order", "claim"}


@dataclass
class Claim:
    """One claim of a paper and what measures it (see the module docstring)."""

    text: str
    verdict: str
    metrics: tuple[str, ...]
    paper: tuple[float, ...] | None
    difference: bool
    ours: tuple[Estimate, ...]
    note: str = ""

    @property
    def word(self) -> str:
        """The verdict's first word(s): one of :data:`VERDICTS`."""
        return next(v for v in VERDICTS if self.verdict.startswith(v))


@dataclass
class Paper:
    """A claims file: the paper, its pages and claims."""

    title: str
    results: str
    method: str
    about: str
    order: int
    claims: list[Claim]
    key: str  # the folder name: the figure's name


def _numbers(value: Any) -> tuple[float, ...] | None:
    """``95.5``, ``[95.5, 80.9]`` or a row's ``"95.59 ± 0.24 / 80.98 ± 1.39"`` as floats (``None`` if
    absent or not numeric)."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return (float(value),)
    if isinstance(value, list):  # [] says: the paper gives no number
        return tuple(float(v) for v in value) or None
    parts = [_LEADING.match(part.strip()) for part in str(value).split("/")]
    return tuple(float(m[0]) for m in parts) if all(parts) else None


_LEADING = re.compile(r"^[-+]?\d+(?:\.\d+)?(?=$| ±)")


class _Pages:
    """The experiment files, records and kept page lines a claims file reads (each loaded
    once)."""

    def __init__(self, folder: Path, root: Path) -> None:
        self.folder, self.root = folder, root
        self._exps: dict[str, Experiment] = {}
        self._records: dict[Path, Any] = {}
        self._kept: dict[Path, Kept] = {}

    def row(self, ref: str, where: str) -> tuple[Experiment, Row]:
        name, sep, pattern = ref.partition(":")
        if not sep:
            raise ConfigError(f"{where}: {ref!r}: write FILE.toml:RUN-FOLDER-PATTERN.")
        if name not in self._exps:
            path = self.folder / name
            if not path.exists():
                known = ", ".join(
                    sorted(p.name for p in self.folder.glob("*.toml") if p.name != CLAIMS)
                )
                raise ConfigError(f"{where}: no experiment file {path}; here: {known}.")
            self._exps[name] = load_experiment(path, self.root)
        exp = self._exps[name]
        rows = [r for r in exp.rows if fnmatch.fnmatchcase(r.slug, pattern)]
        if len(rows) != 1:
            slugs = "\n  ".join(r.slug for r in exp.rows)
            raise ConfigError(
                f"{where}: {ref!r} matches {len(rows)} rows of {name}, not one; its run "
                f"folders:\n  {slugs}"
            )
        return exp, rows[0]

    def runs(self, exp: Experiment, row: Row) -> list[Mapping[str, Any]]:
        path = records_path(exp.doc)
        if path not in self._records:
            self._records[path] = load_records(path)
        return collect(exp, row, self._records[path])

    def kept(self, exp: Experiment) -> Kept:
        if exp.doc not in self._kept:
            self._kept[exp.doc] = kept_lines(exp.doc.read_text()) if exp.doc.exists() else Kept()
        return self._kept[exp.doc]


_MEAN_STD = re.compile(r"^([-+]?\d+(?:\.\d+)?)(?: ± (\d+(?:\.\d+)?))?(?: \((\d+) of \d+ runs\))?$")

#: Columns whose cell shows another spread than the population std over runs: where a
#: kept line holds that std (for an interval), by the column that shows it.
RUN_STD = {"acc-paper": "acc-paper-runstd"}


def _level(pages: _Pages, exp: Experiment, row: Row, metric: str, where: str) -> Estimate:
    column = COLUMNS[metric]
    values = [column.scale * v for r in pages.runs(exp, row) if (v := column.value(r)) is not None]
    if values:
        return Estimate.of(values)
    key = (doc_command(exp, row), exp.seeds)
    std_header = COLUMNS[RUN_STD[metric]].header if metric in RUN_STD else column.header
    cells = pages.kept(exp).cells(*key, [column.header, "seeds", std_header])
    match = _MEAN_STD.match(cells[0]) if cells else None
    if not match:
        raise ConfigError(
            f"{where}: row {row.slug} of {exp.source} has no runs, no records and no kept "
            f"{column.header!r} on {exp.doc}: run it (fgl bench {exp.source})."
        )
    n = int(match[3] or cells[1].removesuffix(FROM_PAGE).strip().partition("/")[0])
    mean = float(match[1])
    if metric in RUN_STD:  # the cell's ± is not over runs; the runs' std is its own column
        std = re.match(r"^(\d+(?:\.\d+)?)$", cells[2])
        return Estimate.from_mean_std(mean, float(std[1]), n) if std else _bare(mean, n)
    if match[2] is None or column.cell is not None:  # a count, or a cell of its own kind
        return _bare(mean, n)
    return Estimate.from_mean_std(mean, float(match[2]), n)


def _bare(mean: float, n: int) -> Estimate:
    """A page's mean without an interval (its cell shows no spread over runs)."""
    return Estimate(mean, None, None, n, from_page=True)


_PER_SEED = re.compile(r"(\d+): ([-+]?\d+(?:\.\d+)?)")


def _difference(
    pages: _Pages, a: tuple[Experiment, Row], b: tuple[Experiment, Row], metric: str, where: str
) -> Estimate:
    column = COLUMNS[metric]
    diffs = paired_differences(pages.runs(*a), pages.runs(*b), column)
    if diffs:
        return Estimate.of(list(diffs.values()))
    exp, row = a
    line = pages.kept(exp).paired.get((exp.title, row.label, b[1].label, column.header))
    if line is None:  # a row without records: the difference of the page's two means
        return _level(pages, *a, metric, where).minus(_level(pages, *b, metric, where))
    values = [float(v) for _, v in _PER_SEED.findall(line[3])]
    est = Estimate.of(values)
    return Estimate(est.mean, est.low, est.high, est.n, from_page=True, sd=est.sd)


def _field(rec: Mapping[str, Any], key: str) -> Any:
    """``rec[key]``, a dotted ``key`` reading nested mappings (``None`` where absent)."""
    for part in key.split("."):
        if not isinstance(rec, Mapping):
            return None
        rec = rec.get(part)
    return rec


def _script_values(
    folder: Path, results: Path, entry: Mapping[str, Any], where_key: str
) -> dict[int, float]:
    path = results.parent / entry["records"]
    wanted = entry[where_key]
    scale = float(entry.get("scale", 100))
    out: dict[int, float] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if all(_field(rec, k) == v for k, v in wanted.items()):
            seed = int(rec["seed"])
            if seed in out:
                raise ConfigError(f"{folder}: {wanted} selects two records of seed {seed}.")
            out[seed] = scale * float(rec[entry["value"]])
    if not out:
        raise ConfigError(f"{folder}: no record of {path} has {wanted}.")
    return out


def _claim(pages: _Pages, results: Path, entry: Mapping[str, Any], where: str) -> Claim:
    unknown = set(entry) - CLAIM_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(CLAIM_KEYS)}.")
    for key in ("claim", "verdict"):
        if not entry.get(key):
            raise ConfigError(f"{where}: give `{key}`.")
    verdict = str(entry["verdict"])
    if not verdict.startswith(VERDICTS):
        raise ConfigError(f"{where}: a verdict starts with one of {', '.join(VERDICTS)}.")
    paper = _numbers(entry.get("paper"))
    if "records" in entry:
        mine = _script_values(pages.folder, results, entry, "where")
        if "versus_where" in entry:
            theirs = _script_values(pages.folder, results, entry, "versus_where")
            seeds = sorted(mine.keys() & theirs.keys())
            ours = (Estimate.of([mine[s] - theirs[s] for s in seeds]),)
        else:
            ours = (Estimate.of(list(mine.values())),)
        return Claim(
            str(entry["claim"]),
            verdict,
            (str(entry["value"]),),
            paper,
            "versus_where" in entry,
            ours,
            str(entry.get("note", "")),
        )
    if "row" not in entry:
        raise ConfigError(f"{where}: give `row` (FILE.toml:RUN-FOLDER) or `records`.")
    metrics = entry.get("metric", "acc")
    metrics = tuple([metrics] if isinstance(metrics, str) else metrics)
    bad = [m for m in metrics if m not in COLUMNS]
    if bad:
        raise ConfigError(f"{where}: unknown metric {bad}; known: {', '.join(COLUMNS)}.")
    a = pages.row(str(entry["row"]), where)
    if "versus" in entry:
        b = pages.row(str(entry["versus"]), where)
        ours = tuple(_difference(pages, a, b, m, where) for m in metrics)
    else:
        ours = tuple(_level(pages, *a, m, where) for m in metrics)
        paper = paper if "paper" in entry else _numbers(a[1].paper)
    if paper is not None and len(paper) != len(metrics):
        raise ConfigError(
            f"{where}: {len(paper)} paper numbers for {len(metrics)} metrics {list(metrics)}."
        )
    return Claim(
        str(entry["claim"]),
        verdict,
        metrics,
        paper,
        "versus" in entry,
        ours,
        str(entry.get("note", "")),
    )


def load_claims(path: Path, root: Path) -> Paper:
    """Parse a claims file and compute ours for each claim (see the module docstring)."""
    spec = read_toml(path)
    unknown = set(spec) - FILE_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(FILE_KEYS)}.")
    for key in ("paper", "results"):
        if key not in spec:
            raise ConfigError(f"{path}: give `{key}`.")
    results = root / spec["results"]
    pages = _Pages(path.parent, root)
    claims = [
        _claim(pages, results, entry, f"{path} claim {i + 1}")
        for i, entry in enumerate(spec.get("claim", []))
    ]
    return Paper(
        title=spec["paper"],
        results=spec["results"],
        method=spec.get("method", ""),
        about=" ".join(spec.get("about", "").split()),
        order=int(spec.get("order", 0)),
        claims=claims,
        key=path.parent.name,
    )


def claims_files(root: Path) -> list[Path]:
    """Every ``experiments/*/claims.toml`` under ``root``."""
    return sorted((root / "experiments").glob(f"*/{CLAIMS}"))


# --- rendering ---------------------------------------------------------------------------


def _num(x: float, difference: bool) -> str:
    """Two decimals, a difference with its sign (:func:`~fgl_flower.bench.render.signed`)."""
    return signed(x) if difference else signed(x).lstrip("+")


def _ours_cell(claim: Claim) -> str:
    parts = []
    for est in claim.ours:
        text = _num(est.mean, claim.difference)
        if claim.difference and est.low is not None:
            text += f" [{_num(est.low, True)}, {_num(est.high, True)}]"
        parts.append(text + (f" {FROM_PAGE}" if est.from_page else ""))
    return " / ".join(parts)


def _paper_cell(claim: Claim) -> str:
    if claim.paper is None:
        return "—"
    return " / ".join(_num(v, claim.difference) for v in claim.paper)


def _rel(target: str) -> str:
    """A repository path as a link from ``docs/results/``."""
    path = Path(target)
    if path.parts[:2] == ("docs", "results"):
        return str(Path(*path.parts[2:]))
    if path.parts[:1] == ("docs",):
        return "../" + str(Path(*path.parts[1:]))
    return "../../" + target


def render_paper(paper: Paper) -> str:
    """The index section of one paper: heading, links, table, footnotes, figure."""
    links = f"[full tables]({_rel(paper.results)})"
    if paper.method:
        links += f" · [method]({_rel(paper.method)})"
    lines = [f"## {paper.title}", "", f"{links}. {paper.about}".strip(), ""]
    if any(plotted(claim) for claim in paper.claims):
        lines += [
            f"![{paper.title}: ours against the paper, 95 % intervals]({figure_name(paper)})",
            "",
        ]
    lines += [
        "| claim | paper | ours | verdict |",
        "|---|---|---|---|",
    ]
    notes = []
    for claim in paper.claims:
        mark = ""
        if claim.note:
            notes.append(claim.note.strip())
            mark = f"[^{paper.key}-{len(notes)}]"
        lines.append(
            f"| {claim.text}{mark} | {_paper_cell(claim)} | {_ours_cell(claim)} | {claim.verdict} |"
        )
    lines.append("")
    for n, note in enumerate(notes, 1):
        lines.append(f"[^{paper.key}-{n}]: {' '.join(note.split())}")
    return "\n".join(lines).rstrip() + "\n"


HEADER = f"""# Results: what reproduces

Per paper its headline claims: the paper's number, ours (the mean over seeds; a difference of
two methods with its 95 % t-interval in brackets, paired by seed), and a verdict in a few words;
the footnotes and method pages say why. Accuracies are in points; "a / b" pairs follow the claim
(e.g. overall / minority). The figure above each table shows every claim in points that has
the paper's number, with its interval. {FROM_PAGE}: from a kept line of the results page (runs that predate run records): a
level's interval from its mean ± std; a difference without the page's per-seed line is the
difference of the two means with Welch's interval (unpaired, so wider). Generated by
`fgl bench --index` from `experiments/*/claims.toml` and the run records; do not edit by hand.
"""


def render_index(papers: list[Paper]) -> str:
    return "\n".join([HEADER, *(render_paper(p) for p in papers)])


def figure_name(paper: Paper) -> str:
    return f"{paper.key}-claims.svg"


def write_index(root: Path, figures: bool = True) -> list[Path]:
    """Render ``docs/results/README.md`` (and each paper's figure beside it) from every
    claims file under ``root``; returns the files written."""
    papers = sorted(
        (load_claims(p, root) for p in claims_files(root)), key=lambda p: (p.order, p.key)
    )
    if not papers:
        raise ConfigError(f"no experiments/*/claims.toml under {root}.")
    index = root / INDEX
    atomic_write_text(index, render_index(papers))
    written = [index]
    if figures:
        for paper in papers:
            path = index.parent / figure_name(paper)
            if draw(paper, path):
                written.append(path)
    return written

"""The results index (``fgl_flower.bench.claims``): ours from run folders, records and kept
page lines; paired and unpaired differences; the rendered table, footnotes and figure; and the
committed index equal to what its claims files and records render."""

import json
import statistics
from pathlib import Path

import pytest

from fgl_flower.bench import COLUMNS, load_experiment, write_docs
from fgl_flower.bench.claims import INDEX, claims_files, load_claims, render_index, render_paper
from fgl_flower.bench.figures import draw
from fgl_flower.errors import ConfigError
from fgl_flower.stats import Estimate

ROOT = Path(__file__).resolve().parents[1]

EXPERIMENT = """title = "T"
doc = "docs/results/toy.md"
out = "runs/toy"
seeds = [0, 1, 2]
paired = ["acc"]
columns = ["acc", "minority"]
[defaults]
rounds = 5
dataset = "Cora"
partition = "louvain"
clients = 3
[[row]]
method = "fedspray"
paper = "81.0 ± 1.0 / 60.5"
id = "spray"
[[row]]
method = "fedavg"
id = "avg"
[[row]]
method = "local"
versus = "avg"
"""

#: per method: test accuracy per seed (fractions)
ACC = {"fedspray": [0.80, 0.82, 0.84], "fedavg": [0.75, 0.78, 0.78], "local": [0.70, 0.71, 0.75]}


def _folder(tmp_path: Path, with_runs=("fedspray", "fedavg", "local")) -> Path:
    folder = tmp_path / "experiments" / "toy"
    folder.mkdir(parents=True)
    (folder / "table.toml").write_text(EXPERIMENT)
    exp = load_experiment(folder / "table.toml", tmp_path)
    for row in exp.rows:
        method = row.args["method"]
        if method not in with_runs:
            continue
        for seed, acc in enumerate(ACC[method]):
            out = exp.out / row.slug / f"seed{seed}"
            out.mkdir(parents=True)
            point = {"round": 5, "test_acc": acc, "test_minority_acc": acc - 0.2}
            summary = {"best_val": point, "final": point, "seed": seed, "rounds_completed": 5}
            (out / "summary.json").write_text(json.dumps({**summary, "total_time_s": 1.0}))
    return folder


def _claims(folder: Path, body: str) -> Path:
    path = folder / "claims.toml"
    path.write_text(
        'paper = "Toy (2026)"\nresults = "docs/results/toy.md"\nabout = "Cora, 3 seeds."\n' + body
    )
    return path


LEVEL = """[[claim]]
claim = "accuracy (Table 1)"
row = "table.toml:*fedspray*"
metric = ["acc", "minority"]
verdict = "yes: within a point"
note = "why, in words."
"""

DIFFERENCE = """[[claim]]
claim = "spray above avg"
row = "table.toml:*fedspray*"
versus = "table.toml:*fedavg*"
paper = 1.5
verdict = "partly: larger"
"""


def test_level_and_paired_difference_from_runs(tmp_path):
    folder = _folder(tmp_path)
    paper = load_claims(_claims(folder, LEVEL + DIFFERENCE), tmp_path)
    level, diff = paper.claims
    assert level.paper == (81.0, 60.5)  # from the row's `paper`, stds dropped
    assert level.ours[0].mean == pytest.approx(82.0)
    assert level.ours[1].mean == pytest.approx(62.0)
    # t(0.975, 2) = 4.303; sample std of 80, 82, 84 is 2
    assert level.ours[0].high - level.ours[0].mean == pytest.approx(4.303 * 2 / 3**0.5, 1e-3)
    d = [100 * (a - b) for a, b in zip(ACC["fedspray"], ACC["fedavg"])]
    assert diff.difference and diff.ours[0].mean == pytest.approx(statistics.fmean(d))
    assert not diff.ours[0].from_page
    text = render_paper(paper)
    assert "| accuracy (Table 1)[^toy-1] | 81.00 / 60.50 | 82.00 / 62.00 | yes: within a" in text
    assert "| spray above avg | +1.50 | +5.00 [+2.52, +7.48] | partly: larger |" in text
    assert "[^toy-1]: why, in words." in text
    assert "![Toy (2026)" in text


def test_rows_without_runs_read_the_kept_lines_of_the_page(tmp_path):
    folder = _folder(tmp_path)
    write_docs([load_experiment(folder / "table.toml", tmp_path)])  # the page, all rows
    for summary in (tmp_path / "runs").rglob("summary.json"):  # then the runs are gone,
        summary.unlink()
    (tmp_path / "docs" / "results" / "toy.runs.jsonl").unlink()  # and their records
    paper = load_claims(_claims(folder, LEVEL + DIFFERENCE), tmp_path)
    level, diff = paper.claims
    assert level.ours[0].from_page and level.ours[0].mean == pytest.approx(82.0)
    # the interval that mean ± population std over 3 seeds implies: the same as from the runs
    assert level.ours[0].high == pytest.approx(82.0 + 4.303 * 2 / 3**0.5, abs=0.01)
    assert diff.ours[0].from_page  # no paired line for these two: Welch on the two means
    assert diff.ours[0].mean == pytest.approx(82.0 - statistics.fmean([75, 78, 78]), abs=0.01)
    paired = load_claims(
        _claims(
            folder,
            '[[claim]]\nclaim = "local - avg"\nrow = "table.toml:*local*"\n'
            'versus = "table.toml:*fedavg*"\nverdict = "no"\n',
        ),
        tmp_path,
    ).claims[0]
    # the page's paired line (local versus avg) gives the per-seed differences
    want = [100 * (a - b) for a, b in zip(ACC["local"], ACC["fedavg"])]
    assert paired.ours[0].from_page and paired.ours[0].mean == pytest.approx(
        statistics.fmean(want), abs=0.01
    )
    assert " † |" in render_paper(paper)


def test_a_row_with_nothing_measured_is_an_error(tmp_path):
    folder = _folder(tmp_path, with_runs=("fedavg",))
    with pytest.raises(ConfigError, match="no runs, no records"):
        load_claims(_claims(folder, LEVEL), tmp_path)


@pytest.mark.parametrize(
    "body, message",
    [
        (LEVEL.replace("*fedspray*", "*fed*"), "matches 2 rows"),
        (LEVEL.replace("table.toml", "other.toml"), "no experiment file"),
        (LEVEL.replace('"minority"', '"minorty"'), "unknown metric"),
        (LEVEL.replace('"yes: within', '"fine: within'), "a verdict starts with"),
        (LEVEL.replace("note =", "notes ="), "unknown keys"),
        (LEVEL.replace("verdict =", "paper = [1.0]\nverdict ="), "1 paper numbers for 2"),
    ],
)
def test_claims_files_are_checked(tmp_path, body, message):
    folder = _folder(tmp_path)
    with pytest.raises(ConfigError, match=message):
        load_claims(_claims(folder, body), tmp_path)


def test_records_claims_pair_by_seed(tmp_path):
    folder = tmp_path / "experiments" / "toy"
    folder.mkdir(parents=True)
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    lines = [
        {"method": "fedavg", "side": side, "seed": s, "test_acc": v}
        for side, values in (("ours", [85.0, 84.0, 86.0]), ("openfgl", [84.0, 84.5, 85.0]))
        for s, v in enumerate(values)
    ]
    (results / "toy.runs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    body = (
        '[[claim]]\nclaim = "FedAvg beside OpenFGL"\nrecords = "toy.runs.jsonl"\n'
        'where = { method = "fedavg", side = "ours" }\n'
        'versus_where = { method = "fedavg", side = "openfgl" }\nvalue = "test_acc"\n'
        'scale = 1\nverdict = "yes: within 1.5 points"\n'
    )
    claim = load_claims(_claims(folder, body), tmp_path).claims[0]
    assert claim.difference and claim.ours[0].mean == pytest.approx(0.5)
    # the same runs on a second dataset: a dotted key reads the nested job, and without it two
    # records of a seed are an error, not a silent mix
    more = [{**x, "job": {"dataset": "CiteSeer"}, "test_acc": x["test_acc"] - 10} for x in lines]
    lines = [{**x, "job": {"dataset": "Cora"}} for x in lines] + more
    (results / "toy.runs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(ConfigError, match="two records of seed"):
        load_claims(_claims(folder, body), tmp_path)
    body = body.replace('side = "ours" }', 'side = "ours", "job.dataset" = "CiteSeer" }')
    body = body.replace('side = "openfgl" }', 'side = "openfgl", "job.dataset" = "CiteSeer" }')
    claim = load_claims(_claims(folder, body), tmp_path).claims[0]
    assert claim.ours[0].mean == pytest.approx(0.5)


def test_figure_is_drawn(tmp_path):
    folder = _folder(tmp_path)
    paper = load_claims(_claims(folder, LEVEL + DIFFERENCE), tmp_path)
    assert draw(paper, tmp_path / "toy.svg")
    assert (tmp_path / "toy.svg").read_text().lstrip().startswith("<?xml")


def test_unpaired_difference_is_welch():
    from scipy.stats import ttest_ind

    a, b = [80.0, 82.0, 84.0], [75.0, 78.0, 78.0]
    d = Estimate.of(a).minus(Estimate.of(b))
    want = ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert d.mean == pytest.approx(5.0) and d.from_page
    assert (d.low, d.high) == pytest.approx((want.low, want.high))
    # from a page's mean ± population std the same interval follows
    paged = Estimate.from_mean_std(82.0, statistics.pstdev(a), 3).minus(
        Estimate.from_mean_std(statistics.fmean(b), statistics.pstdev(b), 3)
    )
    assert (paged.low, paged.high) == pytest.approx((want.low, want.high))


def test_kept_cells_of_fewer_runs_and_of_other_spreads(tmp_path):
    """A kept "m ± s (k of N runs)" is over k runs; a cell whose ± is not the spread over runs
    (FedStar's std) takes the runs' std from its own column, or gives no interval."""
    from fgl_flower.bench import claims

    folder = _folder(tmp_path, with_runs=())
    exp = load_experiment(folder / "table.toml", tmp_path)
    pages = claims._Pages(folder, tmp_path)
    row = exp.rows[0]
    cells = {
        COLUMNS["acc"].header: "82.00 ± 2.00 (2 of 3 runs)",
        COLUMNS["acc-paper"].header: "82.00 ± 9.00",
        COLUMNS["acc-paper-runstd"].header: "1.00",
        "seeds": "3/3 †",
    }
    pages._kept[exp.doc] = type("K", (), {"cells": lambda self, c, s, h: [cells[x] for x in h]})()
    fewer = claims._level(pages, exp, row, "acc", "here")
    assert fewer.n == 2 and fewer.high == pytest.approx(82.0 + 12.706 * 2 * 2**0.5 / 2**0.5, 1e-3)
    fedstar = claims._level(pages, exp, row, "acc-paper", "here")
    assert fedstar.high - fedstar.mean == pytest.approx(4.303 * (1.5**0.5) / 3**0.5, 1e-3)


def test_the_committed_index_is_what_its_claims_render():
    """docs/results/README.md is generated: rendering the claims files and records of this
    checkout gives it back (after a change, run `fgl bench --index`)."""
    files = claims_files(ROOT)
    assert files, "no experiments/*/claims.toml"
    papers = sorted((load_claims(p, ROOT) for p in files), key=lambda p: (p.order, p.key))
    assert (ROOT / INDEX).read_text() == render_index(papers), (
        "docs/results/README.md is stale: run `fgl bench --index` from the repository root"
    )
    for paper in papers:
        if any(c.paper is not None for c in paper.claims):
            assert (ROOT / "docs" / "results" / f"{paper.key}-claims.svg").exists()


def test_fgl_bench_index_writes_the_index_and_without_files_says_what_to_give(
    tmp_path, monkeypatch, capsys
):
    from fgl_flower.cli import main

    folder = _folder(tmp_path)
    _claims(folder, LEVEL + DIFFERENCE)
    monkeypatch.chdir(tmp_path)
    assert main(["bench"]) == 2
    assert "--index" in capsys.readouterr().err
    assert main(["bench", "--index"]) == 0
    index = (tmp_path / INDEX).read_text()
    assert "## Toy (2026)" in index and (tmp_path / "docs/results/toy-claims.svg").exists()

import json
import os
import shlex
import sys

import pytest

from fgl_flower.bench import COLUMNS, load_experiment, render, run_experiment
from fgl_flower.errors import ConfigError


def _row_of(text: str, command_part: str) -> str:
    """The table line of the row whose command (listed below its table) holds ``command_part``."""
    item = next(x for x in text.splitlines() if x.startswith("- c") and command_part in x)
    key = item.split()[1]
    return next(x for x in text.splitlines() if x.startswith("| ") and x.endswith(f"| {key} |"))


def test_bench_table_from_summaries(tmp_path, capsys):
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "docs/t.md"\nout = "runs/t"\nseeds = [0, 1]\n'
        "[defaults]\nrounds = 5\n"
        '[[row]]\ngroup = "G"\nmethod = "fedavg"\ndataset = "Cora"\npartition = "louvain"\n'
        "clients = 3\npaper = 80.0\nset = { lr = 0.05 }\n"
    )
    exp = load_experiment(spec, root=tmp_path)
    run_experiment(exp, dry_run=True)
    printed = capsys.readouterr().out
    assert "--rounds 5" in printed and "--set lr=0.05" in printed and "--seed 1" in printed
    run_experiment(exp, dry_run=True, seeds=[1])  # one of several bench processes
    printed = capsys.readouterr().out
    assert "--seed 1" in printed and "--seed 0" not in printed
    run_experiment(exp, dry_run=True, rows=["no-such-row"])
    assert capsys.readouterr().out == ""
    run_experiment(exp, dry_run=True, seeds=[0], rows=["nothing", "Cora-*-fedavg*"])
    assert "[1/1]" in capsys.readouterr().out
    for seed, acc in ((0, 0.8), (1, 0.9)):
        out = exp.out / exp.rows[0].slug / f"seed{seed}"
        out.mkdir(parents=True)
        ev = {
            "round": 5,
            "test_acc": acc,
            "test_acc_mean": acc,
            "test_f1": 0.5,
            "test_acc_worst": 0.4,
        }
        (out / "summary.json").write_text(
            json.dumps({"best_val": ev, "final": ev, "total_time_s": 10.0, "rounds_completed": 5})
        )
    table = render(exp)
    assert "| G | fedavg | 80.0 | 85.00 ± 5.00 |" in table
    assert "2/2" in table and "--seed SEED" in table


def test_bench_columns_and_files_sharing_one_doc(tmp_path):
    from fgl_flower.bench import write_docs

    for name, method in (("a", "fedspray"), ("b", "local")):
        (tmp_path / f"{name}.toml").write_text(
            f'title = "Table {name}"\ndoc_title = "Repro"\ndoc = "docs/r.md"\nout = "runs/r"\n'
            'seeds = [0]\ncolumns = ["acc", "minority"]\n'
            f'[[row]]\nmethod = "{method}"\ndataset = "Physics"\npartition = "files"\n'
            'set = { "data.files.dir" = "../x/y" }\n'
        )
    exps = [load_experiment(tmp_path / f"{n}.toml", root=tmp_path) for n in "ab"]
    assert "/" not in exps[0].rows[0].slug and "data.files.dir" in exps[0].rows[0].slug
    out = exps[0].out / exps[0].rows[0].slug / "seed0"
    out.mkdir(parents=True)
    ev = {"round": 3, "test_acc": 0.9, "test_minority_acc": 0.7, "selected_by": "val_loss"}
    (out / "summary.json").write_text(json.dumps({"best_val": ev, "final": ev}))
    (out / "bench.json").write_text(json.dumps({"wall_s": 120.0}))
    (doc,) = write_docs(exps)
    text = doc.read_text()
    assert text.startswith("# Repro") and "## Table a" in text and "## Table b" in text
    assert "minority acc, pooled (best-val)" in text and "selected by val_loss" in text
    assert "| 90.00 ± 0.00 | 70.00 ± 0.00 |" in text and "| 2.0 | 1/1 |" in text
    # Writing from one file keeps its sibling's section; `order` places the sections.
    (tmp_path / "a.toml").write_text("order = 2\n" + (tmp_path / "a.toml").read_text())
    (doc,) = write_docs([load_experiment(tmp_path / "a.toml", root=tmp_path)])
    text = doc.read_text()
    assert 0 < text.index("## Table b") < text.index("## Table a")


def _fake_fgl(tmp_path, monkeypatch, body: str) -> None:
    """Put a fake ``fgl`` (a Python script with ``body``) first on ``PATH``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "fgl"
    fake.write_text(f"#!{sys.executable}\n" + body)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_bench_jobs_run_at_the_same_time(tmp_path, monkeypatch, capsys):
    """``jobs=2``: two runs are alive together (each fake ``fgl run`` waits until both have
    started; run one after the other, the first would give up and record no overlap)."""
    _fake_fgl(
        tmp_path,
        monkeypatch,
        "import json, pathlib, sys, time\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
        "(out / 'started').touch()\n"
        "deadline = time.time() + 20\n"
        "while len(list(out.parent.glob('*/started'))) < 2 and time.time() < deadline:\n"
        "    time.sleep(0.05)\n"
        "both = len(list(out.parent.glob('*/started'))) >= 2\n"
        "(out / 'summary.json').write_text(json.dumps({'overlap': both}))\n",
    )
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\nout = "runs/t"\nseeds = [0, 1]\n[[row]]\nmethod = "fedavg"\n'
        'dataset = "Cora"\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    run_experiment(exp, jobs=2)
    printed = capsys.readouterr().out
    assert printed.count(" ok in ") == 2 and "[2/2]" in printed
    for seed in (0, 1):
        folder = exp.out / exp.rows[0].slug / f"seed{seed}"
        assert json.loads((folder / "summary.json").read_text()) == {"overlap": True}
        assert "wall_s" in json.loads((folder / "bench.json").read_text())
    run_experiment(exp, jobs=2)  # everything done: nothing runs again
    assert capsys.readouterr().out == ""


def test_a_folder_that_another_command_ran_is_neither_shown_nor_kept(tmp_path, monkeypatch, capsys):
    """The folder name holds only a row's own overrides: after a change of the file's
    ``[defaults]`` the old run sits where the new one goes. ``bench.json`` names the command,
    so the table leaves the old run out and the benchmark runs the row again."""
    _fake_fgl(
        tmp_path,
        monkeypatch,
        "import json, pathlib, sys\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
        "out.mkdir(parents=True, exist_ok=True)\n"
        "(out / 'summary.json').write_text(json.dumps({'seed': 0, 'best_val': {'test_acc': 0.9}}))\n",
    )
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\nout = "runs/t"\nseeds = [0]\ncolumns = ["acc"]\n[defaults]\nset = { lr = 0.01 }\n'
        '[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    run_experiment(exp)
    assert "| 90.00 ± 0.00 |" in render(exp)
    from fgl_flower.bench.records import collect
    from fgl_flower.provenance import code_version

    assert collect(exp, exp.rows[0])[0]["code"] == [code_version()]  # which code ran it, recorded
    spec.write_text(spec.read_text().replace("lr = 0.01", "lr = 0.05"))  # same folder, new command
    exp = load_experiment(spec, root=tmp_path)
    assert "| — |" in render(exp) and "90.00" not in render(exp)
    capsys.readouterr()
    run_experiment(exp)
    printed = capsys.readouterr().out
    assert (
        "holds a run of another command" in printed
        and "--set lr=0.05" in printed
        and " ok in " in printed
    )
    assert "| 90.00 ± 0.00 |" in render(exp)


def test_bench_rejects_unknown_columns(tmp_path):
    import pytest

    from fgl_flower.errors import ConfigError

    (tmp_path / "e.toml").write_text('columns = ["nope"]\n[[row]]\nmethod = "local"\n')
    with pytest.raises(ConfigError, match="unknown columns"):
        load_experiment(tmp_path / "e.toml", root=tmp_path)


def test_last_rounds_summary_and_columns():
    from fgl_flower.bench import COLUMNS
    from fgl_flower.results import summarize_rounds

    rounds = [{"round": r, "eval": {"val_acc": r / 10, "test_acc": r / 20}} for r in range(1, 8)]
    summary = summarize_rounds(rounds)
    assert summary["last"]["rounds"] == [3, 4, 5, 6, 7]
    assert abs(summary["last"]["val_acc"] - 0.5) < 1e-12
    assert abs(COLUMNS["acc-last5"].value(summary) - 0.25) < 1e-12


def test_broken_sibling_section_is_an_error_not_a_lost_section(tmp_path):
    from fgl_flower.bench import write_docs

    def exp(name: str, extra: str = "") -> None:
        (tmp_path / f"{name}.toml").write_text(
            f'title = "{name}"\ndoc = "docs/r.md"\nseeds = [0]\n{extra}'
            '[[row]]\nmethod = "local"\ndataset = "Cora"\npartition = "louvain"\n'
        )

    exp("a")
    exp("b")
    (tmp_path / "other.toml").write_text('doc = "docs/other.md"\ntitle = 3\n')  # not ours
    (tmp_path / "notes.toml").write_text("[tool]\nx = 1\n")  # not an experiment at all
    a = load_experiment(tmp_path / "a.toml", root=tmp_path)
    assert "## b" in write_docs([a])[0].read_text()
    exp("b", 'columns = ["no-such-column"]\n')
    with pytest.raises(ConfigError, match="no-such-column"):
        write_docs([a])
    (tmp_path / "b.toml").write_text("title = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        write_docs([a])


def test_rows_of_one_doc_may_not_share_a_run_folder_with_different_commands(tmp_path):
    from fgl_flower.bench import check_run_folders

    def exp(name: str, defaults: str, own: str = "") -> None:
        (tmp_path / f"{name}.toml").write_text(
            f'title = "{name}"\ndoc = "docs/r.md"\nout = "runs/r"\nseeds = [0]\n'
            f"[defaults]\nset = {{ {defaults} }}\n"
            f'[[row]]\nmethod = "local"\ndataset = "Cora"\npartition = "louvain"\n{own}'
        )

    exp("a", "lr = 0.1")
    exp("b", "lr = 0.1")  # the same run: sharing its folder is fine
    a = load_experiment(tmp_path / "a.toml", root=tmp_path)
    check_run_folders([a])
    exp("b", "lr = 0.2")  # same folder name (defaults are not in it), another run
    with pytest.raises(ConfigError, match="share the run folder"):
        check_run_folders([a])
    exp("b", "lr = 0.2", 'set = { "partition-seed" = 1 }\n')  # told apart by the row's own set
    check_run_folders([a])


def test_paper_columns_fedstar_std_first_round_and_resources(tmp_path):
    """FedDense's columns: client mean ± FedStar's std (per-client sample std over seeds,
    then the mean), the run std, the first round reaching 65 % and the resource means."""
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\nout = "runs/t"\nseeds = [1, 2, 3]\n'
        'columns = ["acc-paper", "acc-paper-runstd", "first65", "first65-curve", "payload-kib", "gflops"]\n'
        '[[row]]\nmethod = "feddense"\ndataset = "tu-single"\npartition = "per-dataset"\nclients = 2\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    client_accs = {1: (0.6, 0.8), 2: (0.7, 0.8), 3: (0.8, 0.5)}
    # seed 1 reaches 65 % in round 1, seed 2 in round 3, seed 3 never: the mean of the runs'
    # first rounds is 2 (1 never); the seed-mean curve (0.62, 0.64, 0.66) reaches it in round 3
    curves = {1: (0.86, 0.86, 0.86), 2: (0.5, 0.5, 0.7), 3: (0.5, 0.56, 0.42)}
    for seed, (a, b) in client_accs.items():
        out = exp.out / exp.rows[0].slug / f"seed{seed}"
        out.mkdir(parents=True)
        rounds = [
            {"round": r + 1, "eval": {"test_acc_mean": v}} for r, v in enumerate(curves[seed])
        ]
        (out / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
        ev = {"round": 2, "test_acc_mean": (a + b) / 2}
        (out / "summary.json").write_text(
            json.dumps(
                {
                    "final": ev,
                    "best_val": ev,
                    "final_clients": {"0": {"test_acc": a}, "1": {"test_acc": b}},
                    "resources": {"payload_kib": 14.4375, "gflops": 2.0 + seed},
                }
            )
        )
    line = _row_of(render(exp), "--method feddense")
    # client means 0.70, 0.75, 0.65; per-client stds 0.1 and 0.1732 -> mean 0.1366
    assert "| 70.00 ± 13.66 | 4.08 | 2 (1 never) | 3 | 14.44 | 4.00 |" in line


def test_the_selection_rule_comes_from_the_rows_also_without_runs(tmp_path):
    """A table whose rows are all kept (no run folder or record to read) still names the
    rows' ``select-by``, not the app's default."""
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\nout = "runs/t"\nseeds = [0]\n[defaults]\nset = { select-by = "val_loss" }\n'
        '[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
    )
    assert "at the round selected by val_loss " in render(load_experiment(spec, root=tmp_path))
    spec.write_text(spec.read_text().replace('set = { select-by = "val_loss" }', ""))
    assert "at the round selected by val_acc " in render(load_experiment(spec, root=tmp_path))


def test_seed_mean_curve_needs_every_runs_history_and_says_never():
    from fgl_flower.bench.columns import first_round_of_mean_curve

    cell = first_round_of_mean_curve(0.65)
    run = lambda *accs: {"history": {"test_acc_mean": [[t + 1, a] for t, a in enumerate(accs)]}}
    assert cell([], [run(0.6, 0.8), run(0.6, 0.6)]) == "2"
    assert cell([], [run(0.6, 0.7), run(0.6, 0.5)]) == "never"
    assert cell([], [run(0.6, 0.7), {"final": {}}]) == "—"  # not over fewer runs than the row's
    assert cell([], [run(0.7, 0.7), run(0.7)]) == "1"  # rounds every run evaluated


def test_paired_rows_show_per_seed_differences_and_a_t_interval(tmp_path):
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\nout = "runs/t"\nseeds = [0, 1, 2]\ncolumns = ["acc-last5"]\npaired = ["acc-last5"]\n'
        '[[row]]\nid = "base"\nmethod = "fedavg"\ndataset = "Cora"\npartition = "louvain"\nclients = 2\n'
        '[[row]]\nversus = "base"\nmethod = "s2fgl"\ndataset = "Cora"\npartition = "louvain"\nclients = 2\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    values = {
        "fedavg": (0.80, 0.81, 0.82),
        "s2fgl": (0.81, 0.83, 0.82),
    }  # diffs +1, +2, 0 (seed 2 missing below)
    for row in exp.rows:
        for seed, v in enumerate(values[row.args["method"]]):
            if row.args["method"] == "s2fgl" and seed == 2:
                continue
            out = exp.out / row.slug / f"seed{seed}"
            out.mkdir(parents=True)
            (out / "summary.json").write_text(json.dumps({"seed": seed, "last": {"test_acc": v}}))
    lines = render(exp).splitlines()
    paired = [line for line in lines if line.startswith("| Cora (s2fgl) | Cora (fedavg) |")]
    # seeds 0 and 1 are paired: +1 and +2, mean +1.5, t(1) 97.5 % = 12.706, sd 0.7071 -> ±6.35
    assert paired == [
        "| Cora (s2fgl) | Cora (fedavg) | test acc, weighted (mean of last 5 rounds) | 0: +1.00, 1: +2.00 "
        "| +1.50 | [-4.85, +7.85] | 2 |"
    ]


def test_a_difference_that_rounds_to_zero_has_no_sign():
    from fgl_flower.bench.render import signed

    assert [signed(x) for x in (-0.004, 0.004, 0.0, -0.006, 1.5)] == [
        "0.00",
        "0.00",
        "0.00",
        "-0.01",
        "+1.50",
    ]


def test_versus_must_name_a_row(tmp_path):
    spec = tmp_path / "exp.toml"
    spec.write_text('title = "T"\n[[row]]\nversus = "nope"\nmethod = "fedavg"\n')
    with pytest.raises(ConfigError, match="versus names no row id"):
        load_experiment(spec, root=tmp_path)


def _fedavg_and_local_measured(tmp_path):
    """An experiment of two Cora rows (FedAvg 80 %, Local 70 %), one seed, each with its run."""
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "doc.md"\nout = "runs/t"\nseeds = [0]\ncolumns = ["acc"]\n'
        '[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n[[row]]\nmethod = "local"\ndataset = "Cora"\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    for row, acc in zip(exp.rows, (0.8, 0.7)):
        out = exp.out / row.slug / "seed0"
        out.mkdir(parents=True)
        (out / "summary.json").write_text(json.dumps({"seed": 0, "best_val": {"test_acc": acc}}))
    return exp


def test_rows_without_runs_keep_their_line_from_the_document(tmp_path):
    """Run folders stay on the machine that made them: a later write keeps the rows it has
    neither runs nor records for (same command and columns), marked, and rewrites the others."""
    from fgl_flower.bench import KEPT, write_docs

    exp = _fedavg_and_local_measured(tmp_path)
    write_docs([exp])
    first = (tmp_path / "doc.md").read_text()
    assert "| 80.00 ± 0.00 |" in first and "| 70.00 ± 0.00 |" in first and KEPT not in first
    import shutil

    shutil.rmtree(exp.out / exp.rows[1].slug)  # another machine: only the FedAvg run,
    (tmp_path / "doc.runs.jsonl").unlink()  # and a page written before run records
    (exp.out / exp.rows[0].slug / "seed0" / "summary.json").write_text(
        json.dumps({"seed": 0, "best_val": {"test_acc": 0.9}})
    )
    write_docs([exp])
    second = (tmp_path / "doc.md").read_text()
    local = _row_of(second, "--method local")
    assert "| 90.00 ± 0.00 |" in second and "| 70.00 ± 0.00 |" in local and f"1/1 {KEPT}" in local
    assert "Kept from an earlier version" in second
    write_docs([exp])  # kept again, marked once
    assert (tmp_path / "doc.md").read_text() == second


def test_lines_written_with_overwrite_in_the_command_are_kept(tmp_path):
    """Pages written when the shown command still carried ``--overwrite`` keep their rows;
    the kept line shows the command as written now (without it)."""
    from fgl_flower.bench import KEPT, write_docs

    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "doc.md"\nout = "runs/t"\nseeds = [0]\ncolumns = ["acc"]\n'
        '[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    cmd = shlex.join(exp.rows[0].command("SEED", f"runs/t/{exp.rows[0].slug}/seedSEED"))
    assert cmd.endswith(" --overwrite")
    (tmp_path / "doc.md").write_text(
        f"| Cora | fedavg | — | 81.00 ± 0.50 | — | — | 1/1 | `{cmd}` |\n"
    )
    write_docs([exp])
    text = (tmp_path / "doc.md").read_text()
    line = _row_of(text, "--method fedavg")
    assert "| 81.00 ± 0.50 |" in line and f"1/1 {KEPT}" in line and "--overwrite" not in text


def test_a_line_stands_for_commands_that_differ_only_in_outcome_neutral_keys(tmp_path):
    """A row that gained ``checkpoint-every`` in the defaults (numbers unchanged) keeps its
    measured line; a row whose numbers could differ (another lr) does not."""
    from fgl_flower.bench import KEPT, write_docs

    def doc_for(extra: str):
        spec = tmp_path / "exp.toml"
        spec.write_text(
            'title = "T"\ndoc = "doc.md"\nout = "runs/t"\nseeds = [0]\ncolumns = ["acc"]\n'
            f'[defaults]\nset = {{ {extra} }}\n[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
        )
        exp = load_experiment(spec, root=tmp_path)
        return exp, shlex.join(
            exp.rows[0].command("SEED", f"runs/t/{exp.rows[0].slug}/seedSEED", overwrite=False)
        )

    _, old_cmd = doc_for("lr = 0.01")
    for extra, kept in (("lr = 0.01, checkpoint-every = 0", True), ("lr = 0.02", False)):
        (tmp_path / "doc.md").write_text(
            f"| Cora | fedavg | — | 81.00 ± 0.50 | — | — | 1/1 | `{old_cmd}` |\n"
        )
        exp, _ = doc_for(extra)
        write_docs([exp])
        line = _row_of((tmp_path / "doc.md").read_text(), "--method fedavg")
        assert ("| 81.00 ± 0.50 |" in line and f"1/1 {KEPT}" in line) is kept


def test_a_kept_line_survives_a_column_added_since(tmp_path):
    """Cells are matched by column header: a column the page did not have yet shows "—" and
    the measured cells stay under their headers."""
    from fgl_flower.bench import KEPT, write_docs

    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "doc.md"\nout = "runs/t"\nseeds = [0]\ncolumns = ["acc", "acc-final"]\n'
        '[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    cmd = shlex.join(
        exp.rows[0].command("SEED", f"runs/t/{exp.rows[0].slug}/seedSEED", overwrite=False)
    )
    acc = COLUMNS["acc"].header
    (tmp_path / "doc.md").write_text(
        f"| setting | method | paper | {acc} | s/round | min/run | seeds | command |\n|---|---|---|---|---|---|---|---|\n"
        f"| Cora | fedavg | — | 81.00 ± 0.50 | 1.25 | 3.0 | 1/1 | `{cmd}` |\n"
    )
    write_docs([exp])
    text = (tmp_path / "doc.md").read_text()
    assert (
        _row_of(text, "--method fedavg")
        == f"| Cora | fedavg | — | 81.00 ± 0.50 | — | 1.25 | 3.0 | 1/1 {KEPT} | c1 |"
    )
    assert f"- c1 (Cora, fedavg): `{cmd}`" in text.splitlines()


def test_tables_hold_numbers_and_the_commands_follow_them(tmp_path):
    """Each row's command is listed below its table under the row's key, not in the table;
    a rewrite of such a page keeps a row whose runs are gone (read back through the key)."""
    import shutil

    from fgl_flower.bench import KEPT, write_docs

    exp = _fedavg_and_local_measured(tmp_path)
    write_docs([exp])
    text = (tmp_path / "doc.md").read_text()
    table = [x for x in text.splitlines() if x.startswith("| ")]
    assert table[0].endswith("| seeds | run |") and not any("fgl run" in x for x in table)
    assert _row_of(text, "--method local").endswith("| 70.00 ± 0.00 | — | — | 1/1 | c2 |")
    shutil.rmtree(exp.out / exp.rows[1].slug)
    (tmp_path / "doc.runs.jsonl").unlink()
    write_docs([exp])
    assert _row_of((tmp_path / "doc.md").read_text(), "--method local").endswith(
        f"| 70.00 ± 0.00 | — | — | 1/1 {KEPT} | c2 |"
    )


def test_a_paired_comparison_of_kept_rows_is_kept(tmp_path):
    """Without the run folders and records, the paired line stays with its two rows (marked);
    once one of them has runs here it is computed again."""
    import shutil

    from fgl_flower.bench import KEPT, write_docs

    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "doc.md"\nout = "runs/t"\nseeds = [0, 1]\ncolumns = ["acc"]\n'
        'paired = ["acc"]\n[[row]]\nid = "base"\nmethod = "fedavg"\ndataset = "Cora"\n'
        '[[row]]\nversus = "base"\nmethod = "fedprox"\ndataset = "Cora"\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    for seed in (0, 1):
        for row, acc in zip(exp.rows, (0.80 + seed / 100, 0.81 + seed / 50)):
            out = exp.out / row.slug / f"seed{seed}"
            out.mkdir(parents=True)
            (out / "summary.json").write_text(
                json.dumps({"seed": seed, "best_val": {"test_acc": acc}})
            )
    write_docs([exp])

    def paired_line() -> str:
        return next(
            x
            for x in (tmp_path / "doc.md").read_text().splitlines()
            if x.startswith("| Cora (fedprox) |")
        )

    assert "| 0: +1.00, 1: +2.00 | +1.50 |" in paired_line() and paired_line().endswith("| 2 |")
    shutil.rmtree(exp.out)
    (tmp_path / "doc.runs.jsonl").unlink()  # a page written before run records
    write_docs([exp])
    assert "| 0: +1.00, 1: +2.00 | +1.50 |" in paired_line() and paired_line().endswith(
        f"| 2 {KEPT} |"
    )
    write_docs([exp])  # marked once
    assert paired_line().endswith(f"| 2 {KEPT} |")
    out = exp.out / exp.rows[0].slug / "seed0"  # the base row measured again: no kept line
    out.mkdir(parents=True)
    (out / "summary.json").write_text(json.dumps({"seed": 0, "best_val": {"test_acc": 0.8}}))
    write_docs([exp])
    assert paired_line().endswith("| — | — | — | 0 |")


def test_kept_paired_lines_stay_with_their_own_section():
    """Two sections of one page compare rows of the same labels: each keeps its own line."""
    from fgl_flower.bench import kept_lines

    def section(title: str, mean: str) -> str:
        return (
            f"## {title}\n\n| row | minus | metric | per seed | mean | 95 % CI | seeds |\n|---|\n"
            f"| Cora (s2fgl) | Cora (fedavg) | acc | 0: {mean} | {mean} | — | 1 |\n\n"
        )

    kept = kept_lines(section("Table 1", "-9.50") + section("Table 2", "-28.00"))
    assert kept.paired[("Table 1", "Cora (s2fgl)", "Cora (fedavg)", "acc")][4] == "-9.50"
    assert kept.paired[("Table 2", "Cora (s2fgl)", "Cora (fedavg)", "acc")][4] == "-28.00"


@pytest.mark.parametrize(
    "weight, says",
    [
        ("split", "weighted by their counts"),
        ("client", "the same as the client mean"),
        ("client-size", "clients weighted by their size"),
    ],
)
def test_the_caption_says_what_weighted_means_for_the_rows(tmp_path, weight, says):
    spec = tmp_path / "exp.toml"
    spec.write_text(
        f'title = "T"\nout = "runs/t"\nseeds = [0]\ncolumns = ["acc"]\n'
        f'[defaults]\nset = {{ eval-weight = "{weight}" }}\n[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
    )
    text = render(load_experiment(spec, root=tmp_path))
    assert says in text and "the earliest such round on ties" in text


def test_a_cell_over_fewer_runs_than_its_row_says_so():
    from fgl_flower.bench.columns import COLUMNS

    runs = [{"best_val": {"test_acc": 0.8}}, {"best_val": {"test_acc": 0.9}}, {"best_val": {}}]
    assert COLUMNS["acc"].render(runs) == "85.00 ± 5.00 (2 of 3 runs)"
    assert COLUMNS["acc"].render(runs[:2]) == "85.00 ± 5.00"


def test_s_per_round_counts_the_servers_own_time(tmp_path):
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\nout = "runs/t"\nseeds = [0]\ncolumns = ["acc"]\n'
        '[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    out = exp.out / exp.rows[0].slug / "seed0"
    out.mkdir(parents=True)
    (out / "summary.json").write_text(
        json.dumps(
            {
                "seed": 0,
                "best_val": {"test_acc": 0.8},
                "total_time_s": 3.0,
                "total_server_time_s": 5.0,
                "rounds_completed": 2,
            }
        )
    )
    assert "| 4.00 |" in _row_of(render(exp), "--method fedavg")


def test_a_kept_line_is_matched_by_its_seed_count():
    """Two tables showing the same runs over different seeds keep their own lines."""
    from fgl_flower.bench import kept_lines

    cmd = "`fgl run --method fedavg --dataset Cora --seed SEED --out runs/t/Cora-fedavg/seedSEED`"
    kept = kept_lines(
        f"| Cora | fedavg | — | 80.00 ± 1.00 | — | — | 3/3 | {cmd} |\n\n"
        f"| Cora | fedavg | — | 79.00 ± 2.00 | — | — | 5/5 † | {cmd} |\n"
    )
    headers = ["setting", "method", "paper", "acc", "s/round", "min/run", "seeds", "command"]
    assert kept.cells(cmd.strip("`"), range(3), headers)[3] == "80.00 ± 1.00"
    assert kept.cells(cmd.strip("`"), range(5), headers)[3] == "79.00 ± 2.00"
    assert kept.cells(cmd.strip("`"), range(4), headers) is None


def test_a_kept_line_is_matched_by_the_seeds_its_caption_names():
    """A line measured over seeds 0-2 does not stand for the same command over seeds 1-3."""
    from fgl_flower.bench import kept_lines

    cmd = "`fgl run --method fedavg --dataset Cora --seed SEED --out runs/t/Cora-fedavg/seedSEED`"
    kept = kept_lines(
        "## T\n\nMean ± std (population) over seeds 0, 1, 2 (`SEED` in the commands)\n\n"
        f"| Cora | fedavg | — | 80.00 ± 1.00 | — | — | 3/3 | {cmd} |\n"
    )
    headers = ["setting", "method", "paper", "acc", "s/round", "min/run", "seeds", "command"]
    assert kept.cells(cmd.strip("`"), [0, 1, 2], headers)[3] == "80.00 ± 1.00"
    assert kept.cells(cmd.strip("`"), [1, 2, 3], headers) is None


def test_a_page_rewritten_for_other_seeds_keeps_no_line(tmp_path):
    """The experiment's seeds changed and its runs are gone: its rows are pending, not kept."""
    import shutil

    from fgl_flower.bench import KEPT, write_docs

    exp = _fedavg_and_local_measured(tmp_path)
    write_docs([exp])
    shutil.rmtree(exp.out)
    (tmp_path / "doc.runs.jsonl").unlink()
    spec = tmp_path / "exp.toml"
    spec.write_text(spec.read_text().replace("seeds = [0]", "seeds = [1]"))
    write_docs([load_experiment(spec, root=tmp_path)])
    text = (tmp_path / "doc.md").read_text()
    assert KEPT not in text and _row_of(text, "--method local").endswith("| 0/1 | c2 |")


def test_a_kept_row_shown_in_two_tables_keeps_the_columns_of_both():
    from fgl_flower.bench import kept_lines

    cmd = "`fgl run --method fedavg --dataset Cora --seed SEED --out runs/t/Cora-fedavg/seedSEED`"
    kept = kept_lines(
        "| setting | method | paper | acc | first | seeds | command |\n|---|\n"
        f"| Cora | fedavg | — | 80.00 ± 1.00 | 36 | 3/3 | {cmd} |\n\n"
        "| setting | method | paper | acc | bytes | first | seeds | command |\n|---|\n"
        f"| Cora | fedavg | — | 80.00 ± 1.00 | 1024 | — | 3/3 | {cmd} |\n"
    )
    first = ["setting", "method", "paper", "acc", "first", "seeds", "command"]
    second = ["setting", "method", "paper", "acc", "bytes", "first", "seeds", "command"]
    assert kept.cells(cmd.strip("`"), range(3), first)[4] == "36"
    assert kept.cells(cmd.strip("`"), range(3), second)[4:6] == ["1024", "36"]


def _fake_run(folder, seed: int, accs: tuple[float, float], wall_s: float = 60.0) -> None:
    """A finished run of two clients: summary, per-round evaluation and bench wall time."""
    folder.mkdir(parents=True)
    mean = sum(accs) / 2
    rounds = [
        {"round": 1, "eval": {"test_acc_mean": 0.5}},
        {"round": 2, "eval": {"test_acc_mean": mean}},
    ]
    (folder / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    ev = {"round": 2, "test_acc_mean": mean}
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "seed": seed,
                "final": ev,
                "best_val": ev,
                "total_time_s": 20.0,
                "rounds_completed": 2,
                "final_clients": {"0": {"test_acc": accs[0]}, "1": {"test_acc": accs[1]}},
                "config": {"big": "x" * 100},
            }
        )
    )
    (folder / "bench.json").write_text(json.dumps({"wall_s": wall_s}))


def test_run_records_complete_a_table_across_machines(tmp_path, capsys):
    """Seeds run on two machines (run folders never travel) give the table that all seeds on
    one machine give; a recorded run is not run again."""
    import shutil

    from fgl_flower.bench import KEPT, load_records, records_path, write_docs

    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "doc.md"\nout = "runs/t"\nseeds = [1, 2, 3]\n'
        'columns = ["acc-paper", "first65"]\n'
        '[[row]]\nmethod = "feddense"\ndataset = "tu-single"\npartition = "per-dataset"\nclients = 2\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    accs = {1: (0.6, 0.8), 2: (0.7, 0.8), 3: (0.8, 0.5)}
    folder = exp.out / exp.rows[0].slug

    for seed in accs:  # one machine, every seed
        _fake_run(folder / f"seed{seed}", seed, accs[seed])
    write_docs([exp])
    everything = (tmp_path / "doc.md").read_text()
    assert "| 70.00 ± 13.66 | 2 |" in everything and "| 3/3 |" in everything
    shutil.rmtree(exp.out)
    records_path(exp.doc).unlink()

    for seed in (1, 2):  # machine A
        _fake_run(folder / f"seed{seed}", seed, accs[seed])
    write_docs([exp])
    assert "| 2/3 |" in (tmp_path / "doc.md").read_text()
    records = load_records(records_path(exp.doc))
    assert sorted(s for _, s in records) == [1, 2] and "config" not in records[next(iter(records))]
    shutil.rmtree(exp.out)  # machine B: only the records (committed with the page)

    run_experiment(exp, dry_run=True)
    printed = capsys.readouterr().out
    assert "2 run(s) recorded" in printed and "[1/1]" in printed and "--seed 3" in printed
    _fake_run(folder / "seed3", 3, accs[3])
    write_docs([exp])
    assert (tmp_path / "doc.md").read_text() == everything and KEPT not in everything
    lines = records_path(exp.doc).read_text().splitlines()
    assert [json.loads(x)["seed"] for x in lines] == [1, 2, 3]

    spec.write_text(spec.read_text().replace("clients = 2", "clients = 2\nset = { lr = 0.1 }"))
    write_docs([load_experiment(spec, root=tmp_path)])  # another command: its records are gone
    assert not load_records(records_path(exp.doc))


def test_records_keep_bulky_parts_only_for_columns_that_read_them(tmp_path):
    """Per-client finals and per-round histories stay in the records of experiments whose
    columns read them (FedStar's std, first round reaching 65 %) and leave the others' (also
    the records written before), which render the same page from the records alone."""
    import shutil

    from fgl_flower.bench import load_records, records_path, write_docs

    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "doc.md"\nout = "runs/t"\nseeds = [1, 2]\n'
        'columns = ["acc-paper", "first65"]\n'
        '[[row]]\nmethod = "feddense"\ndataset = "tu-single"\npartition = "per-dataset"\nclients = 2\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    folder = exp.out / exp.rows[0].slug
    for seed, accs in {1: (0.6, 0.8), 2: (0.7, 0.8)}.items():
        _fake_run(folder / f"seed{seed}", seed, accs)
    write_docs([exp])
    runs = load_records(records_path(exp.doc)).values()
    assert all({"final_clients", "history"} <= set(run) for run in runs)
    bulky = records_path(exp.doc).read_text()

    spec.write_text(
        spec.read_text().replace('["acc-paper", "first65"]', '["acc-mean", "acc-final"]')
    )
    exp = load_experiment(spec, root=tmp_path)
    write_docs([exp])
    from_folders = (tmp_path / "doc.md").read_text()
    runs = load_records(records_path(exp.doc)).values()
    assert len(runs) == 2 and not any({"final_clients", "history"} & set(run) for run in runs)
    shutil.rmtree(exp.out)
    records_path(exp.doc).write_text(bulky)  # records written before: trimmed, same page
    write_docs([exp])
    assert (tmp_path / "doc.md").read_text() == from_folders
    runs = load_records(records_path(exp.doc)).values()
    assert len(runs) == 2 and not any({"final_clients", "history"} & set(run) for run in runs)


def test_a_broken_records_file_is_an_error(tmp_path):
    from fgl_flower.bench import load_records

    path = tmp_path / "doc.runs.jsonl"
    path.write_text('{"command": "fgl run", "seed": 1, "run": {}}\n{"command": "fgl run"\n')
    with pytest.raises(ConfigError, match=r"doc.runs.jsonl:2: not a run record"):
        load_records(path)


def test_time_limit_stops_runs_and_the_same_command_resumes_them(tmp_path, monkeypatch, capsys):
    """At the time limit the running run is stopped (Ctrl-C) and the next not started; run
    again, the stopped one continues from its checkpoint with ``fgl run --resume``."""
    _fake_fgl(
        tmp_path,
        monkeypatch,
        "import json, os, pathlib, sys, time\n"
        "if '--resume' in sys.argv:\n"
        "    out = pathlib.Path(sys.argv[sys.argv.index('--resume') + 1])\n"
        "    print('resumed', flush=True)\n"
        "    (out / 'summary.json').write_text(json.dumps({'seed': 0, 'best_val': {'test_acc': 0.5}}))\n"
        "    sys.exit(0)\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
        "(out / 'argv.json').write_text(json.dumps(sys.argv))\n"
        "(out / 'config.json').write_text('{}')\n"
        "(out / 'checkpoint').mkdir()\n"
        "(out / 'checkpoint' / 'server.records').write_bytes(b'')\n"
        "print('started', flush=True)\n"
        "time.sleep(float(os.environ.get('FAKE_RUN_S', '0')))\n"
        "(out / 'summary.json').write_text(json.dumps({'seed': 1, 'best_val': {'test_acc': 0.7}}))\n",
    )
    monkeypatch.setenv("FAKE_RUN_S", "60")
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "doc.md"\nout = "runs/t"\nseeds = [0, 1]\ncolumns = ["acc"]\n'
        '[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    folder = exp.out / exp.rows[0].slug
    run_experiment(exp, time_limit=2.0, neutral={"checkpoint-every": 2})
    printed = capsys.readouterr().out
    assert "1 run(s) stopped, 1 not started" in printed and "[2/2]" not in printed
    assert not (folder / "seed0" / "summary.json").exists() and not (folder / "seed1").exists()
    assert "checkpoint-every=2" in json.loads((folder / "seed0" / "argv.json").read_text())

    monkeypatch.setenv("FAKE_RUN_S", "0")
    run_experiment(exp)
    printed = capsys.readouterr().out
    assert f"fgl run --resume {folder / 'seed0'}" in printed and printed.count(" ok in ") == 2
    log = (folder / "seed0" / "fgl.log").read_text().split()  # appended to, not overwritten
    assert log[0] == "started" and "KeyboardInterrupt" in log and log[-1] == "resumed"
    assert json.loads((folder / "seed0" / "bench.json").read_text())["resumed"] is True
    from fgl_flower.bench import write_docs

    write_docs(
        [exp]
    )  # min/run from the run that ran through only (a resumed one's wall is partial)
    wall = json.loads((folder / "seed1" / "bench.json").read_text())["wall_s"] / 60
    assert f"| 60.00 ± 10.00 | — | {wall:.1f} | 2/2 |" in (tmp_path / "doc.md").read_text()


def test_a_bench_started_with_ctrl_c_ignored_still_stops_its_runs_with_it(tmp_path, monkeypatch):
    """A shell starts ``fgl bench ... &`` with SIGINT ignored; its runs must still take the
    Ctrl-C of the time limit (not sit it out until they are killed a minute later)."""
    import subprocess
    import time

    _fake_fgl(
        tmp_path,
        monkeypatch,
        "import pathlib, sys, time\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n",
    )
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\nout = "runs/t"\nseeds = [0]\n[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
    )
    script = (
        "import signal, sys\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)  # as for a shell's background job\n"
        "from pathlib import Path\n"
        "from fgl_flower.bench import load_experiment, run_experiment\n"
        f"run_experiment(load_experiment(Path({str(spec)!r}), root=Path({str(tmp_path)!r})), "
        "time_limit=2.0)\n"
    )
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "stopped at the time limit" in done.stdout
    assert time.monotonic() - t0 < 30  # with SIGINT ignored by the run: about 62 s
    log = (tmp_path / "runs" / "t").glob("*/seed0/fgl.log")
    assert "KeyboardInterrupt" in next(log).read_text()


def test_a_run_that_has_written_its_results_at_the_time_limit_is_not_stopped(
    tmp_path, monkeypatch, capsys
):
    """A run whose summary is written when the limit comes is only exiting: it ends as a
    finished run (``ok``, with its wall time), not as one stopped for a later resume."""
    _fake_fgl(
        tmp_path,
        monkeypatch,
        "import json, pathlib, sys, time\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
        "(out / 'summary.json').write_text(json.dumps({'seed': 0, 'best_val': {'test_acc': 0.5}}))\n"
        "time.sleep(5)\n",
    )
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\nout = "runs/t"\nseeds = [0]\n[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    # the limit must come after the fake has started and written its summary: 3 s leave a
    # loaded machine time to start Python (1 s did not, beside two benchmarks on 2 cores)
    run_experiment(exp, time_limit=3.0)
    printed = capsys.readouterr().out
    assert " ok in " in printed and "stopped" not in printed
    wall = json.loads((exp.out / exp.rows[0].slug / "seed0" / "bench.json").read_text())["wall_s"]
    assert wall >= 5


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--set", "lr=0.1"], "only keys that change no number"),
        (["--set", "checkpoint-every"], "as KEY=VALUE"),
        (["--time-limit", "0"], "more than 0"),
    ],
)
def test_bench_flags_that_would_change_numbers_or_make_no_sense_are_refused(
    tmp_path, argv, match, capsys
):
    from fgl_flower.cli import main

    spec = tmp_path / "exp.toml"
    spec.write_text('title = "T"\nout = "runs/t"\n[[row]]\nmethod = "fedavg"\ndataset = "Cora"\n')
    assert main(["bench", str(spec), "--dry-run", *argv]) == 2
    captured = capsys.readouterr()
    assert match in captured.err and captured.out == ""


def test_probe_columns_read_the_last_rounds_client_mean():
    summary = {
        "probes": {
            "latent.nonempty": {"mean": 0.25, "min": 0.0, "max": 0.5},
            "clusters": {"mean": 3.0},
        }
    }
    assert COLUMNS["latent-nonempty"].value(summary) == 0.25
    assert COLUMNS["clusters"].value(summary) == 3.0
    assert COLUMNS["latent-hubs"].value(summary) is None and COLUMNS["clusters"].value({}) is None


def test_records_keep_every_value_a_column_reads_and_no_other(tmp_path):
    """A record keeps what any column reads of a summary's points (also the privacy page's ε
    and z under ``dp``, which records once dropped), and leaves per-client resources and the
    values no column reads; the page rendered from the records alone equals the one from the
    run folders."""
    import shutil

    from fgl_flower.bench import COLUMNS, load_records, records_path, run_record, write_docs

    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "doc.md"\nout = "runs/t"\nseeds = [1, 2]\n'
        'columns = ["acc", "epsilon", "noise", "upload-bytes"]\n'
        '[[row]]\nmethod = "fedavg"\ndataset = "Cora"\npartition = "louvain"\nclients = 2\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    for seed in (1, 2):
        folder = exp.out / exp.rows[0].slug / f"seed{seed}"
        folder.mkdir(parents=True)
        point = {
            "round": 3,
            "selected_by": "val_acc",
            "test_acc": 0.5 + seed / 10,
            "test_loss": 1.2,
        }
        (folder / "summary.json").write_text(
            json.dumps(
                {
                    "seed": seed,
                    "final": point,
                    "best_val": point,
                    "total_time_s": 3.0,
                    "rounds_completed": 3,
                    "dp": {"epsilon": 4.0 * seed, "noise_multiplier": 1.5, "delta": 1e-5},
                    "resources": {"upload_bytes": 1000.0, "clients": {"0": {"flops": 1.0}}},
                }
            )
        )
    write_docs([exp])
    from_folders = (tmp_path / "doc.md").read_text()
    assert "| 4.00 |" not in from_folders and "| 6.00 | 1.50 | 1000 |" in from_folders
    run = next(r for (_, seed), r in load_records(records_path(exp.doc)).items() if seed == 1)
    assert run["dp"] == {"epsilon": 4.0, "noise_multiplier": 1.5}
    assert run["resources"] == {"upload_bytes": 1000.0}
    assert run["best_val"] == {"round": 3, "selected_by": "val_acc", "test_acc": 0.6}
    shutil.rmtree(exp.out)
    write_docs([exp])
    assert (tmp_path / "doc.md").read_text() == from_folders

    summary: dict = {}
    for column in COLUMNS.values():
        if column.point:
            summary.setdefault(column.point[0], {})[column.point[1]] = 0.5
    for name, column in COLUMNS.items():  # every column reads the same value from the record
        assert column.value(run_record(summary)) == column.value(summary), name

import json

from fgl_flower.bench import load_experiment, render, run_experiment


def test_bench_table_from_summaries(tmp_path, capsys):
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'title = "T"\ndoc = "docs/t.md"\nout = "runs/t"\nseeds = [0, 1]\n'
        '[defaults]\nrounds = 5\n'
        '[[row]]\ngroup = "G"\nmethod = "fedavg"\ndataset = "Cora"\npartition = "louvain"\n'
        'clients = 3\npaper = 80.0\nset = { lr = 0.05 }\n'
    )
    exp = load_experiment(spec, root=tmp_path)
    run_experiment(exp, dry_run=True)
    printed = capsys.readouterr().out
    assert "--rounds 5" in printed and "--set lr=0.05" in printed and "--seed 1" in printed
    for seed, acc in ((0, 0.8), (1, 0.9)):
        out = exp.out / exp.rows[0].slug / f"seed{seed}"
        out.mkdir(parents=True)
        ev = {"round": 5, "test_acc": acc, "test_acc_mean": acc, "test_f1": 0.5, "test_acc_worst": 0.4}
        (out / "summary.json").write_text(json.dumps(
            {"best_val": ev, "final": ev, "total_time_s": 10.0, "rounds_completed": 5}))
    table = render(exp)
    assert "| G | fedavg | 80.0 | 85.00 ± 5.00 |" in table
    assert "2/2" in table and "--seed SEED" in table

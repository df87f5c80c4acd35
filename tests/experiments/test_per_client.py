"""experiments/feddense/per_client.py: per-client accuracies read from the page's records."""

import json

import pytest


@pytest.fixture(scope="module")
def per_client(experiment_script):
    return experiment_script("feddense/per_client.py")


def _record(method: str, group: str, seed: int, accs: list[float]) -> str:
    out = f"runs/feddense/{group}-per-dataset-{len(accs)}-{method}-gin/seedSEED"
    return json.dumps(
        {
            "command": f"fgl run --method {method} --dataset {group} --seed SEED --out {out}",
            "seed": seed,
            "run": {"final_clients": {str(k): {"test_acc": a} for k, a in enumerate(accs)}},
        }
    )


def test_rows_average_the_selected_seeds_of_one_group(per_client, tmp_path):
    results = tmp_path / "runs.jsonl"
    results.write_text(
        "\n".join(
            [
                _record("fedavg", "tu-single", 1, [0.5, 0.7]),
                _record("fedavg", "tu-single", 2, [0.7, 0.9]),
                _record("fedavg", "tu-single", 3, [0.0, 0.0]),
                _record("fedavg", "tu-multi", 1, [1.0, 1.0]),
            ]
        )
    )
    rows = per_client.final_accuracies(results, "tu-single", {1, 2})
    assert list(rows) == ["tu-single-per-dataset-2-fedavg-gin"]
    per_seed = rows["tu-single-per-dataset-2-fedavg-gin"]
    assert sorted(per_seed) == [1, 2]
    assert per_client.mean(per_seed, 0) == pytest.approx(60.0)
    assert per_client.mean(per_seed, 1) == pytest.approx(80.0)
    assert per_client.seed_means(per_seed) == pytest.approx({1: 60.0, 2: 80.0})


def test_client_trace_reads_the_client_of_the_run_folder(per_client, tmp_path):
    metrics = ((1, 0.7, 0.6), (2, 0.6, 0.8), (3, 0.5, 0.5), (4, 0.4, 0.7))
    (tmp_path / "rounds.jsonl").write_text(
        "\n".join(
            json.dumps({"round": r, "clients": {"3": {"test_loss": loss, "test_acc": acc}}})
            for r, loss, acc in metrics
        )
    )
    t = per_client.client_trace(tmp_path, 3, loss_below=0.65, acc_below=0.6, start=2)
    assert t == {"first_below": 2, "best": 0.8, "final": 0.7, "low_rounds": 1, "lowest": 0.5}
    assert per_client.client_trace(tmp_path, 3, 0.1, 0.6, 1)["first_below"] is None
    assert per_client.client_trace(tmp_path / "missing", 3, 0.65, 0.6, 1) is None

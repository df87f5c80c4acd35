"""Resume: an interrupted run continued from its checkpoint gives the numbers of an
uninterrupted run, for every method; client state comes back from the client checkpoints."""

import pytest
from faults import interrupted
from methods_data import NEEDS, for_method
from run_records import digest

from fgl_flower.checkpoint import CheckpointError, client_dir
from fgl_flower.errors import ConfigError
from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods import METHODS
from fgl_flower.parse import parse_run_config


@pytest.mark.parametrize("method", list(METHODS))
def test_interrupted_and_resumed_equals_uninterrupted(flat, method, tmp_path, request):
    for_method(flat, method, request)
    flat.update(
        {
            "num-rounds": 4,
            "fraction-train": 0.67,
            **({"fedavg.finetune-epochs": 1} if method == "fedavg" else {}),
            **NEEDS.get(method, {}),
            **({"fraction-train": 1.0} if method == "opfgl" else {}),
        }
    )
    assert_resume_equals_uninterrupted(flat, tmp_path, partition=0 if method == "opfgl" else 1)


def assert_resume_equals_uninterrupted(flat: dict, tmp_path, partition: int) -> None:
    """Run ``flat`` whole, then again failing in round 3 (or the last) on ``partition`` and
    resumed with fresh contexts (client state from the checkpoints): the same records."""
    run_inprocess({**flat, "out-dir": str(tmp_path / "whole")})
    out = tmp_path / "resumed"
    flat["out-dir"] = str(out)
    interrupted(flat, fail_round=min(3, int(flat["num-rounds"])), partition=partition)
    run_inprocess({**flat, "resume": True})
    assert digest(out) == digest(tmp_path / "whole")


def test_resume_from_an_older_checkpoint_with_checkpoint_every(flat, tmp_path):
    flat.update(
        {"method": "fedavg", "num-rounds": 5, "checkpoint-every": 2, "keep-optimizer-state": True}
    )
    run_inprocess({**flat, "out-dir": str(tmp_path / "whole")})
    flat["out-dir"] = str(tmp_path / "resumed")
    interrupted(flat, fail_round=4)  # the server's checkpoint is round 2
    # partition 0 trained round 4 before partition 1 failed: a file the resume must ignore
    checkpoints = client_dir(tmp_path / "resumed" / "checkpoint", 0)
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "round-000002.records",
        "round-000003.records",
        "round-000004.records",
    ]
    run_inprocess({**flat, "resume": True})
    assert digest(tmp_path / "resumed") == digest(tmp_path / "whole")


def test_cli_resume_continues_with_the_saved_config(flat, tmp_path, capsys):
    from fgl_flower.cli import main

    flat.update({"method": "local", "num-rounds": 3})
    run_inprocess({**flat, "out-dir": str(tmp_path / "whole")})
    out = tmp_path / "resumed"
    flat["out-dir"] = str(out)
    interrupted(flat, fail_round=2)
    assert main(["run", "--inprocess", "--resume", str(out), "--rounds", "5"]) == 2
    assert "drop --rounds" in capsys.readouterr().err
    assert main(["run", "--inprocess", "--resume", str(out)]) == 0
    assert digest(out) == digest(tmp_path / "whole")


def test_resume_refuses_another_config_and_a_folder_without_checkpoint(flat, tmp_path):
    flat.update({"num-rounds": 2})
    run_inprocess(flat)
    with pytest.raises(ConfigError, match=r"another config; differing keys: lr"):
        run_inprocess({**flat, "resume": True, "lr": 0.5})
    with pytest.raises(CheckpointError, match="No checkpoint to resume from"):
        run_inprocess({**flat, "resume": True, "out-dir": str(tmp_path / "empty")})


def test_a_new_run_in_a_used_folder_starts_without_the_old_client_checkpoints(flat, tmp_path):
    """Files of an earlier run must never be taken for this run's state on resume."""
    folder = client_dir(tmp_path / "run" / "checkpoint", 0)
    run_inprocess({**flat, "num-rounds": 4})
    assert sorted(p.name for p in folder.iterdir()) == [
        "round-000003.records",
        "round-000004.records",
    ]
    run_inprocess({**flat, "num-rounds": 1, "seed": 1})
    assert sorted(p.name for p in folder.iterdir()) == ["round-000001.records"]


def test_client_checkpoints_are_private_and_apart_from_the_results_which_are_not(flat, tmp_path):
    """A client checkpoint holds the client's unclipped, unmasked model: it stays out of the
    run folder, readable by the user alone; the results get the user's ordinary permissions
    (config.json and summary.json were 0o600 before, the others 0o644)."""
    import os
    import stat

    from fgl_flower.datasets.root import cache_dir

    old = os.umask(0o022)
    try:
        run_inprocess({**flat, "num-rounds": 2})
    finally:
        os.umask(old)
    run = tmp_path / "run"
    assert not (run / "checkpoint" / "clients").exists()
    folder = client_dir(run / "checkpoint", 0)
    assert cache_dir() in folder.parents and folder.is_dir()
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(folder) == mode(folder.parent) == 0o700
    assert {mode(p) for p in folder.iterdir()} == {0o600}
    written = [p for p in run.rglob("*") if p.is_file()]
    assert {"config.json", "summary.json", "rounds.jsonl", "server.records"} <= {
        p.name for p in written
    }
    assert {p.name: mode(p) for p in written} == {p.name: 0o644 for p in written}


def test_resume_drops_a_round_line_cut_short_by_the_crash(flat, tmp_path):
    from fgl_flower.results import RunRecorder

    out = tmp_path / "run"
    out.mkdir()
    (out / "rounds.jsonl").write_text('{"round": 1}\n{"round": 2}\n{"round": 3, "ev')
    recorder = RunRecorder(out, parse_run_config({**flat, "resume": True}))
    recorder.resume(3)
    assert [r["round"] for r in recorder.rounds] == [1, 2]
    assert (out / "rounds.jsonl").read_text() == '{"round": 1}\n{"round": 2}\n'


def test_checkpoint_files_round_trip_and_a_truncated_one_is_refused(tmp_path):
    import numpy as np
    from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

    from fgl_flower.checkpoint import read_records, write_records

    state = RecordDict(
        {
            "m": ArrayRecord({"w": Array(np.arange(6, dtype=np.float32).reshape(2, 3))}),
            "meta": ConfigRecord({"json": "{}", "n": 3}),
        }
    )
    path = tmp_path / "x.records"
    write_records(path, state)
    back = read_records(path)
    assert np.array_equal(back["m"]["w"].numpy(), state["m"]["w"].numpy())
    assert dict(back["meta"]) == {"json": "{}", "n": 3}
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(CheckpointError, match="truncated"):
        read_records(path)


@pytest.mark.parametrize(
    "method,options",
    [
        ("fedpub", {"model": "acmgcn", "hidden": 16, "fedpub.backbone": "model"}),
        ("fedstar", {"fedstar.feature-conv": "acm"}),
    ],
)
def test_resume_of_the_acmgcn_variants(flat, method, options, tmp_path):
    """S2FGL's Table 1 variants (FED-PUB's masks on ACM-GCN, FedStar's ACM-GCN feature
    channel): masks and personal channels come back from the client checkpoints."""
    flat.update({"method": method, "num-rounds": 4, "fraction-train": 0.67, **options})
    assert_resume_equals_uninterrupted(flat, tmp_path, partition=1)

"""A STOP file in a run folder ends the run after its current round, its summary written."""

from __future__ import annotations

import threading
import time

from fgl_flower.api import run
from fgl_flower.results import STOP_FILE

SMALL = {"dataset": "synthetic", "partition": "metis", "clients": 3, "progress": False}


def test_a_stop_file_ends_the_run_after_its_round(tmp_path):
    out = tmp_path / "run"

    def stop_after_the_first_round() -> None:
        while not (out / "rounds.jsonl").exists() or not (out / "rounds.jsonl").read_text():
            time.sleep(0.01)
        (out / STOP_FILE).touch()

    threading.Thread(target=stop_after_the_first_round, daemon=True).start()
    result = run("fedavg", rounds=200, out=out, **SMALL)
    done = result.summary["rounds_completed"]
    assert 1 <= done < 200 and len(result.rounds) == done
    assert result.summary["stopped"] == f"stopped on request (STOP) after round {done}"
    assert result.best["round"] <= done


def test_a_stop_file_left_by_an_earlier_run_is_removed(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / STOP_FILE).touch()
    result = run("fedavg", rounds=2, out=out, **SMALL)
    assert result.summary["rounds_completed"] == 2 and "stopped" not in result.summary
    assert not (out / STOP_FILE).exists()

"""Reading a run's records in tests (imported by tests)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

#: The summary's numbers that a resumed run must reproduce (:func:`digest`).
NUMBERS = ("final", "best_val", "last", "rounds_completed", "bytes_up_total")


def rounds(path: Path) -> list[dict]:
    """The records of ``path/rounds.jsonl``, one per round."""
    return [json.loads(line) for line in (path / "rounds.jsonl").read_text().splitlines()]


def probe(record: dict, name: str) -> float:
    """The client mean of probe ``name`` in one round's record."""
    return record["probes"][name]["mean"]


def digest(out: Path) -> str:
    """What must not change between two runs of the same config (e.g. an uninterrupted and a
    resumed one): the summary's numbers and every round's metrics, clients and upload bytes
    (downloads of a resumed run also carry its ``resume-round`` key)."""
    summary = json.loads((out / "summary.json").read_text())
    keep = [
        {
            k: r.get(k)
            for k in (
                "round",
                "train",
                "eval",
                "clients",
                "train_clients",
                "eval_clients",
                "bytes_up",
            )
        }
        for r in rounds(out)
    ]
    return hashlib.sha256(
        json.dumps([{k: summary[k] for k in NUMBERS}, keep], sort_keys=True).encode()
    ).hexdigest()

"""Reading a run's records in tests (imported by tests)."""

from __future__ import annotations

import json
from pathlib import Path


def rounds(path: Path) -> list[dict]:
    """The records of ``path/rounds.jsonl``, one per round."""
    return [json.loads(line) for line in (path / "rounds.jsonl").read_text().splitlines()]


def probe(record: dict, name: str) -> float:
    """The client mean of probe ``name`` in one round's record."""
    return record["probes"][name]["mean"]

"""Seeds derived from a run's seed: one stable stream per (client, round, phase)."""

from __future__ import annotations

import hashlib


def derive_seed(*parts: int | str) -> int:
    """A stable 31-bit seed from ``parts`` (e.g. run seed, partition id, round)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF

"""Probes: per-round evidence that a method's own mechanism is at work (torch-free).

A result is a finding about a paper only while the method's idea is alive in the run: a
latent graph that is not empty, clusters that split, proxies that align, losses that take a
share. A method declares its probes in its :class:`~fgl_flower.methods.MethodSpec`
(``probes=``); its clients report them as metrics named ``probe.<name>`` in their train or
evaluate replies, and its strategy may add server-side values
(:meth:`~fgl_flower.strategies.base.FGLStrategy.server_probes`). Every round's record in
``rounds.jsonl`` then holds

.. code-block:: json

    "probes": {"latent.nonempty": {"mean": 1.0, "min": 1.0, "max": 1.0,
                                   "clients": {"0": 1.0, "1": 1.0}}}

and a :class:`ProbeWatch` warns in the run's output when a declared probe crosses its
``dead`` bound (once when it dies, once when it comes back) and lists the probes dead at
the end in ``summary.json`` (``probes_dead``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: Prefix of a probe value among a reply's metrics.
PROBE = "probe."


@dataclass(frozen=True)
class Probe:
    """One quantity that shows a mechanism working.

    Attributes:
        name: Key in the round record's ``probes`` (``latent.nonempty``); clients report it
            as ``probe.<name>``.
        doc: What it measures, one line.
        dead_below: The mechanism is dead on a client whose value is below this.
        dead_above: ... or above this.
        why: What a dead value means, for the warning.
    """

    name: str
    doc: str
    dead_below: float | None = None
    dead_above: float | None = None
    why: str = ""

    def dead(self, value: float | None) -> bool:
        """Whether ``value`` (one client's, or a server-side value) is past a dead bound; an
        undefined value (NaN, or ``None`` as JSON stores it) is dead only for a probe with a
        bound (e.g. the homophily of an empty graph is undefined, not dead)."""
        if self.dead_below is None and self.dead_above is None:
            return False
        if value is None or not math.isfinite(value):
            return True
        return (self.dead_below is not None and value < self.dead_below) or (
            self.dead_above is not None and value > self.dead_above
        )

    def bound(self) -> str:
        parts = [
            f"< {self.dead_below:g}" if self.dead_below is not None else "",
            f"> {self.dead_above:g}" if self.dead_above is not None else "",
        ]
        return " or ".join(p for p in parts if p)


def as_metrics(values: Mapping[str, float]) -> dict[str, float]:
    """Probe ``values`` by name as reply metrics (``probe.<name>``)."""
    return {PROBE + k: float(v) for k, v in values.items()}


def split_probes(metrics: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """``(metrics without probes, {probe name: value})`` of one reply's metrics."""
    rest, probes = {}, {}
    for k, v in metrics.items():
        if k.startswith(PROBE):
            probes[k[len(PROBE) :]] = float(v)
        else:
            rest[k] = v
    return rest, probes


def summarize_probe(per_client: Mapping[int | str, float]) -> dict:
    """``{"mean", "min", "max", "clients"}`` of one probe's per-client values (NaN-free
    values only in the statistics)."""
    finite = [float(v) for v in per_client.values() if math.isfinite(float(v))]
    stats = (
        {"mean": sum(finite) / len(finite), "min": min(finite), "max": max(finite)}
        if finite
        else {"mean": float("nan"), "min": float("nan"), "max": float("nan")}
    )
    order = sorted(
        per_client, key=lambda k: (not str(k).isdigit(), int(k) if str(k).isdigit() else 0, str(k))
    )
    return {**stats, "clients": {str(k): float(per_client[k]) for k in order}}


def collect_probes(per_client: Mapping[int, Mapping[str, float]]) -> dict[str, dict]:
    """The round record's ``probes`` from per-client metric dicts (``probe.*`` keys)."""
    values: dict[str, dict[int, float]] = {}
    for pid, metrics in per_client.items():
        for name, v in split_probes(metrics)[1].items():
            values.setdefault(name, {})[pid] = v
    return {name: summarize_probe(v) for name, v in sorted(values.items())}


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4g}"


class ProbeWatch:
    """Warns when a declared probe dies or comes back, per client (or ``server``)."""

    def __init__(self, probes: Iterable[Probe]) -> None:
        self.probes = {p.name: p for p in probes}
        self.dead: dict[tuple[str, str], float] = {}  # (probe, client) -> value when it died

    def check(
        self, server_round: int, probes: Mapping[str, Mapping], skip: Iterable[str] = ()
    ) -> list[str]:
        """Messages for the probes of this round's record that changed state; the ``skip``
        probes are off by design this round (e.g. a loss before its start round)."""
        out = []
        skip = set(skip)
        for name, probe in self.probes.items():
            if name not in probes or name in skip:
                continue
            for client, value in probes[name]["clients"].items():
                key, now = (name, client), probe.dead(value)
                who = "the server" if client == "server" else f"client {client}"
                if now and key not in self.dead:
                    self.dead[key] = value
                    out.append(
                        f"Round {server_round}: {name} = {_fmt(value)} on {who} ({probe.bound()}: "
                        f"dead). {probe.why or probe.doc}"
                    )
                elif not now and key in self.dead:
                    del self.dead[key]
                    out.append(
                        f"Round {server_round}: {name} = {_fmt(value)} on {who} is alive again."
                    )
        return out

    def state(self) -> list[list]:
        """What a checkpoint keeps: ``[[probe, client, value when it died], ...]``."""
        return [[name, client, value] for (name, client), value in sorted(self.dead.items())]

    def load_state(self, state: list[list]) -> None:
        """Resume from :meth:`state` (a resumed run does not warn again)."""
        self.dead = {(name, client): value for name, client, value in state}

    def dead_now(self) -> dict[str, list[str]]:
        """``{probe: [clients]}`` dead at the last check (for ``summary.json``)."""
        out: dict[str, list[str]] = {}
        for name, client in sorted(self.dead):
            out.setdefault(name, []).append(client)
        return out


__all__ = [
    "PROBE",
    "Probe",
    "ProbeWatch",
    "as_metrics",
    "collect_probes",
    "split_probes",
    "summarize_probe",
]

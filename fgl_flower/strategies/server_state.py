"""The server's checkpoint: its state after a round as a Flower :class:`RecordDict`, and back.

:func:`pack_state` puts a :class:`ServerState` (the global arrays, the strategy's
:attr:`~fgl_flower.strategies.base.FGLStrategy.checkpointed` attributes, the flat run config,
the round whose evaluation is still pending, the probe watch's dead probes) into the records
a :class:`~fgl_flower.checkpoint.Checkpointer` writes; :func:`unpack_state` reads them back and
refuses a checkpoint of another config (:data:`RESUMABLE_KEYS` aside).
:meth:`FGLStrategy.checkpoint_records <fgl_flower.strategies.base.FGLStrategy.checkpoint_records>`
and :meth:`~fgl_flower.strategies.base.FGLStrategy.restore` delegate to them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fgl_flower.errors import ConfigError
from fgl_flower.protocol import ARRAYS, CONFIG
from fgl_flower.records import require_record
from fgl_flower.results import strict_json

#: Config keys that may change between the interrupted and the resumed run: where and on
#: what it runs, and how it reacts to faults, not what it computes.
RESUMABLE_KEYS = frozenset(
    {
        "resume",
        "out-dir",
        "progress",
        "round-timeout",
        "accept-failures",
        "data-root",
        "device",
        "cpus-per-client",
        "gpus-per-client",
        "reuse-clients",
        "checkpoint-every",
        "checkpoint-dir",
    }
)

#: The record prefix of a checkpointed strategy attribute (``strategy.<name>``).
ATTRIBUTE_PREFIX = "strategy."

#: The key of the pending record that holds its round's global arrays (kept apart: the
#: checkpoint stores them once, as its :data:`~fgl_flower.protocol.ARRAYS`).
PENDING_ARRAYS = "_arrays"


@dataclass
class ServerState:
    """What the server carries from one round to the next: a checkpoint's content."""

    #: the last round done (0: none yet)
    round: int
    #: the global arrays after it
    arrays: ArrayRecord
    #: the flat run config (``RunConfig.raw``)
    config: dict[str, Any]
    #: the round whose evaluation rides in the next train batch (fused evaluation), if any
    pending: dict | None = None
    #: the strategy's checkpointed attributes that are set: numpy arrays or torch tensors
    attributes: dict[str, Any] = field(default_factory=dict)
    #: :meth:`ProbeWatch.state <fgl_flower.probes.ProbeWatch.state>`
    probes_dead: list[list] = field(default_factory=list)


def pack_state(state: ServerState) -> RecordDict:
    """``state`` as records: the arrays, one ``strategy.<name>`` record per attribute and a
    ``config`` record with the rest as JSON (the pending record without its arrays)."""
    records = RecordDict({ARRAYS: state.arrays})
    kinds = {}
    for name, value in state.attributes.items():
        if value is not None:
            kinds[name] = "numpy" if isinstance(value, np.ndarray) else "torch"
            records[f"{ATTRIBUTE_PREFIX}{name}"] = ArrayRecord(
                {
                    "value": Array(
                        np.asarray(
                            value if kinds[name] == "numpy" else value.detach().cpu().numpy()
                        )
                    )
                }
            )
    pending = state.pending
    if pending is not None:
        pending = {k: v for k, v in pending.items() if k != PENDING_ARRAYS}
    meta = {
        "round": state.round,
        "config": dict(state.config),
        "pending": pending,
        "kinds": kinds,
        "probes_dead": state.probes_dead,
    }
    records[CONFIG] = ConfigRecord({"json": strict_json(meta)})
    return records


def config_changes(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The keys, sorted, whose values differ between ``saved`` and ``now`` (a key missing in
    one is ``None`` there), :data:`RESUMABLE_KEYS` aside."""
    return sorted(
        k for k in set(saved) | set(now) if k not in RESUMABLE_KEYS and saved.get(k) != now.get(k)
    )


def unpack_state(records: RecordDict, config: Mapping[str, Any]) -> ServerState:
    """The state :func:`pack_state` put into ``records``, after checking it was saved under the
    flat run ``config`` (:func:`config_changes`; else :class:`ConfigError` naming up to five
    differing keys). The pending record gets its arrays back."""
    meta = json.loads(str(require_record(records, CONFIG, ConfigRecord)["json"]))
    saved, now = meta["config"], dict(config)
    changed = config_changes(saved, now)
    if changed:
        raise ConfigError(
            "The checkpoint belongs to another config; differing keys: "
            + ", ".join(
                f"{k} ({saved.get(k)!r} in the checkpoint, {now.get(k)!r} now)" for k in changed[:5]
            )
        )
    attributes = {}
    for name, kind in meta["kinds"].items():
        value = require_record(records, f"{ATTRIBUTE_PREFIX}{name}", ArrayRecord)["value"].numpy()
        if kind == "torch":
            import torch  # only strategies whose state is a tensor have torch loaded

            value = torch.from_numpy(value)
        attributes[name] = value
    arrays = require_record(records, ARRAYS, ArrayRecord)
    pending = meta["pending"]
    if pending is not None:
        pending[PENDING_ARRAYS] = arrays
    return ServerState(
        round=int(meta["round"]),
        arrays=arrays,
        config=saved,
        pending=pending,
        attributes=attributes,
        probes_dead=meta.get("probes_dead", []),
    )

"""Typed access to a client's persistent ``context.state``.

Flower keeps ``context.state`` (a :class:`~flwr.app.RecordDict`) per node and run, in
simulation and in deployment (where every message runs in a fresh process). Everything a
client must remember between rounds (model weights, optimizer state, method tensors)
goes through this wrapper, never through Python globals.
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch
from flwr.app import ConfigRecord, RecordDict
from torch import Tensor, nn

from fgl_flower.records import record_torch, torch_record


class ClientState:
    """Save and restore modules, optimizers, tensors and JSON values by key."""

    def __init__(self, records: RecordDict) -> None:
        self.records = records

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def discard(self, key: str) -> None:
        """Forget ``key``, whatever was saved under it (a module, tensors, an optimizer's
        two records, a JSON value): state a client no longer needs stops travelling with
        every message and being checkpointed."""
        for name in (key, f"{key}.tensors", f"{key}.meta"):
            self.records.pop(name, None)

    # -- tensors ---------------------------------------------------------------------------
    def save_tensors(self, key: str, tensors: dict[str, Tensor]) -> None:
        self.records[key] = torch_record(tensors)

    def load_tensors(self, key: str) -> dict[str, Tensor] | None:
        rec = self.records.get(key)
        return None if rec is None else record_torch(rec)

    # -- modules ---------------------------------------------------------------------------
    def save_module(self, key: str, module: nn.Module) -> None:
        self.save_tensors(key, module.state_dict())

    def load_module(self, key: str, module: nn.Module) -> bool:
        """Load ``module`` from state; returns ``False`` when nothing was saved yet."""
        sd = self.load_tensors(key)
        if sd is None:
            return False
        module.load_state_dict(sd)
        return True

    # -- optimizers ------------------------------------------------------------------------
    def save_optimizer(self, key: str, optimizer: torch.optim.Optimizer) -> None:
        """The optimizer's state: its tensors packed into one array per dtype (one Flower
        ``Array`` costs more to make than a small tensor to copy), the rest as JSON."""
        sd = optimizer.state_dict()
        packs: dict[str, list[Tensor]] = {}
        layout: list[list] = []
        scalars: dict[str, dict[str, Any]] = {}
        for pid, pstate in sd["state"].items():
            for name, value in pstate.items():
                if isinstance(value, Tensor):
                    dtype = str(value.dtype).removeprefix("torch.")
                    packs.setdefault(dtype, []).append(value.detach().reshape(-1))
                    layout.append([f"{pid}/{name}", dtype, list(value.shape)])
                else:
                    scalars.setdefault(str(pid), {})[name] = value
        self.save_tensors(f"{key}.tensors", {d: torch.cat(ts) for d, ts in packs.items()})
        self.set_json(
            f"{key}.meta",
            {"param_groups": sd["param_groups"], "scalars": scalars, "layout": layout},
        )

    def load_optimizer(self, key: str, optimizer: torch.optim.Optimizer) -> bool:
        meta = self.get_json(f"{key}.meta")
        if meta is None:
            return False
        packs = self.load_tensors(f"{key}.tensors") or {}
        offsets = dict.fromkeys(packs, 0)
        state: dict[int, dict[str, Any]] = {}
        for name, dtype, shape in meta["layout"]:
            n = math.prod(shape)
            value = packs[dtype][offsets[dtype] : offsets[dtype] + n].reshape(shape)
            offsets[dtype] += n
            pid, field = name.split("/", 1)
            state.setdefault(int(pid), {})[field] = value
        for pid, values in meta["scalars"].items():
            state.setdefault(int(pid), {}).update(values)
        optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
        return True

    # -- JSON values -----------------------------------------------------------------------
    def set_json(self, key: str, value: Any) -> None:
        self.records[key] = ConfigRecord({"json": json.dumps(value)})

    def get_json(self, key: str) -> Any:
        rec = self.records.get(key)
        return None if rec is None else json.loads(str(rec["json"]))

"""Resource accounting of a client: model size, shared parameters, FLOPs of a round.

Reported once per client and run, in its first train reply, as ``res.*`` metrics that the
server gathers into the run summary (``summary["resources"]``).
"""

from __future__ import annotations

import copy

import torch
from torch.utils.flop_counter import FlopCounterMode, addmm_flop, mm_flop

from fgl_flower.clients.learner import Learner, make_optimizer
from fgl_flower.protocol import RESOURCES as PREFIX


class SparseProducts:
    """FlopCounterMode formulas for ``mm``/``addmm`` that set products with a sparse
    operand (message passing on a CSR adjacency) apart: they count 0 towards the mode's
    total and 2 per stored entry and dense column in :attr:`flops`, instead of the dense
    ``[N, N]`` product their shapes describe."""

    def __init__(self) -> None:
        self.flops = 0

    def _formula(self, dense_formula):
        def count(*args, out_val=None, **kwargs) -> int:
            a, b = args[-2], args[-1]
            if a.layout != torch.strided or b.layout != torch.strided:
                sparse, dense_cols = (
                    (a, b.shape[-1]) if a.layout != torch.strided else (b, a.shape[0])
                )
                self.flops += 2 * sparse._nnz() * dense_cols
                return 0
            return dense_formula(
                *(tuple(t.shape) if isinstance(t, torch.Tensor) else t for t in args)
            )

        count._get_raw = True
        return count

    def mapping(self) -> dict:
        """The ``custom_mapping`` of a :class:`FlopCounterMode`."""
        return {
            torch.ops.aten.mm: self._formula(mm_flop),
            torch.ops.aten.addmm: self._formula(addmm_flop),
        }


def round_flops(learner: Learner, epochs: int) -> tuple[int, int]:
    """FLOPs of ``epochs`` local epochs, forward and backward, as
    :class:`torch.utils.flop_counter.FlopCounterMode` counts them, 2 per multiply-add:
    ``(layers, message passing)``. *Layers*: the dense matrix products (linear layers,
    GCN's dense transform). *Message passing*: the sparse products with an adjacency
    (:class:`SparseProducts`); scatter-based aggregation (layers fed an ``edge_index``)
    and elementwise work are not counted.

    Runs on a copy of the model and optimizer, with the random state restored after, so
    the learner and the run's numbers do not change.
    """
    devices = [learner.device] if learner.device.type == "cuda" else []
    twin = copy.copy(learner)
    twin.model = copy.deepcopy(learner.model)
    twin.optimizer = make_optimizer(twin.model.parameters(), learner.cfg)
    sparse = SparseProducts()
    with (
        torch.random.fork_rng(devices=devices),
        FlopCounterMode(display=False, custom_mapping=sparse.mapping()) as counter,
    ):
        twin.fit(epochs)
    return int(counter.get_total_flops()), sparse.flops


def resource_metrics(learner: Learner, epochs: int, uploads: bool) -> dict[str, float]:
    """``res.params`` (the whole local model), ``res.shared-params`` (parameters uploaded
    each round; 0 if the client uploads none), ``res.flops`` and ``res.mp-flops`` (the
    layers' and the message passing's FLOPs of a round, :func:`round_flops`)."""
    shared = sum(p.numel() for _, p in learner.shared_parameters()) if uploads else 0
    flops, mp_flops = round_flops(learner, epochs)
    return {
        f"{PREFIX}params": float(sum(p.numel() for p in learner.model.parameters())),
        f"{PREFIX}shared-params": float(shared),
        f"{PREFIX}flops": float(flops),
        f"{PREFIX}mp-flops": float(mp_flops),
    }

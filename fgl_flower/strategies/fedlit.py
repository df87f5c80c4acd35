r"""FedLit server (Xie, Xiong and Yang, WWW 2023): aligns the clients' latent link types and
averages each global type's channel over the client types aligned to it.

Each client uploads its whole multi-channel GCN, its :math:`K` link-type centroids
:math:`\mathbf c^i_k` and the number of its training nodes that each type's subgraph holds.
The server keeps :math:`K` global centres :math:`\bar{\mathbf c}_g` (the first round: the
first client's centroids). Every round it matches each client's types to the centres
(:func:`match_types`: repeatedly the most cosine-similar pair of an unmatched type and an
unmatched centre), moves every centre to the mean of the centroids matched to it, and
averages

.. math::
    \bar{\mathbf W}_{\text{shared}} = \sum_i \frac{n_i}{\sum_j n_j}\mathbf W^i_{\text{shared}},
    \qquad
    \bar{\mathbf W}_g = \frac{1}{|M_g|}\sum_{(i, k)\in M_g}\mathbf W^i_k

for the projection and the classifier (``n_i`` by ``agg-weight``) and for each global type's
channel over the client types matched to it whose subgraph holds training nodes
(:math:`M_g`; none: the channel stays, in round 1 the initial one). Client :math:`i` then receives, for its type
:math:`k`, the channel and centre of the global type it matched (``fedlit.alignment =
"official"``: the official code's indexing, see :data:`~fgl_flower.methods.fedlit.ALIGNMENTS`).

The global model, the centres (``global.centroids``) and each client's alignment
(``client<i>.alignment``, ``[K]``) live in one :class:`ArrayRecord`, so the run's checkpoint
holds them. The round record keeps the alignments and the matched cosines (``fedlit``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from flwr.app import ArrayRecord, Message, MetricRecord

from fgl_flower.config import RunConfig
from fgl_flower.methods.fedlit import CENTROIDS, FedLitOptions
from fgl_flower.protocol import ARRAYS
from fgl_flower.records import record_torch, require_record, sub_record, torch_record
from fgl_flower.strategies.aggregation import weighted_mean_arrays
from fgl_flower.strategies.grid import reply_partition_id
from fgl_flower.strategies.multi_model import MultiModelStrategy, client_owner

GLOBAL = "global"
ALIGNMENT = "alignment"
CHANNEL = "channels."


def match_types(centroids: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
    """``[K]``: the centre each of a client's ``K`` types is matched to (a permutation).

    Greedy, as the official server: over the cosine matrix ``[centres, types]`` take the
    largest entry (the first in row-major order on ties), pair its centre and type, strike
    both, repeat."""
    sim = torch.nn.functional.cosine_similarity(
        centers[:, None, :], centroids[None, :, :], dim=-1
    ).double()
    k = centers.size(0)
    out = torch.full((k,), -1, dtype=torch.long)
    for _ in range(k):
        flat = int(sim.argmax())
        center, kind = divmod(flat, k)
        out[kind] = center
        sim[center, :] = -float("inf")
        sim[:, kind] = -float("inf")
    return out


def channel_of(key: str) -> tuple[int, str] | None:
    """``(k, rest)`` of a key ``channels.<k>.<rest>``, else ``None``."""
    if not key.startswith(CHANNEL):
        return None
    k, rest = key[len(CHANNEL) :].split(".", 1)
    return int(k), rest


class FedLitStrategy(MultiModelStrategy):
    """Link-type alignment and per-type averaging (module docstring)."""

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.opts = FedLitOptions.from_config(cfg)
        self.last: dict = {}
        self._initial: dict[str, torch.Tensor] | None = None

    def model_for(self, arrays: ArrayRecord, partition_id: int) -> ArrayRecord:
        """The global model with the channels and centres in the client's type order (a
        client not aligned yet: the global order)."""
        model = sub_record(arrays, GLOBAL)
        if not len(model):
            return ArrayRecord()  # round 1: the seeded model, the client's own k-means
        tensors = record_torch(model)
        mine = sub_record(arrays, client_owner(partition_id))
        if ALIGNMENT not in mine:
            return model
        align = record_torch(mine)[ALIGNMENT]
        slot = {int(g): k for k, g in enumerate(align)}  # global type -> the client's type
        out = {}
        for key, value in tensors.items():
            ch = channel_of(key)
            out[key if ch is None else f"{CHANNEL}{slot[ch[0]]}.{ch[1]}"] = value
        out["centroids"] = tensors["centroids"][align]
        return torch_record(out)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        pids = [reply_partition_id(r) for r in replies]
        uploads = [require_record(r.content, ARRAYS, ArrayRecord) for r in replies]
        models = [record_torch(u) for u in uploads]
        counts = [
            record_torch(require_record(r.content, CENTROIDS, ArrayRecord))["train-counts"]
            for r in replies
        ]
        sizes = [self.reply_weight(r) for r in replies]
        previous = record_torch(sub_record(self.models, GLOBAL))
        centers = previous.get("centroids")
        if centers is None:
            centers = models[0]["centroids"].clone()
        matches = [match_types(m["centroids"], centers) for m in models]
        if "centroids" not in previous:
            matches[0] = torch.arange(centers.size(0))  # the first client's types define the groups
        # what each client's type k joins: its matched centre (the official code: the inverse)
        joins = matches if self.opts.alignment == "matched" else [torch.argsort(m) for m in matches]
        cos = [
            float(torch.nn.functional.cosine_similarity(m["centroids"], centers[j], dim=-1).mean())
            for m, j in zip(models, joins)
        ]
        k_types = centers.size(0)
        new_centers = centers.clone()
        for g in range(k_types):
            members = [
                m["centroids"][k]
                for m, j in zip(models, joins)
                for k in range(k_types)
                if int(j[k]) == g
            ]
            if members:
                new_centers[g] = torch.stack(members).mean(0)
        # the projection and the classifier: weighted by the clients' sizes
        shared = [k for k in models[0] if k != "centroids" and channel_of(k) is None]
        out = record_torch(
            weighted_mean_arrays([ArrayRecord({k: u[k] for k in shared}) for u in uploads], sizes)
        )
        for key in models[0]:
            ch = channel_of(key)
            if ch is None:
                continue
            g, rest = ch
            members = [
                (m, k)
                for m, j, c in zip(models, joins, counts)
                for k in range(k_types)
                if int(j[k]) == g and float(c[k]) > 0
            ]
            if not members and key in previous:
                out[key] = previous[key]
                continue
            if (
                not members
            ):  # round 1, a type no client trained: the initial channel (the code's server model)
                out[key] = self.initial(models[0])[f"{CHANNEL}{g}.{rest}"]
                continue
            out[key] = (
                torch.stack([m[f"{CHANNEL}{k}.{rest}"].double() for m, k in members])
                .mean(0)
                .to(models[0][key].dtype)
            )
        out["centroids"] = new_centers
        downloads = joins if self.opts.alignment == "matched" else [joins[-1]] * len(joins)
        record = {f"{GLOBAL}.{k}": v for k, v in out.items()}
        for pid, d in zip(pids, downloads):
            record[f"{client_owner(pid)}.{ALIGNMENT}"] = d.clone()
        models_out = torch_record(record)
        for key, array in self.models.items():  # clients absent this round keep theirs
            if not key.startswith(f"{GLOBAL}.") and key not in models_out:
                models_out[key] = array
        self.models = models_out
        self.last = {
            "clients": pids,
            "alignment": [d.tolist() for d in downloads],
            "center-cos": [round(c, 6) for c in cos],
        }
        return self.models, self.aggregate_train_metrics(replies)

    def initial(self, upload: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The clients' round-1 model (seeded as theirs), its shapes read off an upload."""
        if self._initial is None:
            from fgl_flower.device import cpu_seeded
            from fgl_flower.models.fedlit import build_fedlit

            c, o = self.cfg, self.opts
            hidden, features = upload["feature1.weight"].shape
            with cpu_seeded(c.seed):
                model = build_fedlit(
                    features,
                    upload["classifier.weight"].shape[0],
                    hidden,
                    o.num_types,
                    c.num_layers,
                    c.dropout,
                    o.em_iters,
                    c.seed,
                    c.model_init,
                )
            self._initial = {k: v.detach() for k, v in model.state_dict().items()}
        return self._initial

    def round_record(self, server_round: int) -> dict:
        return {"fedlit": self.last} if self.last else {}

    def server_probes(self, server_round: int) -> dict[str, float]:
        if not self.last:
            return {}
        identity = list(range(len(self.last["alignment"][0])))
        return {
            "fedlit.center-cos": float(np.mean(self.last["center-cos"])),
            "fedlit.permuted": float(np.mean([a != identity for a in self.last["alignment"]])),
        }

"""The client side of SecAgg+: a Flower mod around the ``query.secagg`` and ``train`` handlers.

The mod answers the protocol's stages itself and keeps its secrets in ``context.state``
(:data:`STATE`); only in ``collect`` does it call the handler -- the wrapped query (its
action named by the server) or the train message itself -- and it replaces the named record
of the reply with its masked encoding (weighted by a reply metric where the server asks for a
weighted sum). Messages without the protocol's record pass through. The secrets are fresh in every protocol run (:func:`os.urandom` and new key
pairs): they never repeat across runs, while the masks cancel exactly in the sum, so the
sum does not depend on them.
"""

from __future__ import annotations

import hashlib
import os
from typing import cast

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.common.secure_aggregation.crypto.shamir import create_shares
from flwr.common.secure_aggregation.crypto.symmetric_encryption import (
    decrypt,
    encrypt,
    generate_shared_key,
)
from flwr.common.secure_aggregation.secaggplus_utils import (
    share_keys_plaintext_concat,
    share_keys_plaintext_separate,
)
from flwr.supercore.primitives.asymmetric import (
    bytes_to_private_key,
    bytes_to_public_key,
    generate_key_pairs,
    private_key_to_bytes,
    public_key_to_bytes,
)

from fgl_flower.errors import FGLError
from fgl_flower.protocol import METRICS, PARTITION_ID
from fgl_flower.records import get_record, require_record
from fgl_flower.secagg.encoding import MODULUS, encode, layout_of
from fgl_flower.secagg.masks import pairwise_mask, private_mask
from fgl_flower.secagg.protocol import (
    ACTIVE,
    CIPHERTEXTS,
    CLIENTS,
    COMMITMENT,
    DEAD,
    DESTINATIONS,
    FRACTION_BITS,
    IDS,
    LAYOUT_KEYS,
    LAYOUT_SHAPES,
    MASKED,
    PUBLIC_KEY_1,
    PUBLIC_KEY_2,
    RECORD,
    SECAGG,
    SECAGG_STATE,
    SHARES,
    SOURCES,
    STAGE,
    STAGES,
    THRESHOLD,
    WEIGHT,
    WEIGHT_KEY,
)

#: ``context.state`` key of this client's protocol state (kept from ``setup`` to ``unmask``,
#: never checkpointed).
STATE = SECAGG_STATE


def mask(
    vector: np.ndarray, node_id: int, rd_seed: bytes, sk1: bytes, neighbours: dict[int, bytes]
) -> np.ndarray:
    """``vector`` plus the private mask of ``rd_seed`` and, per neighbour ``j`` (its first
    public key), the pairwise mask of the shared key, added where ``node_id > j`` and
    subtracted otherwise (so each pair's masks cancel in the sum), modulo ``2^62``."""
    out = np.mod(vector + private_mask(rd_seed, vector.shape), MODULUS)
    for j, pk1 in neighbours.items():
        pair = pairwise_mask(sk1, pk1, vector.shape)
        out = np.mod(out + pair if node_id > j else out - pair, MODULUS)
    return out


def secaggplus_mod(msg: Message, context: Context, call_next) -> Message:
    """Answer one SecAgg+ stage of a ``query.secagg`` message (see :mod:`fgl_flower.secagg`)."""
    cfg = get_record(msg.content, SECAGG, ConfigRecord)
    if cfg is None:  # a message of the wrapped handler outside the protocol (e.g. a plain train)
        return call_next(msg, context)
    stage = str(cfg[STAGE])
    if stage not in STAGES:
        raise FGLError(
            f"Secure aggregation: unknown stage {stage!r} (use one of {', '.join(STAGES)})."
        )
    state = dict(context.state.get(STATE, ConfigRecord()))
    if stage != STAGES[0] and not state:
        raise FGLError(
            f"Secure aggregation: stage {stage!r} before 'setup' on node {msg.metadata.dst_node_id}."
        )
    expected = STAGES[STAGES.index(str(state["done"])) + 1] if state else STAGES[0]
    if stage != STAGES[0] and stage != expected:  # a replayed collect would reuse the masks
        raise FGLError(
            f"Secure aggregation: stage {stage!r} out of order on node {msg.metadata.dst_node_id} "
            f"(expected {expected!r}); the protocol answers each stage once, in order."
        )
    me = msg.metadata.dst_node_id
    content = RecordDict()
    if stage == "setup":
        sk1, pk1 = generate_key_pairs()
        sk2, pk2 = generate_key_pairs()
        state = {
            "sk1": private_key_to_bytes(sk1),
            "pk1": public_key_to_bytes(pk1),
            "sk2": private_key_to_bytes(sk2),
            "pk2": public_key_to_bytes(pk2),
        }
        reply = {PUBLIC_KEY_1: state["pk1"], PUBLIC_KEY_2: state["pk2"]}
    elif stage == "share-keys":
        reply = _share_keys(state, cfg, me)
    elif stage == "collect":
        out = call_next(msg, context)
        content = out.content
        reply = _collect(state, cfg, me, content)
    else:
        reply = _unmask(state, cfg)
    if stage == STAGES[-1]:  # the protocol is over: its secrets go
        del context.state[STATE]
    else:
        context.state[STATE] = ConfigRecord({**state, "done": stage})
    if PARTITION_ID in context.node_config:  # whose reply it is, for the grid's bookkeeping
        reply[PARTITION_ID] = int(context.node_config[PARTITION_ID])
    content[SECAGG] = ConfigRecord(reply)
    return Message(content, reply_to=msg)


def _share_keys(state: dict, cfg: ConfigRecord, me: int) -> dict:
    """Keep the neighbours' public keys; send each neighbour its encrypted shares of this
    client's private mask seed and first secret key."""
    ids = [int(i) for i in cast(list, cfg[IDS])]
    pk1s, pk2s = cast(list, cfg[PUBLIC_KEY_1]), cast(list, cfg[PUBLIC_KEY_2])
    threshold = int(cfg[THRESHOLD])
    if me not in ids or pk1s[ids.index(me)] != state["pk1"] or pk2s[ids.index(me)] != state["pk2"]:
        raise FGLError(
            "Secure aggregation: the server sent this client a key list without its own keys."
        )
    if len(set(pk1s) | set(pk2s)) != 2 * len(ids):
        raise FGLError("Secure aggregation: two neighbours share a public key.")
    if len(ids) < threshold:
        raise FGLError(
            f"Secure aggregation: {len(ids)} neighbours, fewer than the threshold {threshold}."
        )
    if (
        threshold <= len(ids) // 2
    ):  # else a server claiming a client dropped could get both its secrets
        raise FGLError(
            f"Secure aggregation: the server asked for a threshold of {threshold} among {len(ids)} "
            "neighbours; SecAgg+ needs a majority, so this client does not share its secrets."
        )
    rd_seed = os.urandom(32)
    seed_shares = create_shares(rd_seed, threshold, len(ids))
    key_shares = create_shares(state["sk1"], threshold, len(ids))
    dsts, cts = [], []
    for nid, pk2, seed_share, key_share in zip(ids, pk2s, seed_shares, key_shares):
        if nid == me:
            state["own-seed-share"], state["own-key-share"] = seed_share, key_share
            continue
        key = generate_shared_key(bytes_to_private_key(state["sk2"]), bytes_to_public_key(pk2))
        dsts.append(nid)
        cts.append(encrypt(key, share_keys_plaintext_concat(me, nid, seed_share, key_share)))
    state.update(
        {
            "rd-seed": rd_seed,
            "ids": ids,
            "pk1s": list(pk1s),
            "pk2s": list(pk2s),
            "threshold": threshold,
        }
    )
    return {DESTINATIONS: dsts, CIPHERTEXTS: cts, COMMITMENT: hashlib.sha256(rd_seed).digest()}


def _collect(state: dict, cfg: ConfigRecord, me: int, content: RecordDict) -> dict:
    """Decrypt the shares the neighbours sent, then mask the wrapped reply's record."""
    srcs = [int(i) for i in cast(list, cfg[SOURCES])]
    ids = [int(i) for i in state["ids"]]
    if len(srcs) + 1 < int(state["threshold"]):
        raise FGLError(f"Secure aggregation: shares from {len(srcs)} neighbours, too few to go on.")
    held_from, seed_shares, key_shares = [me], [state["own-seed-share"]], [state["own-key-share"]]
    for src, ct in zip(srcs, cast(list, cfg[CIPHERTEXTS])):
        if src not in ids or src == me:
            raise FGLError(f"Secure aggregation: shares from node {src}, not a neighbour.")
        pk2 = state["pk2s"][ids.index(src)]
        key = generate_shared_key(bytes_to_private_key(state["sk2"]), bytes_to_public_key(pk2))
        actual, dst, seed_share, key_share = share_keys_plaintext_separate(decrypt(key, ct))
        if actual != src or dst != me:
            raise FGLError(
                f"Secure aggregation: node {me} got shares from {actual} for {dst}, sent as from {src}."
            )
        held_from.append(src)
        seed_shares.append(seed_share)
        key_shares.append(key_share)
    state.update({"held-from": held_from, "seed-shares": seed_shares, "key-shares": key_shares})
    name = str(cfg[RECORD])
    arrays = require_record(content, name, ArrayRecord).to_torch_state_dict()
    if weight_name := str(cfg.get(WEIGHT, "")):  # a weighted sum: n * values, and n
        weight = float(require_record(content, METRICS, MetricRecord)[weight_name])
        arrays = {
            **{k: v.double() * weight for k, v in arrays.items()},
            WEIGHT_KEY: torch.tensor([weight], dtype=torch.float64),
        }
    vector = encode(arrays, int(cfg[FRACTION_BITS]), int(cfg[CLIENTS]))
    neighbours = {src: state["pk1s"][ids.index(src)] for src in held_from if src != me}
    masked = mask(vector, me, state["rd-seed"], state["sk1"], neighbours)
    content[name] = ArrayRecord({MASKED: Array(masked)})
    layout = layout_of(arrays)
    return {
        LAYOUT_KEYS: [k for k, _ in layout],
        LAYOUT_SHAPES: [",".join(map(str, s)) for _, s in layout],
    }


def _unmask(state: dict, cfg: ConfigRecord) -> dict:
    """This client's shares of the mask seeds of the clients that sent a vector (itself
    among them) and of the first secret keys of the neighbours that dropped after sharing
    their keys."""
    held = {int(src): i for i, src in enumerate(state["held-from"])}
    active, dead = (
        [int(i) for i in cast(list, cfg[ACTIVE])],
        [int(i) for i in cast(list, cfg[DEAD])],
    )
    if set(active) & set(dead):  # both secrets of one client would reveal its vector
        raise FGLError(
            "Secure aggregation: the server asked for a client's seed and its key together."
        )
    ids, shares = [], []
    for nid in active:
        if nid in held:
            ids.append(nid)
            shares.append(state["seed-shares"][held[nid]])
    for nid in dead:
        if nid in held:
            ids.append(nid)
            shares.append(state["key-shares"][held[nid]])
    return {IDS: ids, SHARES: shares}

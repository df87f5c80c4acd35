"""Names of the SecAgg+ messages' fields (shared by :mod:`~fgl_flower.secagg.client` and
:mod:`~fgl_flower.secagg.server`; torch-free)."""

from __future__ import annotations

#: The method option that turns it on (``<method>.secure-aggregation``; ``fgl run --secagg``).
SECURE_AGGREGATION = "secure-aggregation"
#: The query action of every stage (``query.secagg``), and the ConfigRecord each message and
#: reply carries its stage's fields in.
SECAGG = "secagg"
#: ``context.state`` key of a client's protocol secrets (never checkpointed).
SECAGG_STATE = "fgl.secagg"
#: The stages, in order.
STAGES = ("setup", "share-keys", "collect", "unmask")

STAGE = "stage"
#: setup reply: the two public keys; share-keys message: the neighbours' (with the client's own)
PUBLIC_KEY_1, PUBLIC_KEY_2 = "pk1", "pk2"
#: share-keys message: the neighbours' node ids (the client's own among them) and the threshold
IDS, THRESHOLD = "ids", "threshold"
#: share-keys reply: the encrypted shares and their destinations; collect message: those for
#: this client and their sources
DESTINATIONS, SOURCES, CIPHERTEXTS = "destinations", "sources", "ciphertexts"
#: share-keys reply: SHA-256 of the client's private mask seed, against which the server checks
#: the seed it rebuilds from the neighbours' shares (a share that does not fit is found and named)
COMMITMENT = "seed-sha256"
#: collect message: the wrapped query's action ("" when the message is itself the train
#: message whose reply is summed), the record of its reply to mask, the
#: fixed-point fraction bits and the number of clients summed (the encoding's range check)
QUERY, RECORD, FRACTION_BITS, CLIENTS = "query", "record", "fraction-bits", "clients"
#: collect message: the reply metric that weights the record ("" for none); the weighted
#: record then also holds the weight under WEIGHT_KEY, so that the sum carries its total
WEIGHT, WEIGHT_KEY = "weight", "secagg.weight"
#: collect reply: the masked vector (in the masked record) and the layout of the arrays
MASKED, LAYOUT_KEYS, LAYOUT_SHAPES = "masked", "layout-keys", "layout-shapes"
#: unmask message: the neighbours that sent a vector and those that dropped after share-keys;
#: unmask reply: the owners of the returned shares, and the shares
ACTIVE, DEAD, SHARES = "active", "dead", "shares"

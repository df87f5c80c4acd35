r"""Secure Aggregation (SecAgg+, Bell et al., CCS 2020) of a reply's arrays on this package's grid.

The server learns the element-wise sum of one named record over the clients, never one
client's values, as long as it follows the protocol (honest-but-curious; docs/privacy.md).
Flower's cryptographic primitives do most of the work (key agreement, Shamir shares,
authenticated encryption); the masks are SHAKE-256 streams of their full seeds
(:mod:`~fgl_flower.secagg.masks`). The four stages run as ``query.secagg`` messages through
the run's grid, so every byte is metered; a client answers each once and in order:

1. ``setup``: each client makes two key pairs and sends both public keys;
2. ``share-keys``: each client receives its neighbours' public keys, draws a private mask
   seed, splits the seed and its first secret key into Shamir shares and sends each
   neighbour its shares, encrypted for it (the server only forwards them);
3. ``collect``: each client runs the wrapped query (e.g. O-pFGL's ``stats``), encodes the
   named record in fixed point (:mod:`~fgl_flower.secagg.encoding`) and adds its private
   mask and one pairwise mask per neighbour (added or subtracted by node order, so they
   cancel in the sum);
4. ``unmask``: each client that sent a vector returns its shares of the private seeds of the
   clients that sent one and of the first secret keys of those that dropped after
   sharing their keys; the server rebuilds these secrets from ``threshold`` shares, removes
   the private masks and the dropped clients' pairwise masks, and decodes the sum.

:mod:`~fgl_flower.secagg.client` is the client side (a Flower mod around the ``query.secagg``
handler), :mod:`~fgl_flower.secagg.server` the server side.
"""

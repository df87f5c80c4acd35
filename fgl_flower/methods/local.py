"""Local training: each client trains alone, the lower bound every table reports (torch-free spec)."""

from __future__ import annotations

from fgl_flower.methods.spec import MethodSpec

SPEC = MethodSpec(
    name="local",
    strategy="fgl_flower.strategies.local:LocalStrategy",
    client="fgl_flower.clients.local:LocalClient",
    space={},
    tasks=("node", "graph", "link", "graph-regression"),
    summary="Each client trains alone; nothing is averaged.",
)

"""SCAFFOLD's spec (torch-free): FedAvg with control variates that correct client drift."""

from __future__ import annotations

from fgl_flower.config import RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Server -> client record: the server control variate :math:`c` (the float arrays of the
#: global model, same keys and shapes); absent in round 1, where :math:`c = 0`.
CONTROL = "scaffold.control"
#: Client -> server record: the client's :math:`\Delta c_i = c_i^+ - c_i` (same layout).
DELTA = "scaffold.delta-control"
#: Reply metric: the local optimizer steps :math:`K` the client took this round.
STEPS = "scaffold.steps"

PROBES = (
    Probe(
        "scaffold.correction",
        "||c - c_i|| / ||g||: the control variates' correction against the local gradient, "
        "mean over the round's steps (0 in round 1, where c = c_i = 0)",
        dead_below=1e-3,
        why="The control variates cancel (c = c_i): the local steps are FedAvg's.",
    ),
    Probe(
        "scaffold.control-norm",
        "||c|| after the round (server): the server control variate",
        dead_below=1e-12,
        why="The server control variate is zero: no client's drift corrects another's.",
    ),
)


def check_config(cfg: RunConfig) -> None:
    lr = float(cfg.option("server-lr"))
    if not lr > 0:
        raise ConfigError(f"scaffold.server-lr must be > 0 (got {lr:g}); 1 is the paper's.")


SPEC = MethodSpec(
    name="scaffold",
    strategy="fgl_flower.strategies.scaffold:ScaffoldStrategy",
    client="fgl_flower.clients.scaffold:ScaffoldClient",
    space={"server-lr": "0.5..1.5"},
    tasks=("node", "graph", "link", "graph-regression"),
    summary="FedAvg with control variates: each local step corrected by c - c_i, the "
    "server's and the client's estimate of the update direction.",
    reference="Karimireddy et al., ICML 2020",
    options={"server-lr": 1.0},
    # option II reads (x - y_i) / (K lr) as the mean local gradient: plain SGD, as in the paper
    defaults={"optimizer": "sgd"},
    demo={"lr": 0.1},  # the no-option demo: plain SGD at the app's 0.01 learns little in 20 rounds
    option_help={
        "server-lr": "eta_g: the server's step along the clients' mean update (1: their mean)",
    },
    check=check_config,
    probes=PROBES,
)

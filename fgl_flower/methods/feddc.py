"""FedDC's spec (torch-free): SCAFFOLD's control variates plus a local drift variable."""

from __future__ import annotations

from fgl_flower.config import RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

PROBES = (
    Probe(
        "feddc.correction",
        "||c - c_i|| / ||g||: the control variates' correction against the local gradient, "
        "mean over the round's steps (0 in round 1)",
        dead_below=1e-3,
        why="The control variates cancel (c = c_i).",
    ),
    Probe(
        "feddc.control-norm",
        "||c|| after the round (server)",
        dead_below=1e-12,
        why="The server control variate is zero.",
    ),
    Probe(
        "feddc.drift",
        "||h_i|| / ||theta_i||: the client's local drift after the round, relative to its model",
        dead_below=1e-6,
        why="The local drift is zero: FedDC's model is SCAFFOLD's.",
    ),
    Probe(
        "feddc.drift-share",
        "||mean_i h_i|| / ||w||: how far the drift moves the global model off the clients' "
        "mean (server)",
    ),
)


def check_config(cfg: RunConfig) -> None:
    alpha = float(cfg.option("alpha"))
    if not alpha >= 0:
        raise ConfigError(f"feddc.alpha must be >= 0 (got {alpha:g}).")


SPEC = MethodSpec(
    name="feddc",
    strategy="fgl_flower.strategies.feddc:FedDCStrategy",
    client="fgl_flower.clients.feddc:FedDCClient",
    space={"alpha": "0.001..1:log"},
    tasks=("node", "graph", "link", "graph-regression"),
    summary="SCAFFOLD's control variates plus a local drift h_i that each client tracks and "
    "the server adds back: w = mean theta_i + mean h_i.",
    reference="Gao et al., CVPR 2022",
    options={"alpha": 0.01},
    option_help={"alpha": "weight of the drift penalty alpha/2 ||theta + h_i - w||^2"},
    # SCAFFOLD's control variates: plain SGD, as the paper's and its code's local solver
    defaults={"optimizer": "sgd"},
    demo={"lr": 0.1},  # the no-option demo: plain SGD at the app's 0.01 learns little in 20 rounds
    check=check_config,
    probes=PROBES,
)

"""FedProx's spec (torch-free): FedAvg with a proximal term in the local loss."""

from __future__ import annotations

from fgl_flower.dp.options import DP_HELP, DP_OPTIONS
from fgl_flower.methods.spec import MethodSpec

SPEC = MethodSpec(
    name="fedprox",
    strategy="fgl_flower.strategies.fedprox:FedProxStrategy",
    client="fgl_flower.clients.fedprox:FedProxClient",
    space={
        "mu": "0.0001..1:log",
    },
    tasks=("node", "graph", "link", "graph-regression"),
    summary="FedAvg with a proximal term mu/2 ||w - w_global||^2 in the local loss.",
    reference="Li et al., MLSys 2020",
    options={"mu": 0.01, "finetune-epochs": 0, "secure-aggregation": False, **DP_OPTIONS},
    robust_aggregation=True,
    option_help={
        "mu": "FedProx proximal weight",
        "finetune-epochs": ">0: evaluate a copy fine-tuned locally for this many epochs (FedProx+ft)",
        "secure-aggregation": "the uploaded weights through SecAgg+ (as fedavg's)",
        **DP_HELP,
    },
)

"""FedAvg's spec (torch-free): the weighted mean of the shared parameters."""

from __future__ import annotations

from fgl_flower.dp.options import DP_HELP, DP_OPTIONS
from fgl_flower.methods.spec import MethodSpec

SPEC = MethodSpec(
    name="fedavg",
    strategy="fgl_flower.strategies.fedavg:FedAvgStrategy",
    client="fgl_flower.clients.fedavg:FedAvgClient",
    space={},
    tasks=("node", "graph", "link", "graph-regression"),
    summary="Average of the shared parameters weighted by training examples.",
    reference="McMahan et al., AISTATS 2017",
    options={"finetune-epochs": 0, "secure-aggregation": False, **DP_OPTIONS},
    robust_aggregation=True,
    option_help={
        "finetune-epochs": ">0: evaluate a copy fine-tuned locally for this many epochs (FedAvg+ft)",
        "secure-aggregation": "the uploaded weights through SecAgg+: the server learns only their weighted sum",
        **DP_HELP,
    },
)

"""DENSE client (Zhang et al., NeurIPS 2022): FedAvg's local training in its one round, plus
the model's shape for the server; evaluation fine-tunes the distilled model with
``dense.finetune-epochs`` (FedAvg+ft's evaluation)."""

from __future__ import annotations

import torch
from flwr.app import RecordDict

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.methods.dense import SHAPE
from fgl_flower.records import torch_record


class DENSEClient(FedAvgClient):
    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        reply = super().train(content, server_round)
        reply[SHAPE] = torch_record(
            {"shape": torch.tensor([self.data.num_features, self.data.num_classes])}
        )
        return reply

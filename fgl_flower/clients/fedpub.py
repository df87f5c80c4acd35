r"""FED-PUB client (Baek et al., ICML 2023): a masked GCN trained from the personalised
weights the server sends, reporting its functional embedding. With ``fedpub.backbone =
"model"`` the masks sit on the run's ``model`` instead
(:class:`~fgl_flower.models.fedpub.MaskedBackbone`), whose ``embed`` then gives the
functional embedding.

Each round: load the weights received (the client's personalised average of the last
round it trained, or the global average; round 1: the seeded initial model), train
``local-epochs`` full-batch steps of

.. math::
    \mathcal L_{CE}(\mathbf W \odot \mathbf M) + \lambda_1 \sum_l \lVert\mathbf M_l\rVert_1
        + \lambda_2 \sum_l \lVert\mathbf W_l - \bar{\mathbf W}_l\rVert_2

(:math:`\bar{\mathbf W}` the weights received, from round 2 on; ``fedpub.regularizers =
"code"`` computes both terms as the official code does, on detached copies, so that they
change nothing), evaluate the trained model (``fedpub.evaluate = "trained"``; with
``"received"`` the evaluation is of the next personalised weights, with the client's masks),
and upload its weights (not its masks) with
the functional embedding :math:`\mathbf h = \frac{1}{|V_p|}\sum_{v\in V_p}
\mathbf H_2(G_p)_v` of the proxy graph :math:`G_p` (:func:`~fgl_flower.models.fedpub.proxy_graph`,
evaluation mode: pruned masks, no dropout). The proximal norm is the code's
``torch.norm(W - W_bar, 2)`` per layer parameter, not squared.
"""

from __future__ import annotations

import torch
from flwr.app import RecordDict

from fgl_flower.clients.fedavg import FedAvgClient
from fgl_flower.clients.learner import ExtraLoss, ModelBuilder
from fgl_flower.methods.fedpub import EMBEDDING, FedPubOptions
from fgl_flower.models.fedpub import LAYERS, MaskedBackbone, MaskedGCN, proxy_graph
from fgl_flower.probes import as_metrics
from fgl_flower.records import torch_record


class FedPubClient(FedAvgClient):
    @property
    def options(self) -> FedPubOptions:
        return FedPubOptions.from_config(self.cfg)

    def model_builder(self) -> ModelBuilder:
        o, c = self.options, self.cfg
        if o.backbone == "model":  # the run's backbone, masked
            from fgl_flower.models.registry import build_run_model

            return lambda num_features, num_classes: MaskedBackbone(
                build_run_model(c, "node", num_features, num_classes), o.l1, o.mask_init
            )
        return lambda num_features, num_classes: MaskedGCN(
            num_features, c.hidden, num_classes, c.dropout, o.l1, o.mask_init
        )

    def shared_prefixes(self) -> tuple[str, ...]:
        if self.options.backbone == "model":
            return ("net.",)
        return tuple(f"{layer}." for layer in LAYERS)

    def train(self, content: RecordDict, server_round: int) -> RecordDict:
        received = self.load_global(content)
        self.seed_round(server_round)
        res = self.learner.fit(self.cfg.local_epochs, extra_loss=self.regularizer(received))
        if self.options.evaluate == "trained":  # the server reads it from this reply
            res.update(self.evaluate_learner(self.learner, server_round))
        res.update(as_metrics(self.probe_metrics()))
        reply = self.training_reply(res)
        reply[EMBEDDING] = torch_record({"embedding": self.functional_embedding()})
        return reply

    def regularizer(self, received: dict[str, torch.Tensor]) -> ExtraLoss:
        r""":math:`\lambda_1\sum\lVert\mathbf M\rVert_1 + \lambda_2\sum\lVert\mathbf W -
        \bar{\mathbf W}\rVert_2` (the latter once weights were received)."""
        o = self.options
        reference = {k: v.detach().to(self.device) for k, v in received.items()}

        def loss(model: MaskedGCN | MaskedBackbone) -> torch.Tensor:
            params = dict(model.named_parameters())
            if o.regularizers == "code":  # the official code: on state_dict()'s detached copies
                params = {k: v.detach() for k, v in params.items()}
            total = o.l1 * sum(v.abs().sum() for k, v in params.items() if k.startswith("masks."))
            for name, ref in reference.items():
                total = total + o.loc_l2 * torch.linalg.vector_norm(params[name] - ref)
            return total

        return loss

    @torch.no_grad()
    def functional_embedding(self) -> torch.Tensor:
        """``[H]``: the mean of ``H_2`` over the proxy graph's nodes, in evaluation mode."""
        o, model = self.options, self.learner.model
        x, edge_index = proxy_graph(
            self.cfg.seed, self.data.num_features, o.proxy_graphs, o.proxy_nodes, o.proxy_p
        )
        was_training = model.training
        model.eval()
        try:
            return model.embed(x.to(self.device), edge_index.to(self.device)).mean(dim=0).cpu()
        finally:
            model.train(was_training)

    def probe_metrics(self) -> dict[str, float]:
        return {"fedpub.mask-pruned": self.learner.model.pruned_share()}

    def evaluate(self, content: RecordDict, server_round: int) -> RecordDict:
        """``fedpub.evaluate = "trained"``: the client's own trained, masked model (nothing
        is loaded). ``"received"``: the personalised weights received, with the client's
        masks; training next starts from the same weights, so nothing is lost."""
        if self.options.evaluate == "received":
            self.load_global(content)
        return self.evaluation_reply(server_round)

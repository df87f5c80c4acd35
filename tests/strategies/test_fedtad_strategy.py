"""FedTAD's server: the CKR weights, the per-class losses on hand-worked cases, and a
distillation that moves the global model towards the reliable client and not the others."""

import pytest
import torch

from fgl_flower.parse import parse_run_config
from fgl_flower.strategies.fedtad import FedTADStrategy, class_weights, divergence, semantic


def test_class_weights_normalise_each_class_over_the_clients():
    ckr = torch.tensor([[1.0, 0.0, 0.0], [3.0, 2.0, 0.0]])
    w = class_weights(ckr)
    torch.testing.assert_close(w, torch.tensor([[0.25, 0.0, 0.0], [0.75, 1.0, 0.0]]))


def test_divergence_and_semantic_written_out():
    labels = torch.tensor([0, 0, 1])
    g = torch.tensor([[1.0, 0.0], [0.0, 0.0], [2.0, 2.0]])
    l = torch.tensor([[0.0, 0.0], [0.0, 1.0], [2.0, 0.0]])
    w = torch.tensor([0.5, 2.0])
    # class 0: rows 0, 1 -> mean(|g - l|) per row 0.5, 0.5; class 1: row 2 -> 1.0
    assert float(divergence(g, l, w, labels)) == pytest.approx(0.5 * 0.5 + 2.0 * 1.0)
    ce0 = torch.nn.functional.cross_entropy(l[:2], labels[:2])
    ce1 = torch.nn.functional.cross_entropy(l[2:], labels[2:])
    assert float(semantic(l, w, labels)) == pytest.approx(float(0.5 * ce0 + 2.0 * ce1))


def test_distillation_pulls_the_global_model_towards_the_reliable_client(flat):
    flat.update({"method": "fedtad", "model": "mlp", "fedtad.glb-epochs": 4, "fedtad.lr-d": 0.05})
    s = FedTADStrategy(parse_run_config(flat))
    s._build((6, 2))
    torch.manual_seed(0)
    reliable, other = s._model().requires_grad_(False), s._model().requires_grad_(False)
    start = {k: v.clone() for k, v in s.global_model.state_dict().items()}

    def distance_to(model):
        x = torch.randn(200, 6, generator=torch.Generator().manual_seed(3))
        with torch.no_grad():
            return float(
                (
                    s.global_model(x, torch.empty(2, 0, dtype=torch.long))
                    - model(x, torch.empty(2, 0, dtype=torch.long))
                )
                .abs()
                .mean()
            )

    before = distance_to(reliable), distance_to(other)
    s.distill(1, torch.tensor([[1.0, 1.0], [0.0, 0.0]]), [reliable, other])
    after = distance_to(reliable), distance_to(other)
    assert any(not torch.equal(start[k], v) for k, v in s.global_model.state_dict().items())
    assert after[0] < before[0]  # towards the client with all the weight
    assert set(s.last) >= {"loss_g", "loss_d", "weights", "pseudo-acc", "ckr-spread"}
    assert len(s.last["loss_g"]) == 4 and len(s.last["loss_d"]) == 4 * 5


def test_always_dropout_is_seeded_and_changes_the_distillation(flat):
    def distilled(always: bool) -> dict:
        cfg = dict(
            flat, method="fedtad", model="mlp", dropout=0.5, **{"fedtad.always-dropout": always}
        )
        s = FedTADStrategy(parse_run_config(cfg))
        s._build((6, 2))
        torch.manual_seed(0)
        models = [s._model().requires_grad_(False) for _ in range(2)]
        s.distill(1, torch.tensor([[0.5, 0.5], [0.5, 0.5]]), models)
        return s.global_model.state_dict()

    on, again, off = distilled(True), distilled(True), distilled(False)
    assert all(torch.equal(on[k], again[k]) for k in on)
    assert any(not torch.equal(on[k], off[k]) for k in on)

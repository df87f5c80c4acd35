"""FED-PUB's masked GCN and its proxy graph."""

import torch

from fgl_flower.models.fedpub import MaskedGCN, proxy_graph


def _graph(n: int = 6, f: int = 5):
    edge_index = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])
    return torch.randn(n, f, generator=torch.Generator().manual_seed(0)), edge_index


def test_masks_scale_the_weights_and_evaluation_prunes_the_small_ones():
    torch.manual_seed(0)
    model = MaskedGCN(5, 8, 3, dropout=0.0, l1=0.1)
    x, ei = _graph()
    model.eval()
    before = model(x, ei)
    with torch.no_grad():  # masks below l1 are zeroed at evaluation: as if 0
        model.masks["clsif"].fill_(0.05)
    pruned = model(x, ei)
    assert torch.allclose(pruned, model.clsif.bias.expand_as(pruned))
    model.train()  # ... but used as they are in training
    scaled = model(x, ei)
    with torch.no_grad():
        model.masks["clsif"].fill_(1.0)
    assert torch.allclose(
        scaled - model.clsif.bias, 0.05 * (model(x, ei) - model.clsif.bias), atol=1e-6
    )
    assert not torch.allclose(before, pruned)
    assert model.pruned_share() == 0.0
    with torch.no_grad():
        model.masks["conv1"].zero_()
    assert model.pruned_share() == 8 * 5 / (8 * 5 + 8 * 8 + 3 * 8)


def test_the_masks_stay_local_and_the_weights_are_pyg_gcn_layers():
    model = MaskedGCN(5, 8, 3)
    names = set(model.state_dict())
    assert {"masks.conv1", "masks.conv2", "masks.clsif"} <= names
    shared = {n for n in names if n.startswith(("conv1.", "conv2.", "clsif."))}
    assert shared == {
        "conv1.lin.weight",
        "conv1.bias",
        "conv2.lin.weight",
        "conv2.bias",
        "clsif.weight",
        "clsif.bias",
    }
    from torch_geometric.nn import GCNConv

    ref = GCNConv(5, 8)
    ref.load_state_dict(model.conv1.state_dict())
    x, ei = _graph()
    assert torch.allclose(ref(x, ei), model.conv1(x, ei, torch.ones(8, 5)), atol=1e-6)


def test_the_proxy_graph_is_the_same_for_a_seed_and_has_no_edge_between_its_graphs():
    x, ei = proxy_graph(3, 7, graphs=4, nodes=20, p=0.2)
    x2, ei2 = proxy_graph.__wrapped__(3, 7, graphs=4, nodes=20, p=0.2)
    assert torch.equal(x, x2) and torch.equal(ei, ei2)
    assert x.shape == (80, 7) and ei.shape[0] == 2 and ei.shape[1] > 0
    assert torch.equal(ei[0] // 20, ei[1] // 20)  # edges stay inside a graph
    assert not torch.equal(proxy_graph.__wrapped__(4, 7, graphs=4, nodes=20, p=0.2)[0], x)


def test_masks_on_another_backbone_compute_with_the_masked_weights():
    """``MaskedBackbone`` on ACM-GCN: ones leave the backbone's output unchanged; a mask
    equals multiplying its weight by it (a reference backbone with ``W * M`` loaded); masks
    below ``l1`` are zeroed at evaluation; biases carry no mask; the backbone's weights are
    ``net.*`` and the masks stay apart."""
    from fgl_flower.models.acmgcn import ACMGCN
    from fgl_flower.models.fedpub import MaskedBackbone, mask_key

    torch.manual_seed(0)
    net = ACMGCN(5, 8, 3, num_layers=2, dropout=0.0)
    model = MaskedBackbone(net, l1=0.1).eval()
    x, ei = _graph()
    with torch.no_grad():
        assert torch.allclose(model(x, ei), net(x, ei))
        assert torch.allclose(model.embed(x, ei), net.embed(x, ei))
        masked = {n for n, p in net.named_parameters() if p.dim() >= 2}
        assert set(model.masks) == {mask_key(n) for n in masked}
        assert "classifier.bias" not in masked and "classifier.weight" in masked
        assert all(k.startswith(("net.", "masks.")) for k in model.state_dict())
        m = torch.rand_like(net.convs[0].weight_high) + 0.5
        model.masks[mask_key("convs.0.weight_high")].copy_(m)
        ref = ACMGCN(5, 8, 3, num_layers=2, dropout=0.0).eval()
        ref.load_state_dict(net.state_dict())
        ref.convs[0].weight_high.mul_(m)
        assert torch.allclose(model(x, ei), ref(x, ei), atol=1e-6)
        assert torch.allclose(model.embed(x, ei), ref.embed(x, ei), atol=1e-6)
        model.masks[mask_key("classifier.weight")].fill_(0.05)  # pruned at evaluation
        out = model(x, ei)
        assert torch.allclose(out, net.classifier.bias.expand_as(out))
        assert model.pruned_share() == net.classifier.weight.numel() / sum(
            p.numel() for p in model.masks.values()
        )
    model.train()  # gradients reach both the weights and the masks
    model(x, ei).sum().backward()
    assert net.convs[0].weight_low.grad is not None
    assert model.masks[mask_key("convs.0.weight_low")].grad is not None

"""FedStar's and FedDense's models: shapes, parameter counts (the paper's Table 3, spec
§3.1.3/§3.2/§3.3) and the variants."""

import pytest
import torch
from torch_geometric.data import Batch, Data

from fgl_flower.models.feddense import DDCGNN
from fgl_flower.models.fedstar import FedStarGIN
from fgl_flower.models.graph import GIN


def count(model, prefix=""):
    return sum(p.numel() for n, p in model.named_parameters() if n.startswith(prefix))


def kib(params):
    return 4 * params / 1024


@pytest.mark.parametrize("nf,c", [(7, 2), (492, 3), (2, 15)])
@pytest.mark.parametrize("r", [10, 16, 32, 64])
def test_feddense_parameter_counts(r, nf, c):
    for activation in ("pre", "post"):
        m = DDCGNN(nf, c, width=r, activation=activation)
        assert count(m, "struct.") == 2112 + 2 * r * r + 67 * r
        assert count(m) == 14592 + 11 * r * r + 841 * r + 64 * nf + 65 * c


def test_table3_payloads_and_model_sizes():
    """Payload = 4 B x shared parameters, in KiB; model sizes with the paper's averaged
    dataset term 64 n_f + 65 C = 3522 (spec §3.1.3, §9.3)."""

    def size(model, nf=1, c=1):
        return kib(count(model) - 64 * nf - 65 * c + 3522)

    gin, star = GIN(1, 64, 1, num_layers=3), FedStarGIN(1, 64, 1)
    d16, d32 = DDCGNN(1, 1, width=16), DDCGNN(1, 1, width=32)
    assert kib(count(gin, "convs.")) == 97.5  # the paper prints 97.70 (spec §12 item 14)
    assert kib(count(star, "struct.")) == 57.0
    assert kib(count(d16, "struct.")) == 14.4375  # paper: 14.44
    assert kib(count(d32, "struct.")) == 24.625  # paper: 24.63
    paper = [127.76, 265.01, 219.88, 134.32]
    assert [size(m) for m in (gin, star, d32, d16)] == pytest.approx(paper, abs=0.005)


def test_fedstar_parameter_counts():
    m = FedStarGIN(37, 64, 2)
    assert count(m, "struct.") == 14592
    assert count(m) == 64320 + 64 * 37 + 65 * 2


def test_d0_equal_to_r_is_the_fully_narrow_variant():
    m = DDCGNN(7, 2, width=10, d0=10)
    assert m.struct.init.out_features == 10 and m.feat.convs[0].nn[0].in_features == 20
    assert count(m, "struct.") == 32 * 10 + 10 + 3 * (10 * 10 + 10)


def _batch(nf: int = 5, sizes=(4, 6, 3)) -> Batch:
    graphs = []
    for i, n in enumerate(sizes):
        src = torch.arange(n)
        ei = torch.stack([torch.cat([src, (src + 1) % n]), torch.cat([(src + 1) % n, src])])
        graphs.append(
            Data(
                x=torch.randn(n, nf),
                edge_index=ei,
                stc_enc=torch.rand(n, 32),
                y=torch.tensor([i % 2]),
            )
        )
    return Batch.from_data_list(graphs)


@pytest.mark.parametrize(
    "make",
    [
        lambda: FedStarGIN(5, 16, 3),
        lambda: DDCGNN(5, 3, width=8, activation="pre"),
        lambda: DDCGNN(5, 3, width=8, activation="post"),
    ],
)
def test_forward_shapes_and_gradients_reach_both_channels(make):
    torch.manual_seed(0)
    model, b = make(), _batch()
    out = model(b.x, b.edge_index, b.batch, b.stc_enc)
    assert out.shape == (3, 3)
    out.sum().backward()
    for prefix in ("struct.", "feat.", "head."):
        assert any(
            p.grad is not None and p.grad.abs().sum() > 0
            for n, p in model.named_parameters()
            if n.startswith(prefix)
        ), prefix


def test_pre_and_post_activation_differ_only_in_the_forward():
    torch.manual_seed(0)
    pre = DDCGNN(5, 2, width=8, activation="pre").eval()
    post = DDCGNN(5, 2, width=8, activation="post").eval()
    post.load_state_dict(pre.state_dict())
    b = _batch()
    assert not torch.allclose(
        pre(b.x, b.edge_index, b.batch, b.stc_enc), post(b.x, b.edge_index, b.batch, b.stc_enc)
    )


def test_the_structural_channel_starts_equal_on_clients_of_different_datasets():
    torch.manual_seed(3)
    a = DDCGNN(7, 2, width=16)
    torch.manual_seed(3)
    b = DDCGNN(492, 3, width=16)
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa if k.startswith("struct."))
    with pytest.raises(ValueError, match="activation"):
        DDCGNN(7, 2, activation="both")


def test_post_is_the_default_everywhere():
    from fgl_flower.app_defaults import load_app_defaults
    from fgl_flower.methods.feddense import FedDenseOptions

    assert DDCGNN(5, 2).activation == "post"
    assert FedDenseOptions().activation == "post"
    assert load_app_defaults()["feddense.activation"] == "post"


def _layer_inputs(model, b):
    """The inputs of the first GIN layer and of the readout's projection, per forward."""
    seen = {}
    hooks = [
        model.feat.convs[0].register_forward_pre_hook(lambda m, a: seen.__setitem__("conv0", a[0])),
        model.head.proj.register_forward_pre_hook(lambda m, a: seen.__setitem__("readout", a[0])),
    ]
    model(b.x, b.edge_index, b.batch, b.stc_enc)
    for h in hooks:
        h.remove()
    return seen


@pytest.mark.parametrize("activation", ["post", "pre"])
def test_post_feeds_x0_and_the_structural_maps_raw(activation):
    """Under ``post`` (ReLU + Dropout once after each GIN layer, as FedStar) x^0, s^0 and the
    structural maps reach the first layer and the readout without ReLU or Dropout: with
    dropout 0.99 in train mode they equal the eval-mode values. ``pre`` drops them."""
    torch.manual_seed(0)
    d0, r, L = 12, 8, 3
    model, b = (
        DDCGNN(5, 2, width=r, d0=d0, num_layers=L, dropout=0.99, activation=activation),
        _batch(),
    )
    ref = _layer_inputs(model.eval(), b)
    got = _layer_inputs(model.train(), b)
    x0 = model.feat.init(b.x)
    raw = slice(0, 2 * d0)  # [x^0 || s^0] of layer 1
    structural = slice(d0 + L * r, None)  # s^(0..L) of the readout
    if activation == "post":
        assert torch.equal(ref["conv0"], torch.cat([x0, model.struct(b.stc_enc, _gcn(b))[0]], -1))
        assert torch.equal(got["conv0"], ref["conv0"])
        assert torch.equal(got["readout"][:, :d0], ref["readout"][:, :d0])
        assert torch.equal(got["readout"][:, structural], ref["readout"][:, structural])
        assert (x0 < 0).any() and (ref["readout"][:, structural] < 0).any()  # no ReLU either
        assert not torch.equal(
            got["readout"][:, d0 : d0 + L * r], ref["readout"][:, d0 : d0 + L * r]
        )
    else:
        assert not torch.equal(got["conv0"][:, raw], ref["conv0"][:, raw])
        assert (ref["conv0"] >= 0).all()


def _gcn(b):
    from fgl_flower.models.fedstar import adjacencies

    return adjacencies(b.edge_index, b.x.size(0))[1]


def test_post_layer_is_fedstars_layer():
    """One post layer is FedStar's: GIN over the raw [x || s], then ReLU, then Dropout."""
    from fgl_flower.models.fedstar import adjacencies

    torch.manual_seed(1)
    model, b = DDCGNN(5, 2, width=8, d0=8, num_layers=1, dropout=0.5).eval(), _batch()
    sum_adj, gcn_adj = adjacencies(b.edge_index, b.x.size(0))
    s = model.struct(b.stc_enc, gcn_adj)
    x0 = model.feat.init(b.x)
    x1 = torch.relu(model.feat.convs[0](torch.cat([x0, s[0]], -1), sum_adj))
    expected = model.head(torch.cat([x0, x1, *s], -1), b.batch)
    assert torch.allclose(model(b.x, b.edge_index, b.batch, b.stc_enc), expected)


@pytest.mark.parametrize("make", [lambda: FedStarGIN(5, 16, 3), lambda: DDCGNN(5, 3, width=8)])
def test_channel_probes_measure_the_eval_forward_and_flag_a_dead_head(make):
    from fgl_flower.methods.fedstar import PROBES
    from fgl_flower.models.fedstar import ChannelProbes, adjacencies

    torch.manual_seed(0)
    model, b = make(), _batch()
    dead = {p.name: p for p in PROBES}["head.dead"]
    with ChannelProbes(model) as probes:
        model.train()(b.x, b.edge_index, b.batch, b.stc_enc)  # train-mode forwards are skipped
        assert probes.values() == {}
        model.eval()(b.x, b.edge_index, b.batch, b.stc_enc)
    values = probes.values()
    with torch.no_grad():
        s = model.struct(b.stc_enc, adjacencies(b.edge_index, b.x.size(0))[1])[-1]
    assert values["struct.norm"] == pytest.approx(float(s.norm(dim=-1).mean()), rel=1e-5)
    assert (
        values["feat.norm"] > 0
        and 0 <= values["head.dead"] < 1
        and not dead.dead(values["head.dead"])
    )

    with torch.no_grad():  # every hidden unit of the head negative for every graph
        model.head.post.bias.fill_(-1e6)
    with ChannelProbes(model) as probes:
        logits = model(b.x, b.edge_index, b.batch, b.stc_enc)
    assert torch.equal(logits, logits[:1].expand_as(logits))  # constant logits
    assert probes.values()["head.dead"] == 1.0 and dead.dead(probes.values()["head.dead"])
    with torch.no_grad():
        model.head.post.bias.fill_(1e6)
    model(b.x, b.edge_index, b.batch, b.stc_enc)  # the hooks are gone after the context
    assert probes.values()["head.dead"] == 1.0

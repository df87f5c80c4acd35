import torch
from flwr.app import RecordDict

from fgl_flower.clients.state import ClientState


def test_module_and_adam_state_roundtrip():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(8, 4)).pow(2).sum().backward()
        opt.step()
    state = ClientState(RecordDict())
    state.save_module("m", model)
    state.save_optimizer("o", opt)

    model2 = torch.nn.Linear(4, 3)
    opt2 = torch.optim.Adam(model2.parameters(), lr=0.1)
    assert state.load_module("m", model2) and state.load_optimizer("o", opt2)
    for p, q in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p, q)
    # One more identical step on both gives identical weights only if Adam state matched.
    x = torch.randn(8, 4)
    for m, o in ((model, opt), (model2, opt2)):
        o.zero_grad()
        m(x).pow(2).sum().backward()
        o.step()
    for p, q in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p, q)


def test_missing_keys_report_false():
    state = ClientState(RecordDict())
    assert not state.load_module("nope", torch.nn.Linear(1, 1))
    assert state.get_json("nope") is None
    state.set_json("j", {"a": [1, 2]})
    assert state.get_json("j") == {"a": [1, 2]}

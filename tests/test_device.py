"""The ``device`` key: resolution, clear errors, CPU-side state and messages."""

import pytest
import torch
from methods_data import NEEDS

from fgl_flower.device import check_device_spec, manual_seed, resolve_device
from fgl_flower.errors import ConfigError
from fgl_flower.parse import parse_run_config


@pytest.mark.parametrize("spec", ["auto", "cpu", "cuda", "cuda:1", "CUDA:0"])
def test_valid_specs(spec):
    assert check_device_spec(spec) == spec.lower()


@pytest.mark.parametrize("spec", ["gpu", "cuda:x", "cuda:", "tpu", ""])
def test_bad_spec_is_a_config_error(spec, flat):
    with pytest.raises(ConfigError, match="use 'auto'"):
        parse_run_config(dict(flat, device=spec))


def test_auto_is_cpu_without_a_gpu():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
@pytest.mark.parametrize("spec", ["cuda", "cuda:0"])
def test_cuda_without_gpu_says_what_to_do(spec):
    with pytest.raises(ConfigError, match="sees no CUDA GPU.*device='auto' or 'cpu'"):
        resolve_device(spec)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_fgl_run_with_cuda_stops_before_training(flat, capsys, tmp_path):
    from fgl_flower.cli import main

    code = main(
        [
            "run",
            "--inprocess",
            "--device",
            "cuda",
            "--clients",
            "3",
            "--rounds",
            "1",
            "--set",
            "data.synthetic.num-nodes=300",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2
    assert "sees no CUDA GPU" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["error.txt"]  # nothing ran


def test_manual_seed_matches_torch_manual_seed_on_cpu():
    manual_seed(123, torch.device("cpu"))
    a = torch.rand(5)
    torch.manual_seed(123)
    assert torch.equal(a, torch.rand(5))


def test_client_state_and_replies_hold_cpu_tensors(flat):
    """Whatever the device, what is stored and sent lives on the CPU."""
    from fgl_flower.inprocess import InProcessGrid
    from fgl_flower.server_app import run

    flat.update({"method": "fedavg", "num-rounds": 1, "device": "auto"})
    cfg = parse_run_config(flat)
    grid = InProcessGrid(flat, cfg.num_clients)
    run(grid, cfg)
    state = grid.context(0).state
    for record in state.array_records.values():
        for t in record.to_torch_state_dict().values():
            assert t.device.type == "cpu"


@pytest.mark.gpu
@pytest.mark.parametrize(
    "method,extra",
    [
        ("fedavg", {}),
        ("fedprox", {}),
        ("local", {}),
        ("fedspray", {}),
        ("s2fgl", NEEDS["s2fgl"]),
        ("opfgl", NEEDS["opfgl"]),
    ],
)
def test_every_method_runs_on_cuda_close_to_cpu(flat, method, extra, tmp_path):
    from fgl_flower.inprocess import run_inprocess

    flat.update({"method": method, **extra})
    cpu = run_inprocess(dict(flat, device="cpu", **{"out-dir": str(tmp_path / "cpu")}))
    gpu = run_inprocess(dict(flat, device="cuda", **{"out-dir": str(tmp_path / "gpu")}))
    assert gpu["rounds_completed"] == cpu["rounds_completed"]
    assert abs(gpu["final"]["val_acc"] - cpu["final"]["val_acc"]) <= 0.1

"""Where a client's (or the server's) tensors live: the ``device`` run-config key.

``auto`` (default) is CUDA when the process sees a GPU, else the CPU; ``cpu``, ``cuda`` and
``cuda:N`` are explicit. Every process resolves the key for itself (a Ray actor with a
GPU share, a SuperNode on a GPU machine, a CPU-only SuperNode), while ``context.state``
and messages always hold CPU arrays, so one run can mix CPU and GPU nodes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from fgl_flower.errors import ConfigError

if TYPE_CHECKING:
    import torch

_SPEC = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def check_device_spec(spec: str) -> str:
    """Validate the syntax of a ``device`` value (torch-free); returns it lower-cased."""
    value = str(spec).strip().lower()
    if not _SPEC.match(value):
        raise ConfigError(
            f"device={spec!r}: use 'auto' (GPU if visible), 'cpu', 'cuda' or 'cuda:N'."
        )
    return value


def resolve_device(spec: str) -> torch.device:
    """The ``torch.device`` for ``spec`` in this process.

    Raises:
        ConfigError: CUDA was asked for but this process sees no (such) GPU.
    """
    import torch

    value = check_device_spec(spec)
    if value == "cpu" or (value == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        build = (
            "a CPU-only build"
            if torch.version.cuda is None
            else f"built for CUDA {torch.version.cuda}"
        )
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        raise ConfigError(
            f"device={spec!r} but this process sees no CUDA GPU (torch {torch.__version__}, {build}"
            f"{hint}). Use device='auto' or 'cpu', or install a CUDA build of torch (README, "
            "'GPUs'); in simulation give clients a GPU share with --gpus-per-client."
        )
    index = int(value.split(":")[1]) if ":" in value else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise ConfigError(
            f"device={spec!r} but this process sees {torch.cuda.device_count()} GPU(s) "
            f"(cuda:0..cuda:{torch.cuda.device_count() - 1})."
        )
    return torch.device("cuda", index)


@contextmanager
def cpu_seeded(seed: int) -> Iterator[None]:
    """Draw from the CPU generator seeded with ``seed``, then restore the caller's state.

    For what every client or the server must build identically on any device (initial
    models, O-pFGL's initial pseudo-graph): it is drawn on the CPU and moved afterwards.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        yield


def manual_seed(seed: int, device: torch.device) -> None:
    """Seed the generators ``device`` draws from: the CPU's, and the GPU's on CUDA.

    Same numbers as ``torch.manual_seed`` for what runs on ``device``, at a hundredth of
    its cost on a CPU-only process (it queues a lazy CUDA call with a stack trace).
    """
    import torch

    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(seed)

"""Launch Flower apps as a local simulation or a local deployment, and clean up after.

Both entry points run ``flwr run <app> <connection> --stream`` in an isolated
``FLWR_HOME`` with free loopback ports, stream its output, return a return code that
is non-zero when the run failed, and stop every process they started.
"""

from fgl_flower.runtime.deployment import run_deployment
from fgl_flower.runtime.errors import ExecutableNotFoundError, LaunchError, RunTimeoutError
from fgl_flower.runtime.flwr_cli import RUN_FAILED
from fgl_flower.runtime.simulation import run_simulation

__all__ = [
    "RUN_FAILED",
    "ExecutableNotFoundError",
    "LaunchError",
    "RunTimeoutError",
    "run_deployment",
    "run_simulation",
]

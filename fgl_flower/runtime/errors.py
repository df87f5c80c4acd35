"""Errors raised while launching Flower runs."""

from fgl_flower.errors import FGLError


class LaunchError(FGLError, RuntimeError):
    """A Flower process could not be started or did not become ready."""


class ExecutableNotFoundError(LaunchError, FileNotFoundError):
    """A Flower executable (``flwr``, ``flower-superlink``, ...) is not installed."""


class RunTimeoutError(LaunchError, TimeoutError):
    """A Flower run did not finish within the given timeout."""


class RuntimeStartError(LaunchError):
    """A part of the simulation runtime did not come up within a fixed time that Flower or
    Ray sets; no client had trained, so starting the run again loses nothing."""


class SuperLinkStartError(RuntimeStartError):
    """``flwr run`` gave up starting its local SuperLink (Flower waits a fixed 15 s); the run
    never started."""


class RayStartError(RuntimeStartError):
    """Ray's local node did not register within Ray's fixed 30 s (``ray.init`` inside the
    simulation runtime, before any message reached a client)."""

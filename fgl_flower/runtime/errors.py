"""Errors raised while launching Flower runs."""

from fgl_flower.errors import FGLError


class LaunchError(FGLError, RuntimeError):
    """A Flower process could not be started or did not become ready."""


class ExecutableNotFoundError(LaunchError, FileNotFoundError):
    """A Flower executable (``flwr``, ``flower-superlink``, ...) is not installed."""


class RunTimeoutError(LaunchError, TimeoutError):
    """A Flower run did not finish within the given timeout."""


class SuperLinkStartError(LaunchError):
    """``flwr run`` gave up starting its local SuperLink (Flower waits a fixed 15 s); the run
    never started, so starting again loses nothing."""

"""Client-side halves of the methods (one module per method)."""

from fgl_flower.clients.base import FGLClient, LearnerClient
from fgl_flower.clients.state import ClientState

__all__ = ["ClientState", "FGLClient", "LearnerClient"]

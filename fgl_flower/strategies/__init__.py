"""Server-side halves of the methods (one module per method)."""

from fgl_flower.strategies.base import FGLStrategy

__all__ = ["FGLStrategy"]

"""Local training: no aggregation; the server only schedules rounds and collects metrics."""

from __future__ import annotations

from fgl_flower.strategies.base import FGLStrategy


class LocalStrategy(FGLStrategy):
    """Sends empty arrays every round; clients keep and train their own models.

    :meth:`FGLStrategy.aggregate_train` already returns no new arrays, so this class only
    names the behaviour.
    """

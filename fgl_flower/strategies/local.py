"""Local training: no aggregation; the server only schedules rounds and collects metrics."""

from __future__ import annotations

from fgl_flower.strategies.base import FGLStrategy


class LocalStrategy(FGLStrategy):
    """Sends empty arrays every round; clients keep and train their own models.

    :meth:`FGLStrategy.aggregate_train` already returns no new arrays; the clients'
    models change only in training, so they report their evaluation with it.
    """

    evaluates_in_train = True

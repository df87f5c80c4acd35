"""One message exchange of a strategy with its clients, metered and screened.

:func:`exchange` sends a batch through a :class:`~fgl_flower.strategies.grid.MeteredGrid`,
times it and reads its traffic, passes the replies through an optional ``received`` step
(the round loop's :meth:`~fgl_flower.strategies.base.FGLStrategy.drop_nonfinite`), refuses
those its ``screen`` rejects (:meth:`MeteredGrid.refuse
<fgl_flower.strategies.grid.MeteredGrid.refuse>`) and reports every failed client. What
the caller does with the cost and the failures is its own: the round loop adds them into the
round's record, O-pFGL keeps them per phase.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from flwr.app import Message

from fgl_flower.strategies.grid import ClientFailure, MeteredGrid, who

#: The traffic counters of an exchange, as :class:`MeteredGrid` and the round records name them.
TRAFFIC = ("bytes_up", "bytes_down", "messages_up", "messages_down")


@dataclass(frozen=True)
class Exchanged:
    """What one exchange brought back."""

    #: the replies kept, sorted by partition id
    replies: list[Message]
    #: seconds from sending to the last reply (the checks of the replies not included)
    time_s: float
    #: :data:`TRAFFIC`: ``{"bytes_up": ..., ...}``, refused replies included (received)
    traffic: dict[str, int]
    #: ``{partition id: why}`` of the clients that failed or whose reply was refused
    failures: dict[int, str]


def exchange(
    metered: MeteredGrid,
    messages: Iterable[Message],
    screen: Callable[[list[Message], list[Message]], dict[int, str]],
    *,
    timeout: float,
    prefix: str,
    received: Callable[[list[Message]], list[Message]] | None = None,
) -> Exchanged:
    """Send ``messages`` and receive the replies (within ``timeout`` seconds), then
    ``received(replies)`` if given, then refuse those ``screen(messages, replies)``
    (``{partition id: why}``) names. A :class:`ClientFailure` (more failed clients than
    accepted, none left) is raised again with ``prefix`` before its message (e.g.
    ``"Round 3: "``)."""
    t0 = time.perf_counter()
    metered.reset()
    messages = list(messages)
    try:
        replies = metered.send_and_receive(messages, timeout=timeout)
        time_s = time.perf_counter() - t0
        traffic = {key: getattr(metered, key) for key in TRAFFIC}
        if received is not None:
            replies = received(replies)
        replies = metered.refuse(replies, screen(messages, replies))
    except ClientFailure as e:
        raise ClientFailure(f"{prefix}{e}") from None
    return Exchanged(replies, time_s, traffic, dict(metered.failures))


def failure_list(failures: dict[int, str]) -> str:
    """``"partition 1: why; partition 2: why"`` (:func:`~fgl_flower.strategies.grid.who`)."""
    return "; ".join(f"{who(p)}: {why}" for p, why in failures.items())

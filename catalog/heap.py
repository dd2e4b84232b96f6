"""Giving the C heap's free pages back to the system after a one-off burst of allocation.

glibc keeps the pages it frees mapped, so a long-lived process that once built something
large through temporaries (a model session, a table of every card) would hold them for
the rest of its life. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes

__all__ = ["return_freed_memory"]


def return_freed_memory() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``)."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)

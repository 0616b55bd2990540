"""Give freed heap memory back to the operating system between the phases of a large build.

glibc's allocator keeps memory freed by a process for reuse: arrays up to its (adaptive, up to
32 MB) mmap threshold come from the heap, and after a build phase frees them the pages stay
resident. Building the store's name index for a 1M-concept UMLS-shaped store left about 0.3 GB
so held; the entity linker's trie arrays allocated next are larger than the threshold and never
reuse it, so it added to the linker's peak RSS. ``malloc_trim(0)`` returns such pages;
elsewhere (another C library, another system) this is a no-op. Results never depend on it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

__all__ = ["release_free_heap"]

logger = logging.getLogger(__name__)
_TRIM = None


def release_free_heap() -> bool:
    """Ask glibc to return freed heap pages to the system; False where there is no ``malloc_trim``."""
    global _TRIM
    if _TRIM is None:
        _TRIM = False
        if sys.platform.startswith("linux"):
            try:
                _TRIM = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
                _TRIM.argtypes = [ctypes.c_size_t]
            except (OSError, AttributeError):  # musl and other C libraries have none
                _TRIM = False
    if _TRIM is False:
        return False
    _TRIM(0)
    return True

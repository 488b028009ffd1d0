"""Pausing Python's cycle collector while a large job's report is read and built.

Reading 100,000 trials makes millions of tuples and numbers that live until the report is
built, and none of them is part of a cycle. The collector still walks them again and again
as they pile up (each of its generations fills anew every few hundred allocations): about
a fifth of a cold 100k-trial report went to it. Reference counting frees everything as
usual meanwhile; only the search for cycles waits until the last pause ends.

The collector is the process's, shared by every thread: pauses nest and overlap (a count),
and the collector is enabled again only if a pause disabled it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0
_disabled_here = False


@contextmanager
def collector_paused() -> Iterator[None]:
    global _pauses, _disabled_here
    with _lock:
        if _pauses == 0 and gc.isenabled():
            gc.disable()
            _disabled_here = True
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _disabled_here:
                _disabled_here = False
                gc.enable()

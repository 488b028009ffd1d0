"""Job pages already rendered, kept by what they are a function of.

A job's page is a function of the job's row, its counts and report, its grid's trials and
the caller's name. The row changes only with the job's status, and the rest only with its
change marker (`service.store.counts`), and its agreement section with its reviews and
review samples (`reviews_marker`), so a page kept under (job, status, marker, reviews, name)
is the page that would be rendered again: a 100,000-trial job's page is then one read of
the marker, not a grid of a thousand cells rendered anew on every reload. The page is kept
as the finished text; nothing in it is marked safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

PageKey = tuple[str, str, int, tuple[int, int, int], str]

# A large job's page is a few hundred KB.
KEPT = 16


class KeptPages:
    def __init__(self, size: int = KEPT) -> None:
        self._pages: OrderedDict[PageKey, str] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: PageKey) -> str | None:
        with self._lock:
            page = self._pages.get(key)
            if page is not None:
                self._pages.move_to_end(key)
            return page

    def put(self, key: PageKey, page: str) -> None:
        with self._lock:
            self._pages[key] = page
            self._pages.move_to_end(key)
            while len(self._pages) > self._size:
                self._pages.popitem(last=False)


JOB_PAGES = KeptPages()

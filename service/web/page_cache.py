"""Job pages already rendered, kept by what they are a function of.

A job's page is a function of the job's row, its counts and report, its grid's trials and
the caller's name. The row changes only with the job's status, and the rest only with its
change marker (`service.store.counts`), and its agreement section with its reviews and
review samples (`reviews_marker`), so a page kept under (job, status, marker, reviews, name)
is the page that would be rendered again: a 100,000-trial job's page is then one read of
the marker, not a grid of a thousand cells rendered anew on every reload. A building job's
page is not kept: its builds' progress changes every second (service/web/routes.py). The
page is kept as the finished text; nothing in it is marked safe.
"""

from __future__ import annotations

from service.lru import LRU

PageKey = tuple[str, str, int, tuple[int, int, int], str]

# A large job's page is a few hundred KB.
JOB_PAGES: LRU[PageKey, str] = LRU(16)

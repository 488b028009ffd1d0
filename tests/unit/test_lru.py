"""service/lru.py: the one bounded cache the control plane keeps reports, pages and parsed
suites in."""

from __future__ import annotations

import threading

import pytest

from service.lru import LRU


def test_the_least_recently_used_entry_goes_first_and_a_read_counts_as_use() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the newer of the two
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    cache.put("a", 10)  # a new value for a kept key replaces it, and keeps the count
    assert len(cache) == 2 and cache.get("a") == 10
    cache.clear()
    assert len(cache) == 0 and cache.get("c") is None


def test_threads_sharing_it_never_grow_it_past_its_size() -> None:
    cache: LRU[int, int] = LRU(8)

    def fill(base: int) -> None:
        for n in range(2000):
            cache.put(base + n % 50, n)
            cache.get(base + (n * 7) % 50)

    threads = [threading.Thread(target=fill, args=(1000 * t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 8


def test_a_cache_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one entry"):
        LRU(0)

"""The verifier's tests, run by the pytest tests/test.sh installs."""

import collections
import pathlib
import re

TOP = pathlib.Path("/app/top_words.txt")


def expected() -> list[str]:
    words = re.findall(r"[a-z]+", pathlib.Path("/app/book.txt").read_text().lower())
    counts = sorted(collections.Counter(words).items(), key=lambda item: (-item[1], item[0]))
    return [f"{word} {count}" for word, count in counts[:5]]


def test_the_report_exists() -> None:
    assert TOP.is_file(), "/app/top_words.txt was not written"


def test_the_five_most_frequent_words() -> None:
    assert TOP.read_text().split("\n")[:5] == expected()


def test_nothing_else() -> None:
    assert TOP.read_text().strip().split("\n") == expected()


def test_the_book_is_unchanged() -> None:
    assert pathlib.Path("/app/book.txt").read_text().startswith("The lighthouse keeper")

"""The verifier's tests: the project's own, and cases the agent was not shown."""

import pathlib

from textkit import slugify


def test_plain_words() -> None:
    assert slugify("Hello World") == "hello-world"


def test_punctuation_runs_become_one_hyphen() -> None:
    assert slugify("Tips & Tricks: Part 2!") == "tips-tricks-part-2"


def test_accents_are_dropped() -> None:
    assert slugify("Café déjà vu") == "cafe-deja-vu"


def test_long_titles_are_cut_at_a_word() -> None:
    title = "a very long title that keeps going on and on"
    assert slugify(title, max_length=20) == "a-very-long-title"


def test_no_hyphen_at_the_ends() -> None:
    assert slugify("  -- Release notes --  ") == "release-notes"


def test_a_single_long_word_is_cut_at_the_limit() -> None:
    assert slugify("Supercalifragilistic", max_length=5) == "super"


def test_the_project_tests_are_unchanged() -> None:
    shipped = pathlib.Path(__file__).with_name("test_slug.py").read_text()
    assert pathlib.Path("/app/tests/test_slug.py").read_text() == shipped

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

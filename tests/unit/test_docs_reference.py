"""The generated reference pages (docs/reference/) are what service/cli/docs_reference.py writes
from the code today, and say what each generated page must: every path of the API, every
command of the CLI, every setting. A failure prints the command that brings them up to date.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cli import docs_reference
from service.cli.docs_reference import COMMAND, REFERENCE, ROOT, pages, text
from service.cli.main import build_parser
from service.settings import Settings, env_name
from service.web.api_docs import schema_anchor


@pytest.fixture(scope="module")
def generated() -> dict[Path, str]:
    # Made once: making the app and its schema takes a second or two.
    return pages()


def test_the_committed_pages_are_what_the_generator_writes(generated: dict[Path, str]) -> None:
    changed = [
        str(path)
        for path, page in generated.items()
        if not (ROOT / path).exists() or (ROOT / path).read_text() != page
    ]
    assert changed == [], f"{', '.join(changed)} differ from the code; run `{COMMAND}`"


def test_the_output_depends_on_the_code_alone(
    generated: dict[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made again, the same; and an EXAMHALL_* variable that a parser's default reads
    (EXAMHALL_SERVER, service/cli/remote.py) changes nothing."""
    monkeypatch.setenv("EXAMHALL_SERVER", "http://elsewhere.example:1")
    assert pages() == generated


def test_every_path_and_method_of_the_api_is_on_its_page(generated: dict[Path, str]) -> None:
    page = generated[REFERENCE / "http-api.md"]
    schema = docs_reference.openapi_schema()
    for path, item in schema["paths"].items():
        for method in item:
            assert f"`{method.upper()} {path}`" in page
    for name in schema["components"]["schemas"]:
        assert f"{{#{schema_anchor(name)}}}" in page


def test_every_command_is_on_the_cli_page(generated: dict[Path, str]) -> None:
    page = generated[REFERENCE / "cli.md"]
    commands = [words for words, _, _ in docs_reference.commands(build_parser(), ("examhall",), "")]
    assert len(commands) > 10
    for words in commands[1:]:
        assert f"## {' '.join(words)} " in page


def test_every_setting_is_on_its_page(generated: dict[Path, str]) -> None:
    page = generated[REFERENCE / "settings.md"]
    for name in Settings.model_fields:
        assert f"| `{env_name(name)}` |" in page


def test_text_escapes_markup_outside_code_spans() -> None:
    assert text("a <b> & c|d *e* [f]") == r"a &lt;b&gt; &amp; c\|d \*e\* \[f\]"
    assert text("keep `sha256:<hex>` and `a|b`") == "keep `sha256:<hex>` and `a|b`"
    assert text("a lone ` stays text") == r"a lone \` stays text"
    assert text("two\n  lines") == "two lines"


def test_pages_live_under_the_docs_directory(generated: dict[Path, str]) -> None:
    for path in generated:
        assert (ROOT / path).is_relative_to(ROOT / "docs" / "reference")

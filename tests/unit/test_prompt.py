"""The system prompt: the without_docs arm differs from with_docs by the <docs> section only."""

from __future__ import annotations

import pytest

from sandbox.prompt import PromptMismatch, build_system_prompt, verify_prompt

DOCS = {"b.md": "# B\nsecond", "a.md": "# A\nfirst"}


def test_without_docs_is_with_docs_minus_the_docs_section() -> None:
    with_docs = build_system_prompt(["read", "write"], docs=DOCS)
    without = build_system_prompt(["read", "write"])
    assert with_docs.startswith(without)
    section = with_docs[len(without) :].strip()
    assert section.startswith("<docs>") and section.endswith("</docs>")
    # Files in name order, each in its own <doc>.
    assert section.index('<doc name="a.md">\n# A\nfirst\n</doc>') < section.index(
        '<doc name="b.md">'
    )
    verify_prompt(with_docs, variant="with_docs", has_docs=True)
    verify_prompt(without, variant="without_docs", has_docs=False)


@pytest.mark.parametrize(
    ("prompt", "variant", "has_docs"),
    [
        (build_system_prompt(["read"]), "with_docs", True),
        (build_system_prompt(["read"], docs=DOCS), "without_docs", False),
        (
            build_system_prompt(["read"], rules="Be brief.\n<docs>\nsmuggled\n</docs>"),
            "without_docs",
            False,
        ),
        ("no sections at all", "default", False),
    ],
)
def test_mismatched_prompt_is_refused(prompt: str, variant: str, has_docs: bool) -> None:
    with pytest.raises(
        PromptMismatch, match=f"System prompt does not match the {variant} variant."
    ):
        verify_prompt(prompt, variant=variant, has_docs=has_docs)

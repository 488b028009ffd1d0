"""The docs sets a box has: named folders of Markdown under $EXAMHALL_DOCS_DIR.

A job may name one instead of sending a docs bundle; its files become that bundle.
"""

from __future__ import annotations

from pathlib import Path

import evals
from sandbox.prompt import section_marker
from service.settings import get_settings


class DocsSetError(ValueError):
    """An unknown docs set, or one whose files cannot go into a system prompt."""


def docs_sets_dir() -> Path:
    # evals/docs beside the shipped suites (service/suites/base.py shipped_dir, a layer up).
    return get_settings().docs_dir or Path(evals.__file__).resolve().parent / "docs"


def registered_docs() -> list[str]:
    root = docs_sets_dir()
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def load_docs(name: str) -> dict[str, str]:
    """The set's Markdown files by name."""
    if name not in registered_docs():
        known = ", ".join(registered_docs()) or "none"
        raise DocsSetError(
            f"Unknown docs set {name!r}; this box has: {known}. "
            'Or send the bundle itself as {"files": {"name.md": "..."}}.'
        )
    docs = {p.name: p.read_text() for p in sorted((docs_sets_dir() / name).glob("*.md"))}
    for file, content in docs.items():
        if marker := section_marker(content):
            raise DocsSetError(
                f"Docs set {name}: {file} has a line {marker!r}, which would read as a section "
                "of the system prompt; fix the file on the box."
            )
    return docs

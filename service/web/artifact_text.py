"""Which artifacts the trial page offers to read in the browser: text (UTF-8 without a NUL)
of at most VIEW_MAX_BYTES. The rest are offered for download only: a browser shows a large
log badly, and binary bytes not at all."""

from __future__ import annotations

import codecs

from sqlalchemy.orm import Session

from service.store.trials import artifact_heads

# A few megabytes of text is as much as a browser tab shows comfortably; the agents' output
# artifacts are capped at 4 MiB (sandbox/task_case.py), session.jsonl at the event cap.
VIEW_MAX_BYTES = 2 * 1024 * 1024
# What the trial page reads of each artifact to tell text from binary.
HEAD_BYTES = 4096


def is_text(data: bytes, *, complete: bool) -> bool:
    """Whether `data` is UTF-8 without a NUL; when it is only the start of the artifact
    (`complete` False), a character cut at its end still counts as text."""
    if b"\x00" in data:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError:
        return False
    return True


def not_viewable(size: int, head: bytes) -> str | None:
    """Why an artifact of `size` bytes starting with `head` is offered for download only,
    or None when it is also offered for reading."""
    if size > VIEW_MAX_BYTES:
        return "too large to view"
    if not is_text(head, complete=len(head) >= size):
        return "binary"
    return None


def view_problem(content: bytes, download_url: str) -> str | None:
    """Why a whole artifact is not shown as text, with where to get it instead; None when
    it is shown."""
    why = not_viewable(len(content), content)
    if why is None:
        return None
    if len(content) > VIEW_MAX_BYTES:
        why = f"{len(content):,} bytes, more than the {VIEW_MAX_BYTES:,} shown in the browser"
    else:
        why = "not UTF-8 text"
    return f"This artifact is {why}; download it from {download_url}"


def artifact_facts(session: Session, trial_id: str) -> dict[str, tuple[int, str | None]]:
    """Each of the trial's artifacts by name: its size, and why it is download-only (None:
    it can be read in the browser too)."""
    heads = artifact_heads(session, trial_id, HEAD_BYTES)
    return {name: (size, not_viewable(size, head)) for name, size, head in heads}

"""Artifact names: one rule for what is stored, listed and served."""

from __future__ import annotations

import base64
import hashlib

import pytest

from sandbox.protocol import ArtifactMessage
from service.artifact_names import artifact_name_problem, content_disposition
from service.launch.trial import _Collector

BAD = ["", "a/b", "../x", "..", "x\\y", "nul\x00", "bell\x07", "line\u2028", "x" * 201]


def _message(name: str, content: bytes = b"data") -> ArtifactMessage:
    return ArtifactMessage(
        name=name,
        content_b64=base64.b64encode(content).decode(),
        sha256=hashlib.sha256(content).hexdigest(),
        size=len(content),
    )


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_never_kept(name: str) -> None:
    assert artifact_name_problem(name) is not None
    collector = _Collector(None)
    collector(_message(name))
    assert collector.artifacts == {}
    assert collector.problems and "not kept" in collector.problems[0]


def test_plain_names_are_kept_and_served_as_attachments() -> None:
    collector = _Collector(None)
    for name in ("session.jsonl", "report ü.txt"):
        collector(_message(name))
    assert set(collector.artifacts) == {"session.jsonl", "report ü.txt"}
    assert content_disposition("report ü.txt") == (
        "attachment; filename=\"report _.txt\"; filename*=UTF-8''report%20%C3%BC.txt"
    )

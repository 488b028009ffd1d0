"""The session artifact the root supervisor builds (sandbox/supervisor.py): UTF-8 as the
events are, total for whatever the worker's child sent, and bounded so that its channel line
always fits (issue 27: an ASCII-escaped session of emoji passed the line limit)."""

from __future__ import annotations

import base64
import json
import os
import threading

from sandbox.channel import Channel
from sandbox.protocol import MAX_ARTIFACT_BYTES, MAX_LINE_BYTES
from sandbox.supervisor import SESSION_NOTE_BYTES, session_jsonl

SMILE = "\U0001f600"


def test_the_session_is_utf8_as_the_events_are() -> None:
    event = {"type": "tool_result", "name": "read", "content": SMILE * 1000}
    session = session_jsonl([event], cap=1 << 20)
    # 4 bytes a character, not the 12 of json's \ud83d\ude00 escapes.
    assert 4000 < len(session) < 4100
    assert json.loads(session) == event


def test_any_event_the_child_sent_is_written() -> None:
    # As json.loads gives them from a child's line: a lone surrogate from a \ud800 escape,
    # and nesting deeper than json.dumps recurses.
    lone = json.loads('{"type":"message","content":"half \\ud800"}')
    deep: object = "bottom"
    for _ in range(100_000):
        deep = [deep]
    session = session_jsonl([lone, {"type": "lifecycle", "detail": deep}], cap=1 << 20)
    first, second = session.splitlines()
    assert json.loads(first) == lone  # the same JSON escape, read back the same
    assert json.loads(second)["type"] == "lifecycle" and b'"[nested too deeply]"' in second


def test_past_its_cap_the_session_keeps_whole_lines_and_says_so() -> None:
    events = [{"type": "tool_result", "content": SMILE * 5000, "n": n} for n in range(100)]
    cap = 10 * 20_100 + SESSION_NOTE_BYTES
    session = session_jsonl(events, cap)
    assert len(session) <= cap
    assert session == session_jsonl(events, cap)  # the same events, the same bytes
    *kept, note = [json.loads(line) for line in session.splitlines()]
    assert kept == events[: len(kept)] and 0 < len(kept) < 100
    assert note["type"] == "lifecycle" and note["step"] == "session_cut"
    assert f"first {len(kept)} of 100 events" in note["detail"]


def test_an_artifact_larger_than_a_line_carries_is_cut_to_fit() -> None:
    read_fd, write_fd = os.pipe()
    received: list[bytes] = []
    with os.fdopen(read_fd, "rb") as reader:
        thread = threading.Thread(target=lambda: received.append(reader.readline()))
        thread.start()
        Channel(write_fd, None).artifact("big.bin", b"x" * (MAX_ARTIFACT_BYTES + 10))
        os.close(write_fd)
        thread.join()
    line = received[0]
    assert len(line) <= MAX_LINE_BYTES
    message = json.loads(line)
    content = base64.b64decode(message["content_b64"])
    assert len(content) == message["size"] <= MAX_ARTIFACT_BYTES
    assert content.endswith(b"more than one message carries]\n")

"""The worker's end of the JSON-lines channel.

The channel owns the process's real stdout; fd 1 is pointed at stderr so a stray print
from case code or a library cannot corrupt the protocol stream.
"""

from __future__ import annotations

import base64
import os
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

from sandbox import digests
from sandbox.protocol import (
    MAX_ARTIFACT_BYTES,
    MAX_LINE_BYTES,
    ArtifactMessage,
    Event,
    EventMessage,
    ListCasesRequest,
    RunRequest,
    decode_request,
    encode,
)


class Channel:
    def __init__(self, out_fd: int, reader: BinaryIO | None) -> None:
        self._out = out_fd
        self._reader = reader
        self._seq = 0
        # The supervisor writes from several threads (its relay, the egress fronts): a line
        # is written whole before another starts.
        self._lock = threading.RLock()

    @classmethod
    def take_stdio(cls) -> Channel:
        sys.stdout.flush()
        out_fd = os.dup(1)  # non-inheritable: no tool subprocess gets it
        os.dup2(2, 1)
        return cls(out_fd, sys.stdin.buffer)

    def send(self, message: object) -> None:
        self.send_line(encode(message))

    def send_line(self, line: bytes) -> None:
        data = memoryview(line)
        with self._lock:
            while data:
                written = os.write(self._out, data)
                data = data[written:]

    def event(self, event: Event, admit: Callable[[int], None] | None = None) -> None:
        """Send one event; `admit` sees its size first and may refuse it by raising."""
        with self._lock:
            line = encode(EventMessage(seq=self._seq + 1, event=event))
            if admit is not None:
                admit(len(line))
            self._seq += 1
            self.send_line(line)

    def artifact(self, name: str, content: bytes) -> None:
        """Send one artifact. Content past MAX_ARTIFACT_BYTES is cut, with a note of what was
        cut, rather than sent as a line the control plane must refuse; callers that need a
        cut on their own boundaries (the session's lines) make it first."""
        if len(content) > MAX_ARTIFACT_BYTES:
            note = f"\n[artifact cut: {len(content)} bytes, more than one message carries]\n"
            content = content[: MAX_ARTIFACT_BYTES - len(note)] + note.encode()
        self.send(
            ArtifactMessage(
                name=name,
                content_b64=base64.b64encode(content).decode(),
                sha256=digests.sha256(content).hexdigest(),
                size=len(content),
            )
        )

    @property
    def reader(self) -> BinaryIO | None:
        return self._reader

    def receive_line(self) -> bytes:
        """The next line from the control plane (b"" when the channel closed)."""
        if self._reader is None:
            return b""
        return self._reader.readline(MAX_LINE_BYTES)

    def read_request(self) -> RunRequest | ListCasesRequest:
        if self._reader is None:
            raise EOFError("This channel has no reader.")
        line = self._reader.readline(MAX_LINE_BYTES)
        if not line:
            raise EOFError("The channel closed before a run request arrived.")
        return decode_request(line)

    def detach(self) -> None:
        """In a forked child: give up the control plane's stdin and stdout for good."""
        os.close(self._out)
        os.close(0)
        self._reader = None

    def close(self) -> None:
        os.close(self._out)

"""The worker's channel over a container's attach socket.

Docker multiplexes the attached stdout and stderr into one stream of framed chunks; the
channel hands stdout on as bytes and keeps the last of stderr for error messages.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from typing import Any

STDERR_TAIL_BYTES = 64 * 1024
_HEADER = struct.Struct(">BxxxL")


class AttachChannel:
    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._raw: socket.socket = sock._sock
        # The client's read timeout would end the channel after a quiet minute (a long tool
        # call); the conversation's deadline bounds every read instead.
        self._raw.settimeout(None)
        self._buffer = b""
        self._stderr = bytearray()

    def send(self, data: bytes) -> None:
        self._raw.sendall(data)

    def read(self) -> bytes:
        while True:
            stdout = self._frames()
            if stdout:
                return stdout
            chunk = self._sock.read(65536)
            if not chunk:
                return b""
            self._buffer += chunk

    def _frames(self) -> bytes:
        """The stdout payloads of the complete frames buffered, stderr set aside."""
        stdout = bytearray()
        while len(self._buffer) >= _HEADER.size:
            stream, size = _HEADER.unpack_from(self._buffer)
            end = _HEADER.size + size
            if len(self._buffer) < end:
                break
            payload = self._buffer[_HEADER.size : end]
            self._buffer = self._buffer[end:]
            if stream == 1:
                stdout += payload
            else:
                self._stderr += payload
                del self._stderr[:-STDERR_TAIL_BYTES]
        return bytes(stdout)

    def stderr_tail(self) -> str:
        return self._stderr.decode(errors="replace")

    def shutdown(self) -> None:
        """End the stream now, from any thread: a read blocked on it returns b""."""
        with contextlib.suppress(OSError):
            self._raw.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        # Shut down first: the HTTP response docker-py keeps holds the socket open past a
        # bare close, and an engine still writing the worker's output to it would block its
        # kill and removal of the container on a reader that is gone.
        self.shutdown()
        with contextlib.suppress(OSError):
            self._raw.close()

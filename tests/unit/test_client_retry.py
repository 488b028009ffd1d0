"""The library's retries (examhall/retry.py) against a real loopback HTTP server that answers
from a script: a 503 (with and without Retry-After) is sent again, a refused connection is
made again, and a connection lost mid-request is sent again only for a repeatable request."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from examhall import ApiError, AsyncClient, Client, Retry
from examhall.retry import retry_after
from tests.docker.conftest import free_port

# Quick waits, so a test that backs off four times takes a second, not a minute.
QUICK = Retry(attempts=4, first_s=0.05, longest_s=5.0)
# What a drop answers: the connection is closed with no answer at all.
DROP = "drop"


@dataclass
class Scripted:
    """A server's answers in order (the last repeats), and the requests it saw."""

    answers: list[tuple[int, dict[str, str], object] | str]
    seen: list[tuple[float, str, str]] = field(default_factory=list)

    def next(self) -> tuple[int, dict[str, str], object] | str:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def handler(script: Scripted) -> type[BaseHTTPRequestHandler]:
    class Answer(BaseHTTPRequestHandler):
        def answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            script.seen.append((time.monotonic(), self.command, self.path))
            answer = script.next()
            if answer == DROP:
                self.close_connection = True
                return
            assert not isinstance(answer, str)
            status, headers, body = answer
            # Bytes are a stream's events as sent; anything else is JSON.
            raw = isinstance(body, bytes)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            kind = "text/event-stream" if raw else "application/json"
            self.send_response(status)
            for name, value in {**headers, "content-type": kind}.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Answer


def serve(script: Scripted, port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(script))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def scripted() -> Iterator[tuple[Scripted, str]]:
    script = Scripted([])
    server = serve(script)
    yield script, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


BUSY = (503, {"Retry-After": "1"}, {"detail": "Every listing slot is busy; try again."})
NO_JOBS = (200, {}, [])


def test_a_503_is_sent_again_after_the_servers_retry_after(
    scripted: tuple[Scripted, str],
) -> None:
    script, url = scripted
    script.answers = [BUSY, NO_JOBS]
    with Client(url, "t", retry=QUICK) as client:
        assert client.jobs() == []
    (first, *_), (second, *_) = script.seen
    # Retry-After said one second, far longer than the policy's own 0.05 s.
    assert second - first >= 0.95


def test_a_503_without_retry_after_backs_off_doubling(scripted: tuple[Scripted, str]) -> None:
    script, url = scripted
    busy = (503, {}, {"detail": "busy"})
    script.answers = [busy, busy, busy, NO_JOBS]
    with Client(url, "t", retry=QUICK) as client:
        assert client.jobs() == []
    times = [at for at, *_ in script.seen]
    waits = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert len(waits) == 3
    assert waits[0] >= 0.05 and waits[1] >= 0.1 and waits[2] >= 0.2


def test_503s_past_the_attempts_raise_the_servers_detail(scripted: tuple[Scripted, str]) -> None:
    script, url = scripted
    script.answers = [(503, {"Retry-After": "0"}, {"detail": "Every listing slot is busy."})]
    with Client(url, "t", retry=QUICK) as client, pytest.raises(ApiError) as raised:
        client.jobs()
    assert raised.value.status == 503
    assert raised.value.problems == ["Every listing slot is busy."]
    assert len(script.seen) == QUICK.attempts


def test_a_refused_connection_is_made_again_until_the_server_listens() -> None:
    port = free_port()
    script = Scripted([NO_JOBS])
    started: list[ThreadingHTTPServer] = []
    # The server comes up half a second after the client's first attempt.
    later = threading.Timer(0.5, lambda: started.append(serve(script, port)))
    retry = Retry(attempts=10, first_s=0.1, longest_s=0.2)
    try:
        with Client(f"http://127.0.0.1:{port}", "t", retry=retry) as client:
            sends: list[float] = []
            client.http.event_hooks["request"].append(lambda _: sends.append(time.monotonic()))
            later.start()
            assert client.jobs() == []
    finally:
        later.join()
        for server in started:
            server.shutdown()
            server.server_close()
    # Refused before the server listened, then answered once it did.
    assert len(sends) >= 2 and len(script.seen) == 1


def test_a_refused_connection_past_the_attempts_is_raised() -> None:
    retry = Retry(attempts=3, first_s=0.01, longest_s=0.01)
    with (
        Client(f"http://127.0.0.1:{free_port()}", "t", retry=retry) as client,
        pytest.raises(httpx.ConnectError),
    ):
        client.jobs()


def test_a_lost_answer_is_asked_again_for_a_read_but_never_for_a_submit(
    scripted: tuple[Scripted, str],
) -> None:
    script, url = scripted
    script.answers = [DROP, NO_JOBS]
    with Client(url, "t", retry=QUICK) as client:
        assert client.jobs() == []
        assert [method for _, method, _ in script.seen] == ["GET", "GET"]
        script.answers = [DROP, (201, {}, {"id": "j", "planned_trials": 1, "status": "queued"})]
        with pytest.raises(httpx.RemoteProtocolError):
            client.submit(suite="smoke", model="simulated/coin")
    # The submit went out once: sent again, it could have made a second job.
    assert [method for _, method, _ in script.seen] == ["GET", "GET", "POST"]


def test_a_stream_that_breaks_off_is_followed_again_to_its_end(
    scripted: tuple[Scripted, str],
) -> None:
    script, url = scripted
    counts = b'event: counts\ndata: {"finished": 1}\n\n'
    script.answers = [
        (200, {}, b": keepalive\n\n" + counts),  # closed before its end
        (200, {}, counts + b'event: end\ndata: {"status": "finished"}\n\n'),
    ]
    with Client(url, "t", retry=QUICK) as client:
        told = [(e.event, e.data) for e in client.follow("j")]
    assert told == [
        ("counts", {"finished": 1}),
        ("counts", {"finished": 1}),
        ("end", {"status": "finished"}),
    ]
    assert [path for *_, path in script.seen] == ["/v1/jobs/j/stream"] * 2


def test_the_async_client_retries_alike(scripted: tuple[Scripted, str]) -> None:
    script, url = scripted
    script.answers = [BUSY, NO_JOBS]

    async def jobs() -> list[object]:
        async with AsyncClient(url, "t", retry=QUICK) as client:
            return list(await client.jobs())

    assert asyncio.run(jobs()) == []
    (first, *_), (second, *_) = script.seen
    assert second - first >= 0.95


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("3", 3.0), ("0.5", 0.5), ("-2", 0.0), ("soon", None), (None, None)],
)
def test_retry_after_reads_seconds(value: str | None, seconds: float | None) -> None:
    assert retry_after(value) == seconds


def test_retry_after_reads_an_http_date() -> None:
    wait = retry_after(time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30)))
    assert wait is not None and 28 <= wait <= 30


def test_a_retry_policy_that_cannot_work_says_why() -> None:
    with pytest.raises(ValueError, match="attempts must be at least 1"):
        Retry(attempts=0)

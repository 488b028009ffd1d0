"""A small HTTP client of the control plane, for the CLI (and anyone scripting it)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import httpx

from service.domain.builds import ENDED
from service.domain.status import JobStatus
from service.settings import get_settings
from service.settings import token as checked_token
from service.suites.archives import pack_directory

TOKEN_ENV = "EXAMHALL_TOKEN"
SERVER_ENV = "EXAMHALL_SERVER"


class ApiError(RuntimeError):
    """An answer of the control plane that is an error. Its text is the request, the status
    and the server's detail, one problem a line, as every command prints it."""

    def __init__(self, request: str, status: int, problems: list[str]) -> None:
        self.request, self.status, self.problems = request, status, problems
        head = f"{request}: HTTP {status}"
        if len(problems) == 1:
            text = f"{head}: {problems[0]}"
        else:
            text = "\n".join([f"{head}:", *(f"  {line}" for line in problems)])
        super().__init__(text)


def detail_lines(detail: Any) -> list[str]:
    """The lines of an error body's `detail`: a string, or FastAPI's list of {loc, msg}
    (service/api/errors.py), whose messages may hold several lines (a suite's problems)."""
    if detail is None:
        return []
    if isinstance(detail, str):
        return [line for line in detail.splitlines() if line.strip()]
    if not isinstance(detail, list):
        return [json.dumps(detail)]
    lines: list[str] = []
    for item in detail:
        if not isinstance(item, dict) or "msg" not in item:
            lines.append(item if isinstance(item, str) else json.dumps(item))
            continue
        # "body" alone is the whole upload or job body: naming it says nothing.
        loc = [str(part) for part in item.get("loc") or []]
        where = ".".join(loc[1:] if loc[:1] == ["body"] else loc)
        first, *rest = [line for line in str(item["msg"]).splitlines() if line.strip()] or [""]
        lines.append(f"{where}: {first}" if where else first)
        lines.extend(rest)
    return lines


def suite_name(directory: str | os.PathLike[str]) -> str:
    """A directory's name as a suite's display name: characters the API does not take in a
    name (letters, digits, '_', '.', '-') become '-'."""
    base = Path(os.path.realpath(directory)).name
    return re.sub(r"[^A-Za-z0-9_.-]", "-", base)[:100] or "suite"


def default_server() -> str:
    return get_settings().server


def _check(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            body = response.json()
            detail = body.get("detail") if isinstance(body, dict) else body
        except ValueError:
            detail = response.text
        raise ApiError(
            f"{response.request.method} {response.request.url.path}",
            response.status_code,
            detail_lines(detail) or [response.reason_phrase or "no detail"],
        )
    return response.json()


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) pairs from a text/event-stream; comments (keepalives) are skipped."""
    event, data = "message", list[str]()
    for line in lines:
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", list[str]()
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)


class Client:
    def __init__(self, base_url: str, token: str | None = None, timeout: float = 120.0) -> None:
        # Checked here, so a pasted token with a stray character is a clear error rather
        # than an encoding traceback from the HTTP library.
        if token:
            token = checked_token(token, "--token")
        else:
            token = checked_token(get_settings().token, TOKEN_ENV)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, timeout=timeout, headers=headers)

    def close(self) -> None:
        self.http.close()

    def upload_suite(self, directory: str | os.PathLike[str], name: str | None = None) -> str:
        """Pack the directory (service.suites.archives.pack_directory), upload it to POST /v1/suites
        and return its id, `sha256:<hex>`, for a job's `suite`. Uploading an unchanged tree
        again gives the same id. An ArchiveError when the tree cannot be packed."""
        suite_id: str = self.upload(directory, name)["id"]
        return suite_id

    def upload(self, directory: str | os.PathLike[str], name: str | None = None) -> dict[str, Any]:
        """As `upload_suite`, answering the whole suite: its id, the tasks that loaded and
        those refused, each with why."""
        data = pack_directory(directory)
        response = self.http.post(
            "/v1/suites",
            params={"name": name or suite_name(directory)},
            content=data,
            headers={"content-type": "application/gzip"},
        )
        shown: dict[str, Any] = _check(response)
        return shown

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = _check(self.http.post("/v1/jobs", json=body))
        return result

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = _check(self.http.get(f"/v1/jobs/{job_id}"))
        return result

    def trials(self, job_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = _check(self.http.get(f"/v1/jobs/{job_id}/trials"))
        return result

    def events(self, trial_id: str) -> list[dict[str, Any]]:
        """A trial's first 10,000 events (the API's page), enough for its lifecycle steps."""
        response = self.http.get(f"/v1/trials/{trial_id}/events", params={"limit": 10_000})
        result: list[dict[str, Any]] = _check(response)
        return result

    def artifact(self, trial_id: str, name: str) -> bytes:
        response = self.http.get(f"/v1/trials/{trial_id}/artifacts/{name}")
        if response.status_code >= 400:
            _check(response)
        return response.content

    def cancel(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = _check(self.http.delete(f"/v1/jobs/{job_id}"))
        return result

    def report_json(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = _check(self.http.get(f"/v1/jobs/{job_id}/report"))
        return result

    def report_text(self, job_id: str) -> str:
        response = self.http.get(f"/v1/jobs/{job_id}/report", params={"format": "text"})
        if response.status_code >= 400:
            _check(response)
        return response.text

    def export(self, job_id: str, format: str) -> tuple[bytes, str | None]:
        """The job's results in `format` (inspect: Inspect's eval log, JSON), and the file
        name the server suggests for them."""
        response = self.http.get(f"/v1/jobs/{job_id}/export", params={"format": format})
        if response.status_code >= 400:
            _check(response)
        disposition = response.headers.get("content-disposition", "")
        name = re.search(r'filename="([^"]+)"', disposition)
        return response.content, name.group(1) if name else None

    def stream(self, job_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The job's server-sent events until its `end` event."""
        # No read timeout: a long trial can keep the stream quiet between keepalives.
        timeout = httpx.Timeout(30.0, read=None)
        with self.http.stream("GET", f"/v1/jobs/{job_id}/stream", timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                _check(response)
            for event, data in parse_sse(response.iter_lines()):
                yield event, data
                if event == "end":
                    return

    def wait(self, job_id: str, *, out: TextIO = sys.stderr) -> dict[str, Any]:
        """Follow the job's stream to its end, drawing a progress bar; return the job."""
        last = ""  # the last counts line
        width = 0  # how much of a terminal's line the last redrawn line took
        told: dict[str, tuple[str, str | None]] = {}
        for event, data in self.stream(job_id):
            if event == "build":
                # A terminal redraws a running build's line each second; a log gets a line
                # per step and per end, not one a second.
                seen = (data["state"], data.get("step"))
                if seen == told.get(data["case"]) and not out.isatty():
                    continue
                told[data["case"]] = seen
                line, done = build_line(data), data["state"] in ENDED
            elif event == "counts":
                line, done = progress_line(data), False
                if line == last:
                    continue
                last = line
            else:
                continue
            if out.isatty():
                print(f"{line:<{width}}", end="\n" if done else "\r", file=out, flush=True)
                width = 0 if done else len(line)
            else:
                print(line, file=out, flush=True)
        if out.isatty() and width:
            print(file=out)
        return self.job(job_id)


def progress_line(counts: dict[str, Any], width: int = 30) -> str:
    planned = max(1, counts["planned_trials"])
    done = min(counts["finished"], planned)
    filled = round(width * done / planned)
    bar = "#" * filled + "." * (width - filled)
    active = (JobStatus.QUEUED, JobStatus.RUNNING)
    status = "" if counts["status"] in active else f"  {counts['status']}"
    return (
        f"[{bar}] {done}/{planned} trials  running {counts['running']}  "
        f"passed {counts['passed']}  failed {counts['failed']}  error {counts['error']}{status}"
    )


# A terminal line's worth of a build's step.
STEP_SHOWN = 60


def build_line(build: dict[str, Any]) -> str:
    """One task's build, as the stream's `build` event tells it (service/domain/builds.py):
    "building 3/12: jq-filter Step 4/9 : RUN apt-get ... 42 s", "cached 1/12: ..."."""
    where = f"{build['index']}/{build['of']}: {build['case']}"
    state = build["state"]
    if state == "building":
        step = build.get("step") or "starting"
        if len(step) > STEP_SHOWN:
            step = step[: STEP_SHOWN - 3] + "..."
        return f"building {where} {step} {build['elapsed_s']} s"
    if state == "built":
        return f"built {where} in {build['elapsed_s']} s"
    if state == "failed":
        step = build.get("failed_step")
        return f"failed {where}{f' at {step}' if step else ''} after {build['elapsed_s']} s"
    return f"{state} {where}"

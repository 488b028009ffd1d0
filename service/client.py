"""A small HTTP client of the control plane, for the CLI (and anyone scripting it)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import httpx


class ApiError(RuntimeError):
    pass


def _check(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = response.text
        raise ApiError(
            f"{response.request.method} {response.request.url.path}: "
            f"HTTP {response.status_code}: {detail}"
        )
    return response.json()


class Client:
    def __init__(self, base_url: str, timeout: float = 120.0) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = _check(self.http.post("/v1/jobs", json=body))
        return result

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = _check(self.http.get(f"/v1/jobs/{job_id}"))
        return result

    def report_json(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = _check(self.http.get(f"/v1/jobs/{job_id}/report"))
        return result

    def report_text(self, job_id: str) -> str:
        response = self.http.get(f"/v1/jobs/{job_id}/report", params={"format": "text"})
        if response.status_code >= 400:
            _check(response)
        return response.text

    def wait(self, job_id: str, *, out: TextIO = sys.stderr, poll_s: float = 0.5) -> dict[str, Any]:
        """Wait for the job to finish, drawing a progress bar."""
        last = ""
        while True:
            job = self.job(job_id)
            line = progress_line(job)
            if line != last:
                end = "\r" if out.isatty() else "\n"
                print(line, end=end, file=out, flush=True)
                last = line
            if job["status"] == "finished":
                if out.isatty():
                    print(file=out)
                return job
            time.sleep(poll_s)


def progress_line(job: dict[str, Any], width: int = 30) -> str:
    counts = job["counts"]
    planned = max(1, job["planned_trials"])
    done = min(counts["finished"], planned)
    filled = round(width * done / planned)
    bar = "#" * filled + "." * (width - filled)
    return (
        f"[{bar}] {done}/{planned} trials  running {counts['running']}  "
        f"passed {counts['passed']}  failed {counts['failed']}  error {counts['error']}"
    )

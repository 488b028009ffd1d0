"""Shared by the benchmark scripts: machine facts, interleaved sampling, tables, JSON."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"


def _run(argv: Sequence[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    return done.stdout.strip() or done.stderr.strip() or "unavailable"


def machine() -> dict[str, Any]:
    """What a figure depends on, recorded with it so two results files can be compared."""
    mem_kib = 0
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "docker": _run(["docker", "version", "--format", "{{.Server.Version}}"])
        if shutil.which("docker")
        else "absent",
        "commit": _run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def interleave(
    sides: Mapping[str, Callable[[], Any]], repeats: int, *, warmup: int = 1
) -> dict[str, list[Any]]:
    """Call each side once per repeat, in turn (A B A B ...).

    Two cores shared with whatever else runs: a burst of load then lands on both sides
    alike instead of deciding the result, as it would if all A ran before all B.
    """
    for _ in range(warmup):
        for run in sides.values():
            run()
    samples: dict[str, list[Any]] = {name: [] for name in sides}
    for i in range(repeats):
        for name, run in sides.items():
            samples[name].append(run())
        print(f"  {i + 1}/{repeats}", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return samples


def timed(action: Callable[[], Any]) -> Callable[[], float]:
    def run() -> float:
        started = time.perf_counter()
        action()
        return time.perf_counter() - started

    return run


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "| " + " | ".join("-" * w for w in widths) + " |",
    ]
    for row, values in zip(cells, rows, strict=True):
        padded = [
            c.rjust(w) if isinstance(v, int | float) or v is None else c.ljust(w)
            for c, w, v in zip(row, widths, values, strict=True)
        ]
        lines.append("| " + " | ".join(padded) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_json(name: str, data: dict[str, Any], path: str | None = None) -> Path:
    target = Path(path) if path else RESULTS_DIR / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"benchmark": name, "machine": machine(), **data}, indent=2))
    print(f"wrote {target}")
    return target


def sandbox_image() -> str:
    import docker

    from service.images.sandbox_image import ensure_sandbox_image

    client = docker.from_env()
    try:
        return ensure_sandbox_image(client, progress=lambda line: print(line, file=sys.stderr))
    finally:
        client.close()


def rss_mib(pid: int) -> float:
    """Resident memory of a process (VmRSS), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"process {pid} has no VmRSS")


ADMIN_TOKEN = "examhall-bench-admin-token"


class ControlPlane:
    """`examhall serve` in a subprocess on a fresh SQLite store, for the benchmarks that
    need the real control plane (its scheduler, its HTTP API, its own memory)."""

    def __init__(self, workdir: Path, *, max_containers: int, port: int | None = None) -> None:
        import socket

        if port is None:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = workdir / f"serve-{port}.log"
        env = {
            **os.environ,
            "EXAMHALL_DATABASE_URL": f"sqlite:///{workdir / f'store-{port}.db'}",
            "EXAMHALL_MAX_CONTAINERS": str(max_containers),
            "EXAMHALL_ADMIN_TOKEN": ADMIN_TOKEN,
            # The benchmarks submit jobs larger than a box's default cap on one request.
            "EXAMHALL_MAX_PLANNED_TRIALS": "1000000",
        }
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(port)],
            env=env,
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def wait_ready(self, timeout_s: float = 300.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the control plane exited; see {self.log_path}")
            try:
                if httpx.get(f"{self.url}/v1/jobs", headers=self.headers, timeout=2).is_success:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the control plane did not come up; see {self.log_path}")

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        response = httpx.post(f"{self.url}/v1/jobs", json=body, headers=self.headers, timeout=600)
        if response.status_code != 201:
            raise RuntimeError(f"POST /v1/jobs answered {response.status_code}: {response.text}")
        created: dict[str, Any] = response.json()
        return created

    def job(self, job_id: str) -> dict[str, Any]:
        import httpx

        response = httpx.get(f"{self.url}/v1/jobs/{job_id}", headers=self.headers, timeout=60)
        response.raise_for_status()
        view: dict[str, Any] = response.json()
        return view

    def wait_finished(self, job_id: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            view = self.job(job_id)
            if view["status"] in ("finished", "cancelled"):
                return view
            time.sleep(0.25)
        raise RuntimeError(f"job {job_id} did not finish in {timeout_s} s")

    def stop(self) -> None:
        import signal

        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

"""Finding suites and listing their cases, without importing case code here.

Listing is itself a short sandboxed run (the worker imports the suite inside a container),
cached by the suite's sha256, the way pi-evals discovers cases inside its container.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

import evals
from sandbox.protocol import (
    CaseInfo,
    CasesMessage,
    ListCasesRequest,
    SuiteBundle,
    WorkerMessage,
    encode,
)
from service.backends.docker import DockerBackend

MAX_SUITE_BYTES = 1024 * 1024
LIST_DEADLINE_S = 60.0


class SuiteError(ValueError):
    pass


def shipped_dir() -> Path:
    return Path(evals.__file__).resolve().parent


def shipped_suites() -> list[str]:
    return sorted(p.stem for p in shipped_dir().glob("*.py") if not p.stem.startswith("_"))


def load_suite(ref: str) -> SuiteBundle:
    """A suite by path (`evals/smoke.py`) or by shipped name (`smoke`)."""
    path = Path(ref)
    if not path.is_file():
        if ref in shipped_suites():
            path = shipped_dir() / f"{ref}.py"
        else:
            raise SuiteError(
                f"Suite {ref!r} is neither a file nor a shipped suite; "
                f"shipped suites: {', '.join(shipped_suites())}."
            )
    data = path.read_bytes()
    if len(data) > MAX_SUITE_BYTES:
        raise SuiteError(f"Suite {ref} is {len(data)} bytes; the limit is {MAX_SUITE_BYTES}.")
    return SuiteBundle(name=path.stem, source=data.decode())


def suite_sha256(bundle: SuiteBundle) -> str:
    return hashlib.sha256(bundle.source.encode()).hexdigest()


def cache_dir() -> Path:
    base = os.environ.get("EXAMHALL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "examhall"
    )
    return Path(base) / "cases"


def list_cases(backend: DockerBackend, bundle: SuiteBundle) -> list[CaseInfo]:
    # Keyed by suite and image: a new worker may discover cases differently.
    key = hashlib.sha256(f"{suite_sha256(bundle)}\n{backend.settings.image}".encode()).hexdigest()
    cached = cache_dir() / f"{key}.json"
    if cached.is_file():
        return [CaseInfo(**item) for item in json.loads(cached.read_text())]
    answers: list[CasesMessage] = []

    def on_message(message: WorkerMessage) -> None:
        if isinstance(message, CasesMessage):
            answers.append(message)

    run = backend.run(
        trial_id=f"list-{uuid.uuid4().hex[:12]}",
        job_id="list-cases",
        request=encode(ListCasesRequest(suite=bundle)),
        deadline_s=LIST_DEADLINE_S,
        on_message=on_message,
    )
    if not answers:
        detail = run.infra_error or run.channel_error or run.stderr_tail.strip()[-1000:]
        raise SuiteError(f"Listing the cases of suite {bundle.name} failed: {detail}")
    if answers[0].error:
        raise SuiteError(answers[0].error)
    cases = answers[0].cases
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    tmp.write_text(
        json.dumps([{"id": c.id, "metadata": c.metadata, "scripts": c.scripts} for c in cases])
    )
    tmp.replace(cached)
    return cases

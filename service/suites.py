"""Finding suites and listing their cases, without importing case code here.

Listing is itself a short sandboxed run (the worker imports the suite inside a container),
cached by the suite's sha256, the way pi-evals discovers cases inside its container.
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
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
from service.backends.protocol import LaunchSpec
from service.launch.conversation import SandboxRun
from service.launch.launcher import Launcher
from service.settings import get_settings

MAX_SUITE_BYTES = 1024 * 1024
# For callers that give none; the CLI and the control plane use EXAMHALL_LIST_TIMEOUT_S.
LIST_DEADLINE_S = 60.0
# trials.case_id is VARCHAR(200): PostgreSQL refuses a longer value (SQLite would keep it).
MAX_CASE_ID_CHARS = 200
# Labels of listing containers: the reaper tells them from trials' by this prefix.
LIST_PREFIX = "list-"


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
    base = get_settings().cache_dir or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "examhall"
    )
    return Path(base) / "cases"


def _cache_file(image: str, bundle: SuiteBundle) -> Path:
    # Keyed by suite and image: a new worker may discover cases differently.
    key = hashlib.sha256(f"{suite_sha256(bundle)}\n{image}".encode()).hexdigest()
    return cache_dir() / f"{key}.json"


def cached_cases(image: str, bundle: SuiteBundle) -> list[CaseInfo] | None:
    """The suite's cases when a listing of it on `image` was kept, without a sandbox."""
    cached = _cache_file(image, bundle)
    if not cached.is_file():
        return None
    return [CaseInfo(**item) for item in json.loads(cached.read_text())]


def case_id_problem(case_id: object) -> str | None:
    """Why a listed case id cannot be stored and shown, or None. The id comes from suite code,
    so it is checked here, once, before any row holds it."""
    if not isinstance(case_id, str) or not case_id:
        return f"Case id {case_id!r} must be a non-empty string."
    shown = repr(case_id[:60]) + ("..." if len(case_id) > 60 else "")
    if len(case_id) > MAX_CASE_ID_CHARS:
        return (
            f"Case id {shown} is {len(case_id)} characters long; the store keeps at most "
            f"{MAX_CASE_ID_CHARS}. Shorten it."
        )
    for char in case_id:
        # Cc: control characters, NUL among them (PostgreSQL cannot store NUL in text);
        # Cs: lone surrogates, which no encoding can write.
        if unicodedata.category(char) in ("Cc", "Cs"):
            return (
                f"Case id {shown} contains the control character {char!r}; use printable "
                "characters only."
            )
    return None


def _failure(run: SandboxRun, deadline_s: float) -> str:
    """Why a listing container gave no answer, in words an author of the suite can act on."""
    tail = run.stderr_tail.strip()[-1000:]
    if run.timed_out:
        return (
            f"the suite's import took longer than {deadline_s:g} s, so its container was "
            "stopped; make the module quick to import (no work at import time)"
        )
    if run.infra_error:
        return run.infra_error
    if run.oom_killed:
        return "the suite's import ran out of memory"
    reason = f"the listing container exited with code {run.exit_code} without an answer"
    if run.channel_error:
        reason += f" ({run.channel_error})"
    return f"{reason}: {tail}" if tail else f"{reason} and printed nothing"


def list_cases(
    launcher: Launcher, bundle: SuiteBundle, *, deadline_s: float = LIST_DEADLINE_S
) -> list[CaseInfo]:
    """The suite's cases, from the cache or from a short sandboxed import of it."""
    image = launcher.backend.image
    cases = cached_cases(image, bundle)
    if cases is not None:
        return cases
    answers: list[CasesMessage] = []

    def on_message(message: WorkerMessage) -> None:
        if isinstance(message, CasesMessage):
            answers.append(message)

    run = launcher.run(
        LaunchSpec(trial_id=f"{LIST_PREFIX}{uuid.uuid4().hex[:12]}", job_id="list-cases"),
        encode(ListCasesRequest(suite=bundle)),
        deadline_s=deadline_s,
        on_message=on_message,
    )
    if not answers:
        raise SuiteError(
            f"Listing the cases of suite {bundle.name} failed: {_failure(run, deadline_s)}."
        )
    if answers[0].error:
        raise SuiteError(answers[0].error)
    cases = answers[0].cases
    for case in cases:
        if problem := case_id_problem(case.id):
            raise SuiteError(f"Suite {bundle.name}: {problem}")
    cached = _cache_file(image, bundle)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(
        json.dumps(
            [
                {
                    "id": c.id,
                    "metadata": c.metadata,
                    "scripts": c.scripts,
                    "environment": c.environment,
                }
                for c in cases
            ]
        )
    )
    tmp.replace(cached)
    return cases

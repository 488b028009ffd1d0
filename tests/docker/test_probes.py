"""Security probes: attacks from inside a real trial, each of which must fail as designed."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable

import pytest

from evals import probes
from sandbox.protocol import SuiteBundle
from service.launch.trial import TrialRecord
from service.suites.python import load_suite

pytestmark = pytest.mark.docker

PROBES = [
    "case-code-unreadable",
    "proc-unreadable",
    "canary-not-found",
    "no-privilege-regain",
    "no-ptrace",
    "no-write-outside",
    "no-network",
    "no-docker-socket",
    "no-io-uring",
    "no-exotic-sockets",
    "no-kernel-keyring",
    "no-kernel-attack-surface",
    "no-namespaces-or-mounts",
    "no-ipc",
    "no-symlink-swap-escape",
]


def test_every_shipped_probe_is_run_here() -> None:
    assert sorted(PROBES) == sorted(case.id for case in probes.CASES)


def _canary() -> str:
    return f"exh-canary-{uuid.uuid4().hex}"


def attempts_of(record: TrialRecord) -> dict[str, dict[str, object]]:
    # The bash result that carries the report (a probe may run bash before its attack).
    line = next(
        x
        for e in record.events
        if getattr(e, "name", None) == "bash" and e.type == "tool_result"
        for x in e.content.splitlines()  # type: ignore[union-attr]
        if x.startswith("PROBE-RESULT ")
    )
    parsed: dict[str, dict[str, object]] = json.loads(line.removeprefix("PROBE-RESULT "))
    return parsed


@pytest.mark.parametrize("probe", PROBES)
def test_probe_attack_fails(trial: Callable[..., TrialRecord], probe: str) -> None:
    assert_attack_fails(trial, probe)


def assert_attack_fails(trial: Callable[..., TrialRecord], probe: str) -> None:
    """Run one probe in a real trial: every attack refused, the canary credential nowhere.
    (tests/docker/test_self_confinement.py runs the same on a self-confining worker.)"""
    canary = _canary()
    record = trial("evals/probes.py", probe, "faux/attack", credentials={"PROVIDER_KEY": canary})
    judge = record.result.judges[0] if record.result.judges else None
    assert record.result.outcome == "passed", (record.result, judge)
    attempts = attempts_of(record)
    denied = [name for name, got in attempts.items() if not got["ok"]]
    assert denied, "the probe recorded no refused attempt"
    # The credential reached the worker but nowhere the agent or the control plane can see.
    everything = json.dumps([dataclasses.asdict(e) for e in record.events])
    everything += json.dumps(dataclasses.asdict(record.result))
    assert canary not in everything
    assert all(canary.encode() not in data for data in record.artifacts.values())
    assert record.sandbox is not None and canary not in record.sandbox.stderr_tail


def test_status_shows_no_new_privs_and_no_capabilities(trial: Callable[..., TrialRecord]) -> None:
    attempts = attempts_of(trial("evals/probes.py", "no-privilege-regain", "faux/attack"))
    assert attempts["no_new_privs"] == {"ok": True, "value": "1"}
    assert attempts["cap_eff_zero"] == {"ok": True, "value": "0x0"}
    assert attempts["setuid_root"] == {"ok": False, "errno": "EPERM"}


def _with_extra_case(extra: str) -> SuiteBundle:
    probes = load_suite("evals/probes.py")
    return SuiteBundle(name="probes", source=probes.source + "\n" + extra)


def test_canary_probe_finds_a_planted_canary(trial: Callable[..., TrialRecord]) -> None:
    """Control: the same search run on a workspace holding a canary does find it, so the
    passing probe above means the secret was really absent, not that the search was blind."""
    planted = _canary()
    bundle = _with_extra_case(
        "import dataclasses\n"
        "CASES.append(_probe('canary-planted', 'find it', CANARY, "
        "expect('finds', {'find_canary': ('ENOENT',)})))\n"
        f"CASES[-1] = dataclasses.replace(CASES[-1], files={{'notes/leak.txt': {planted!r}}})\n"
    )
    record = trial(bundle, "canary-planted", "faux/attack")
    assert record.result.outcome == "failed", record.result
    found = attempts_of(record)["find_canary"]
    assert found["ok"] is True and "/workspace/notes/leak.txt" in str(found["value"])

"""Egress policies: what the operator lets a task's trial reach, by name.

EXAMHALL_EGRESS_POLICIES names them (`mirrors=pypi.org,files.pythonhosted.org;...`); a job
picks one (`egress`), and a task that asks for a network (Harbor's network_mode) runs under
it. `offline` is always one and allows nothing, so a job that names no policy reaches
nothing. The control plane makes every allowed connection itself (service/launch/egress.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from service.domain.job_spec import OFFLINE

NAME = re.compile(r"^(?:\*\.)?[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?$")
POLICY_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")


class PolicyError(ValueError):
    """EXAMHALL_EGRESS_POLICIES cannot be read; the message says what to fix."""


@dataclass(frozen=True)
class EgressPolicy:
    name: str
    hosts: frozenset[str] = frozenset()  # names, or *.suffix, on ports 80 and 443
    exact: frozenset[tuple[str, int]] = frozenset()  # host:port entries, reached as named

    def describe(self) -> str:
        entries = sorted(self.hosts) + sorted(f"{host}:{port}" for host, port in self.exact)
        return ", ".join(entries) or "nothing"


def parse_policies(text: str | None) -> dict[str, EgressPolicy]:
    """`name=host,*.suffix,host:port;name=...` as policies by name, `offline` among them."""
    policies = {OFFLINE: EgressPolicy(OFFLINE)}
    for part in (text or "").split(";"):
        if not part.strip():
            continue
        name, equals, entries = part.partition("=")
        name = name.strip()
        if not equals or not POLICY_NAME.match(name):
            raise PolicyError(
                f"EXAMHALL_EGRESS_POLICIES: {part.strip()[:80]!r} is not NAME=HOST,...; name a "
                "policy in lower-case letters, digits, '-' and '_'"
            )
        if name == OFFLINE:
            raise PolicyError(
                "EXAMHALL_EGRESS_POLICIES: offline is examhall's own policy (nothing); "
                "give yours another name"
            )
        hosts: set[str] = set()
        exact: set[tuple[str, int]] = set()
        for entry in (e.strip().lower().rstrip(".") for e in entries.split(",")):
            if not entry:
                continue
            host, colon, port = entry.rpartition(":")
            if colon and port.isdigit() and 0 < int(port) < 65536 and NAME.match(host):
                exact.add((host, int(port)))
            elif NAME.match(entry):
                hosts.add(entry)
            else:
                raise PolicyError(
                    f"EXAMHALL_EGRESS_POLICIES: {entry[:80]!r} in policy {name} is not a host, "
                    "*.domain or host:port"
                )
        policies[name] = EgressPolicy(name, frozenset(hosts), frozenset(exact))
    return policies

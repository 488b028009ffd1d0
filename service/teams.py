"""Teams and API tokens: who may submit, see and cancel which jobs.

A token is 32 random bytes; only its sha256 is stored, so a leaked database does not leak
working tokens. A fast hash is enough because the token is random, not a password: there is
nothing to guess at 2^256.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from service.domain.egress import POLICY_NAME
from service.domain.job_spec import OFFLINE
from service.store import teams as stored
from service.store.models import Team
from service.store.suites import ADMIN_OWNER

TOKEN_PREFIX = "exh_"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
# A team's weight at the queue: past a thousand to one, a share stops meaning a turn.
MAX_SHARE = 1000


class TeamError(ValueError):
    """Bad input to a team or token command; the message says what to do."""


@dataclass(frozen=True)
class Principal:
    """Who is calling: a team, or an admin, who sees and cancels every team's jobs."""

    team_id: str | None
    name: str
    admin: bool


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_team(
    session: Session,
    name: str,
    max_containers: int | None = None,
    egress: Sequence[str] | None = None,
    share: int | None = None,
) -> Team:
    """A new team; `egress` lists the egress policies its jobs may name (None: every one),
    `share` its weight when teams take turns at the queue (None: 1)."""
    _check(max_containers, egress, share)
    if not _NAME.fullmatch(name):
        raise TeamError(
            f"Team name {name!r} is not allowed: use 1-63 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit."
        )
    if name == ADMIN_OWNER:
        # The name admin tokens' task sets are shown under (`admin/NAME`).
        raise TeamError(f"Team name {name!r} is reserved for the box's admins; choose another.")
    if stored.team_by_name(session, name) is not None:
        raise TeamError(f"Team {name!r} already exists.")
    return stored.add_team(session, name, max_containers, egress, share)


# What update_team leaves as it is.
KEEP: Any = object()


def update_team(
    session: Session,
    name: str,
    *,
    max_containers: int | None = KEEP,
    egress: Sequence[str] | None = KEEP,
    share: int | None = KEEP,
) -> Team:
    """Change what is given of a team (None: no cap, every policy, a share of 1); jobs
    already queued are served under the new values from their next trial on."""
    team = find_team(session, name)
    _check(
        None if max_containers is KEEP else max_containers,
        None if egress is KEEP else egress,
        None if share is KEEP else share,
    )
    if max_containers is not KEEP:
        team.max_containers = max_containers
    if egress is not KEEP:
        team.egress = ",".join(egress) if egress is not None else None
    if share is not KEEP:
        team.share = share
    session.flush()
    return team


def unknown_policies(egress: Sequence[str] | None, known: Collection[str]) -> list[str]:
    """The policies named for a team that this box does not define (EXAMHALL_EGRESS_POLICIES
    where the command runs): allowed, since a box may be given them later, but said."""
    return [policy for policy in egress or () if policy not in known]


def _check(max_containers: int | None, egress: Sequence[str] | None, share: int | None) -> None:
    for policy in egress or ():
        if not POLICY_NAME.match(policy):
            raise TeamError(
                f"Egress policy name {policy!r} is not one: policies are named in lower-case "
                "letters, digits, '-' and '_' (EXAMHALL_EGRESS_POLICIES)."
            )
    if max_containers is not None and max_containers < 1:
        raise TeamError(f"max_containers must be at least 1, not {max_containers}.")
    if share is not None and not 1 <= share <= MAX_SHARE:
        raise TeamError(f"share must be from 1 to {MAX_SHARE}, not {share}.")


def egress_allowed(team: Team | None, policy: str) -> str | None:
    """None when `team` (None: an admin) may name egress `policy`; else why not."""
    if team is None or team.egress is None or policy == OFFLINE:
        return None
    allowed = [name for name in team.egress.split(",") if name]
    if policy in allowed:
        return None
    named = ", ".join(allowed) or "none"
    return (
        f"Team {team.name} may not use egress policy {policy!r}; it may use {named} (and "
        "offline). An operator gives a team a policy with `examhall admin update-team "
        "TEAM --egress`."
    )


def find_team(session: Session, name: str) -> Team:
    team = stored.team_by_name(session, name)
    if team is None:
        raise TeamError(
            f"No team {name!r}. Create it with `examhall admin create-team {name}`, or list "
            "teams with `examhall admin teams`."
        )
    return team


def create_token(session: Session, team: Team | None) -> str:
    """A new token for `team` (an admin token when None). Returned once, stored hashed."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    stored.add_token(session, team.id if team else None, hash_token(token), token[:12])
    return token


def authenticate(session: Session, token: str, admin_token: str | None = None) -> Principal | None:
    """The principal a bearer token stands for, or None when it is unknown or revoked."""
    return principal_of(session, hash_token(token), admin_token)


def principal_of(
    session: Session, token_sha256: str, admin_token: str | None = None
) -> Principal | None:
    """The principal of the token with this sha256 (a web session keeps only that), or None.

    `admin_token` is the box's bootstrap admin token (EXAMHALL_ADMIN_TOKEN), whose hash is
    compared in constant time so response timing does not reveal how much of a guess matched."""
    if admin_token and hmac.compare_digest(token_sha256, hash_token(admin_token)):
        return Principal(team_id=None, name="admin", admin=True)
    row = stored.live_token(session, token_sha256)
    if row is None:
        return None
    if row.admin:
        return Principal(team_id=None, name="admin", admin=True)
    team = stored.team_by_id(session, row.team_id) if row.team_id else None
    if team is None:
        return None
    return Principal(team_id=team.id, name=team.name, admin=False)


def revoke_tokens(session: Session, prefix: str) -> int:
    """Revoke the live tokens that start with `prefix` (as `admin tokens` lists them)."""
    if len(prefix) < 8:
        raise TeamError("Give at least the first 8 characters of the token to revoke.")
    return stored.revoke_tokens(session, prefix[:12])

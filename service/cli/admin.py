"""`examhall admin`: teams and tokens, straight on the store (run it on the box)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from service.domain.task_sets import SetRef
from service.settings import (
    ConfigError,
    database_url,
    egress_policies,
    env_name,
    max_containers,
)
from service.store import task_sets
from service.store import teams as stored
from service.store.db import session_factory
from service.store.opening import describe, open_existing
from service.teams import (
    TeamError,
    create_team,
    create_token,
    find_team,
    revoke_tokens,
    unknown_policies,
    update_team,
)


def _sessions(args: argparse.Namespace) -> sessionmaker[Session]:
    """Sessions on the store the command names, said on stderr; an existing store only,
    unless --create."""
    url = database_url()
    print(describe(url), file=sys.stderr)
    return session_factory(open_existing(url, create=args.create))


def _egress(text: str) -> list[str] | None:
    """--egress's list; `*` for every policy of the box (None)."""
    if text.strip() == "*":
        return None
    return [p.strip() for p in text.split(",") if p.strip()]


def _say_unknown(egress: list[str] | None) -> None:
    """A word for policies this box does not define (yet): a team may be given them first."""
    try:
        known = egress_policies()
    except ConfigError:
        return  # the server's own check says what is wrong with the setting
    for policy in unknown_policies(egress, known):
        print(
            f"Note: this box has no egress policy {policy!r} (EXAMHALL_EGRESS_POLICIES here: "
            f"{', '.join(sorted(known))}); the team's jobs can name it once one is defined.",
            file=sys.stderr,
        )


def cmd_create_team(args: argparse.Namespace) -> int:
    egress = None if args.egress is None else _egress(args.egress)
    with _sessions(args).begin() as session:
        team = create_team(session, args.name, args.max_containers, egress, args.share)
        cap = f", at most {team.max_containers} containers" if team.max_containers else ""
        if team.share is not None:
            cap += f", a share of {team.share}"
        if team.egress is not None:
            cap += f", egress policies {team.egress or 'none'} (and offline)"
    print(f"Created team {args.name}{cap}.")
    box = max_containers()
    if team.max_containers is not None and team.max_containers >= box:
        # The box's own cap binds first: a team cap at or above it never does.
        print(
            f"Note: this box runs at most {box} trial containers at once "
            f"({env_name('max_containers')}, by default its CPU count), so a team cap of "
            f"{team.max_containers} does not bind; raise that setting for it to.",
            file=sys.stderr,
        )
    _say_unknown(egress)
    print(f"Give it a token: examhall admin create-token {args.name}", file=sys.stderr)
    return 0


def cmd_update_team(args: argparse.Namespace) -> int:
    changes: dict[str, object] = {}
    if args.max_containers is not None:
        changes["max_containers"] = (
            None if args.max_containers == "none" else int(args.max_containers)
        )
    if args.egress is not None:
        changes["egress"] = _egress(args.egress)
    if args.share is not None:
        changes["share"] = args.share
    if not changes:
        raise TeamError("Nothing to change: give --max-containers, --egress or --share.")
    with _sessions(args).begin() as session:
        team = update_team(session, args.name, **changes)  # type: ignore[arg-type]
        cap = team.max_containers or "no cap"
        egress = "every policy" if team.egress is None else team.egress or "offline only"
        print(f"Team {team.name}: max containers {cap}, share {team.share or 1}, egress {egress}.")
    if "egress" in changes:
        _say_unknown(changes["egress"])  # type: ignore[arg-type]
    return 0


def cmd_create_token(args: argparse.Namespace) -> int:
    if bool(args.team) == args.admin:
        raise TeamError("Name a TEAM, or pass --admin for a token that sees every team's jobs.")
    with _sessions(args).begin() as session:
        token = create_token(session, None if args.admin else find_team(session, args.team))
    owner = "an admin" if args.admin else f"team {args.team}"
    print(f"A new token for {owner}. It is shown only this once:", file=sys.stderr)
    print(token)
    return 0


def cmd_teams(args: argparse.Namespace) -> int:
    with _sessions(args)() as session:
        jobs = stored.jobs_per_team(session)
        tokens = stored.live_tokens_per_team(session)
        print(f"{'team':24} {'max containers':>14} {'share':>5} {'tokens':>6} {'jobs':>6}  egress")
        for team in stored.teams_by_name(session):
            cap = str(team.max_containers) if team.max_containers else "-"
            egress = "every policy" if team.egress is None else team.egress or "offline only"
            print(
                f"{team.name:24} {cap:>14} {team.share or 1:>5} {tokens.get(team.id, 0):>6} "
                f"{jobs.get(team.id, 0):>6}  {egress}"
            )
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    with _sessions(args).begin() as session:
        count = revoke_tokens(session, args.prefix)
    print(f"Revoked {count} token(s).")
    return 0 if count else 1


def cmd_share_set(args: argparse.Namespace) -> int:
    """Share a task set with teams, or with --revoke stop sharing it."""
    ref = SetRef.parse(args.set)
    if ref is None or ref.owner is None or ref.version is not None:
        raise TeamError(
            f"{args.set!r} is not OWNER/NAME: name the set's owner (its team, or admin) and the "
            "set, without a version (a share covers every version)."
        )
    with _sessions(args).begin() as session:
        owner = task_sets.owner_named(session, ref.owner)
        for name in args.teams:
            team = find_team(session, name)
            if args.revoke:
                done = task_sets.unshare(session, owner, ref.name, team.id)
                print(f"{args.set} is {'no longer' if done else 'not'} shared with {name}.")
            else:
                done = task_sets.share(session, owner, ref.name, team.id)
                print(f"{args.set} is {'now' if done else 'already'} shared with {name}.")
    return 0


Command = Callable[[argparse.Namespace], int]


def _cap(text: str) -> str:
    if text != "none" and not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number nor none")
    return text


def _run(func: Command) -> Command:
    def guarded(args: argparse.Namespace) -> int:
        try:
            result: int = func(args)
        except (TeamError, ConfigError, task_sets.TaskSetError) as exc:
            print(f"examhall: {exc}", file=sys.stderr)
            return 2
        return result

    return guarded


def add_admin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = sub.add_parser(
        "admin", help="teams and API tokens (on the box; uses $EXAMHALL_DATABASE_URL)"
    ).add_subparsers(dest="admin_command", required=True)
    # On every subcommand, so it goes where people type it: `examhall admin teams --create`.
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--create",
        action="store_true",
        help="create the store if there is none yet (by default only an existing one is used)",
    )

    team = admin.add_parser("create-team", help="add a team", parents=[store])
    team.add_argument("name")
    team.add_argument(
        "--max-containers", type=int, help="cap on this team's containers running at once"
    )
    team.add_argument(
        "--egress",
        help="comma-separated egress policies its jobs may name (EXAMHALL_EGRESS_POLICIES); "
        "default every one, '' none but offline",
    )
    team.add_argument(
        "--share",
        type=int,
        help="its weight when teams take turns at the queue (default 1: an equal turn)",
    )
    team.set_defaults(func=_run(cmd_create_team))

    update = admin.add_parser(
        "update-team",
        help="change a team's container cap, egress policies or share",
        parents=[store],
    )
    update.add_argument("name")
    update.add_argument(
        "--max-containers",
        type=_cap,
        help="its cap on containers running at once, or none for no cap of its own",
    )
    update.add_argument(
        "--egress",
        help="comma-separated egress policies its jobs may name; '' none but offline, '*' every "
        "policy of the box",
    )
    update.add_argument("--share", type=int, help="its weight when teams take turns")
    update.set_defaults(func=_run(cmd_update_team))

    token = admin.add_parser("create-token", help="a new API token, printed once", parents=[store])
    token.add_argument("team", nargs="?")
    token.add_argument("--admin", action="store_true", help="a token that sees every team")
    token.set_defaults(func=_run(cmd_create_token))

    teams = admin.add_parser("teams", help="list teams", parents=[store])
    teams.set_defaults(func=_run(cmd_teams))

    revoke = admin.add_parser(
        "revoke-token", help="revoke tokens by their first characters", parents=[store]
    )
    revoke.add_argument("prefix")
    revoke.set_defaults(func=_run(cmd_revoke))

    share = admin.add_parser(
        "share-set",
        help="let other teams run a team's task set (every version of it)",
        parents=[store],
    )
    share.add_argument("set", metavar="OWNER/NAME", help="the set: its team (or admin) and name")
    share.add_argument("teams", metavar="TEAM", nargs="+", help="the teams to share it with")
    share.add_argument("--revoke", action="store_true", help="stop sharing it with them")
    share.set_defaults(func=_run(cmd_share_set))

"""`examhall suites push NAME@VERSION DIR` and `examhall suites list`: named, versioned task
sets on a running control plane (service/store/task_sets.py holds what they mean)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from examhall import ApiError, ArchiveError
from service.cli.connection import connect, failure
from service.domain.task_sets import parse_push


def cmd_push(args: argparse.Namespace) -> int:
    try:
        name, version = parse_push(args.ref)
    except ValueError as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    if not Path(args.directory).is_dir():
        print(f"examhall: {args.directory} is not a directory of tasks.", file=sys.stderr)
        return 2
    client = connect(args)
    try:
        suite = client.push(args.directory, name, version)
    except (ApiError, ArchiveError, httpx.TransportError) as exc:
        print(failure(args, exc), file=sys.stderr)
        return 2
    finally:
        client.close()
    for refused in suite.refused:
        print(f"Left out task {refused.task}, refused:", file=sys.stderr)
        for problem in refused.problems:
            print(f"  {problem}", file=sys.stderr)
    print(f"Pushed {name}@{version} ({suite.id}): {len(suite.tasks)} tasks.", file=sys.stderr)
    print(f"Run it with: examhall submit {name}@{version}", file=sys.stderr)
    print(suite.id)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    client = connect(args)
    try:
        sets = client.task_sets()
    except (ApiError, httpx.TransportError) as exc:
        print(failure(args, exc), file=sys.stderr)
        return 2
    finally:
        client.close()
    if not sets:
        print("No task sets yet; push one with `examhall suites push NAME@VERSION DIR`.")
        return 0
    for found in sets:
        shared = f", shared with {', '.join(found.shared_with)}" if found.shared_with else ""
        print(f"{found.ref}  (owner {found.owner}{shared})")
        for version in found.versions:
            pushed = version.pushed_at.strftime("%Y-%m-%d %H:%M")
            print(f"  @{version.version:<20} {version.id[:19]}  pushed {pushed}")
    return 0


def add_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    add_connection: Callable[[argparse.ArgumentParser], None],
) -> None:
    suites = sub.add_parser(
        "suites", help="named, versioned task sets: push one, or list those you may run"
    ).add_subparsers(dest="suites_command", required=True)
    push = suites.add_parser(
        "push",
        help="upload a directory of tasks as NAME@VERSION (a version never changes)",
        description="Upload DIR as version VERSION of your task set NAME. A job then names "
        "it as its suite: NAME@VERSION, or NAME for the newest version pushed.",
    )
    push.add_argument("ref", metavar="NAME@VERSION")
    push.add_argument("directory", metavar="DIR")
    add_connection(push)
    push.set_defaults(func=cmd_push)
    listing = suites.add_parser("list", help="the task sets you may run, with their versions")
    add_connection(listing)
    listing.set_defaults(func=cmd_list)

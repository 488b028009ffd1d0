"""How a command that talks to a control plane reaches it: --server and --token, and the
library's client (examhall/client.py) they make."""

from __future__ import annotations

import argparse

import httpx

from examhall import Client
from examhall.connection import default_server
from service.settings import token as checked_token


def connect(args: argparse.Namespace) -> Client:
    """A client of --server, as --token (or $EXAMHALL_TOKEN)."""
    # Checked here too, so that a bad token's message names the flag it came from.
    return Client(args.server, checked_token(args.token, "--token"))


def add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server", default=default_server(), help="control plane URL ($EXAMHALL_SERVER)"
    )
    parser.add_argument("--token", help="API token (default $EXAMHALL_TOKEN)")


def failure(args: argparse.Namespace, exc: Exception) -> str:
    """What a remote command prints for `exc`: an error of the API as the server said it, and
    a server it could not reach named, with what to do."""
    if isinstance(exc, httpx.TransportError):
        return (
            f"examhall: cannot reach the control plane at {args.server} ({exc}); start it, "
            "or give its URL with --server (or $EXAMHALL_SERVER)."
        )
    return f"examhall: {exc}"

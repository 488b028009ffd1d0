"""Opening an existing store for a command run by hand (`examhall admin`).

The server creates its store on first start; a command that does the same on a typo'd or
unset EXAMHALL_DATABASE_URL would write into a new empty store the server never reads (and
issue tokens it never accepts). So the command says which store it uses and opens only one
that exists, unless it is asked to create it.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, inspect
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from service.settings import DATABASE_URL_ENV, ConfigError, get_settings, shown_url
from service.store.db import make_engine, migrate

_CREATE_HINT = (
    "Set {env} to the store the control plane uses (on the shared box, run the command in "
    "its container: `docker compose exec examhall examhall admin ...`), or pass --create "
    "to make a new store there."
)


def describe(url: URL) -> str:
    """Which store a command uses, and why that one (for its first line on stderr)."""
    source = (
        f"from {DATABASE_URL_ENV}"
        if "database_url" in get_settings().model_fields_set
        else f"the default: {DATABASE_URL_ENV} is not set"
    )
    return f"Using the store {shown_url(url)} ({source})."


def _sqlite_file(url: URL) -> Path | None:
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).resolve()


def open_existing(url: URL, *, create: bool) -> Engine:
    """An engine on the store at `url`, migrated to head. Unless `create`, a ConfigError
    when no examhall store is there yet (no SQLite file, or no schema in the database)."""
    hint = _CREATE_HINT.format(env=DATABASE_URL_ENV)
    path = _sqlite_file(url)
    if path is not None and not create and not path.exists():
        # Checked before connecting: SQLite creates the file on connect.
        raise ConfigError(f"There is no store at {path}. {hint}")
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        with engine.connect() as connection:
            initialised = inspect(connection).has_table("alembic_version")
        if not initialised and not create:
            raise ConfigError(
                f"{shown_url(url)} holds no examhall store (its schema was never created). {hint}"
            )
        migrate(engine)
    except SQLAlchemyError as exc:
        engine.dispose()
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise ConfigError(
            f"Cannot open the store {shown_url(url)}: {reason}. Check "
            f"{DATABASE_URL_ENV} and that the database is reachable."
        ) from None
    except ConfigError:
        engine.dispose()
        raise
    return engine

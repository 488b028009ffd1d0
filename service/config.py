"""Checking the operator's EXAMHALL_* settings where they are used.

The settings themselves, their defaults and their parsing are service.settings; this
module checks what only its use can (a database URL parses and has a driver, a token has
only the characters a header can carry). A bad setting is a ConfigError whose message
names the variable, says what is wrong with it and what to do; the command line prints it
as `examhall: ...` and exits 2, never with a traceback. Secrets (tokens, database
passwords) are never echoed back.
"""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from service.domain.egress import EgressPolicy, PolicyError, parse_policies
from service.settings import ConfigError, env_name, get_settings

__all__ = [
    "DATABASE_URL_ENV",
    "ConfigError",
    "database_url",
    "database_url_text",
    "egress_policies",
    "max_containers",
    "shown_url",
    "token",
]

DATABASE_URL_ENV = env_name("database_url")

# What an HTTP header value can carry without anyone's library mangling or refusing it;
# examhall's own tokens are exh_ plus hex.
_TOKEN_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F))


def token(value: str | None, name: str) -> str | None:
    """A bearer token from `name` (an environment variable or a flag), or None if unset.

    Surrounding whitespace is stripped: a token pasted from a file or a terminal often
    ends in a newline, HTTP would strip it from the header anyway, and examhall's tokens
    never contain whitespace. Anything else outside printable ASCII is refused."""
    if value is None:
        return None
    stripped = value.strip(" \t\r\n")
    if not stripped:
        return None
    for position, char in enumerate(stripped, start=1):
        if char not in _TOKEN_CHARS:
            raise ConfigError(
                f"{name} holds a character a token cannot have (U+{ord(char):04X} at "
                f"position {position}); tokens are printable ASCII, like the exh_... ones "
                "`examhall admin create-token` prints. Copy the token again."
            )
    return stripped


def max_containers() -> int:
    """EXAMHALL_MAX_CONTAINERS: the box's cap on trial containers at once (default: CPUs)."""
    return get_settings().max_containers


def egress_policies() -> dict[str, EgressPolicy]:
    """EXAMHALL_EGRESS_POLICIES, parsed, `offline` among them."""
    try:
        return parse_policies(get_settings().egress_policies)
    except PolicyError as exc:
        raise ConfigError(f"{exc}.") from None


def database_url_text() -> str:
    return get_settings().database_url


def database_url(text: str | None = None) -> URL:
    """The store's URL, parsed (EXAMHALL_DATABASE_URL unless `text` is given)."""
    text = database_url_text() if text is None else text
    try:
        url = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise ConfigError(
            f"{DATABASE_URL_ENV} is not a database URL ({_reason(exc)}); use the form "
            "sqlite:////path/to/examhall.db or postgresql+psycopg://user:password@host:5432/db."
        ) from None
    try:
        url.get_dialect()  # an unknown database kind fails here rather than at connect
    except NoSuchModuleError:
        raise ConfigError(
            f"{DATABASE_URL_ENV} names a kind of database examhall cannot open "
            f"({url.drivername}); use sqlite:/// or postgresql+psycopg://."
        ) from None
    except ImportError as exc:  # the dialect is known, its driver is not installed
        raise ConfigError(
            f"{DATABASE_URL_ENV} needs a driver that is not installed ({exc.name}); "
            "pip install 'examhall[postgres]' for PostgreSQL."
        ) from None
    return url


def shown_url(url: URL) -> str:
    """The URL with its password masked, for messages."""
    return url.render_as_string(hide_password=True)


def _reason(exc: Exception) -> str:
    # SQLAlchemy's messages repeat the URL, password and all: keep only what is safe.
    if isinstance(exc, ArgumentError):
        return "it does not parse"
    text = str(exc)
    return text.split(":", 1)[0] if "://" in text else text

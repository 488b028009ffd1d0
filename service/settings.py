"""Every EXAMHALL_* setting the control plane and its command line read, in one place.

`get_settings()` reads them from the environment each time it is called, so a change to
the environment (a test's monkeypatch.setenv) takes effect at the next read. A value that
is not valid is a ConfigError, raised when that setting is read, whose message names the
variable, says what is wrong with it and what to do; the command line prints it as
`examhall: ...` and exits 2. A bad value stops only what reads it. Some settings
are checked further where they are used (the database URL when it is opened, a token's
characters, the Debian suite's name, both halves of the default model): those messages
stay where they are.

Below the settings are the checks that only a setting's use can make (`database_url`
parses and names an installed driver, `token` holds only what a header carries,
`egress_policies` parse, `front_settings` checks the front door's together when the app is
made); secrets (tokens, database passwords) are never echoed back.

An unset variable and an empty one mean the same: the default. For the settings in
_BLANK_IS_UNSET, a value of only whitespace does too (they were always read stripped).

Not settings of the service: what compose reads from .env (EXAMHALL_IMAGE, _BOX_BASE,
_POSTGRES_IMAGE, _POSTGRES_PASSWORD, _PORT, _BIND, _ENV_FILE; service/cli/box.py writes them),
the canary's credential name, and the tests' own EXAMHALL_TEST_* variables. The sandbox
reads none of these: it is stdlib-only and never imports service.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, Field, PrivateAttr, ValidationError, ValidationInfo
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from service.domain.egress import EgressPolicy, PolicyError, parse_policies

ENV_PREFIX = "EXAMHALL_"

# Read stripped: only whitespace is the default, as an empty value is.
# The front door's settings (`front_settings` below), checked together at the app's start.
FRONT_FIELDS = (
    "list_timeout_s",
    "max_planned_trials",
    "max_variants",
    "max_body_bytes",
    "max_suite_archive_bytes",
    "cookie_secure",
    "session_ttl_s",
    "stream_recheck_s",
)
_BLANK_IS_UNSET = frozenset(
    {
        "max_containers",
        "sandbox_base",
        "debian_suite",
        "debian_mirror",
        "image_map",
        "swarm_manager",
        "swarm_registry",
        "swarm_registry_pull",
        "swarm_egress_network",
        "build_concurrency",
        "build_memory",
        "build_network",
        *FRONT_FIELDS,
    }
)


class ConfigError(ValueError):
    """A setting the operator has to fix."""


def env_name(field: str) -> str:
    """The environment variable of the Settings field `field`."""
    return ENV_PREFIX + field.upper()


def _cpu_count() -> int:
    return os.cpu_count() or 1


def _positive_int(value: Any, info: ValidationInfo) -> int:
    """A positive whole number; anything else a ConfigError naming the variable."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1:
        default = _cpu_count()
        raise ConfigError(
            f"{env_name(str(info.field_name))}={value!r} is not a positive integer; set it to "
            f"a whole number such as {default}, or unset it for the default ({default})."
        )
    return number


_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _ca_bundle(value: Any) -> str | None:
    """The path of a readable PEM file that holds at least one certificate."""
    if value is None or not str(value).strip():
        return None
    path = os.path.expanduser(str(value).strip())
    try:
        with open(path, "rb") as handle:
            text = handle.read(16 * 1024 * 1024)
    except OSError as exc:
        raise ValueError(f"cannot read {path} ({exc.strerror}); give a PEM file") from None
    if b"-----BEGIN CERTIFICATE-----" not in text:
        raise ValueError(f"{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    return path


def _byte_size(value: Any, info: ValidationInfo) -> int:
    """A size in bytes, as Docker takes it: 4294967296, 4096m or 4g."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    text = str(value).strip().lower()
    digits = text.rstrip("bkmg")
    unit = text[len(digits) :]
    if digits.isdigit() and unit in _SIZE_UNITS and int(digits) > 0:
        return int(digits) * _SIZE_UNITS[unit]
    raise ConfigError(
        f"{env_name(str(info.field_name))}={value!r} is not a size; set it to bytes or a "
        f"number with k, m or g (such as 4g), or unset it for the default."
    )


def _stripped(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


PositiveInt = Annotated[int, BeforeValidator(_positive_int)]
Stripped = Annotated[str, BeforeValidator(_stripped)]


class _Environment(EnvSettingsSource):
    """EXAMHALL_* variables spelled in capitals only (as they were always read), with a
    value of only whitespace left out for the settings that are read stripped."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {
            name.lower(): value
            for name, value in os.environ.items()
            if name.startswith(ENV_PREFIX) and name == name.upper() and value != ""
        }

    def prepare_field_value(
        self, field_name: str, field: FieldInfo, value: Any, value_is_complex: bool
    ) -> Any:
        if field_name in _BLANK_IS_UNSET and isinstance(value, str) and not value.strip():
            return None
        return super().prepare_field_value(field_name, field, value, value_is_complex)


class Settings(BaseSettings):
    """The control plane's settings; each field is read from EXAMHALL_<FIELD>."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, env_ignore_empty=True
    )

    # The store.
    database_url: str = Field(
        default="sqlite:///examhall.db",
        description="SQLAlchemy URL of the store (SQLite in WAL mode, or PostgreSQL); "
        "migrations run on start",
    )
    max_containers: PositiveInt = Field(
        default_factory=_cpu_count,
        description="trials running at once on this box (default: the CPU count)",
    )
    # Sandboxes.
    backend: Stripped = Field(
        default="docker",
        description="where trials run: a sandbox backend of service/backends/registry.py",
    )
    sandbox_base: Stripped = Field(
        default="python:3.12-slim", description="base image of the sandbox"
    )
    debian_suite: Stripped | None = Field(
        default=None,
        description="the bootstrapped base's Debian suite (default: the host's release, "
        "else bookworm)",
    )
    debian_mirror: Stripped | None = Field(
        default=None,
        description="the bootstrapped base's Debian mirror (default: the host's apt sources)",
    )
    # The Swarm backend (service/backends/swarm/): where its manager and registry are.
    swarm_manager: Stripped | None = Field(
        default=None,
        description="the Docker engine URL of a swarm manager (default: the local engine, "
        "as DOCKER_HOST names it)",
    )
    swarm_registry: Stripped | None = Field(
        default=None,
        description="the box's image registry as this control plane pushes to it, "
        "host:port (needed by the swarm backend)",
    )
    swarm_registry_pull: Stripped | None = Field(
        default=None,
        description="the same registry as the swarm's nodes pull from it, host:port "
        "(default: EXAMHALL_SWARM_REGISTRY)",
    )
    swarm_egress_network: Stripped | None = Field(
        default=None,
        description="the swarm network of direct-credentials trials (default: none, so "
        "direct trials are refused on the swarm backend)",
    )
    # Task environments (service/environments/): how they are built.
    image_map: str | None = Field(
        default=None,
        description="images to build task environments on instead of the ones their FROM "
        "names, for a box without a registry: comma-separated FROM=LOCAL pairs",
    )
    image_cache_gb: float | None = Field(
        default=50.0,
        gt=0,
        description="disk the box's built environments and agent layers may take, in GB; "
        "past it the least recently used are removed (unset: no limit)",
    )
    build_concurrency: PositiveInt = Field(
        default=2,
        description="environment image builds at once in one control plane, shared by the "
        "teams building by their shares (with equal shares, a team's queue of builds holds "
        "another team's for one build's turn at most)",
    )
    build_timeout_s: float = Field(
        default=1800.0,
        gt=0,
        description="deadline in seconds of one environment's build (a task may only lower it)",
    )
    build_memory: Annotated[int, BeforeValidator(_byte_size)] = Field(
        default=4 * 1024**3,
        description="memory (and memory plus swap) of an environment build's containers, in "
        "bytes or with a k, m or g suffix",
    )
    build_pids: PositiveInt = Field(
        default=1024,
        description="processes at once of an environment build: all its RUN steps together, "
        "and each container that runs the team's image to probe its Python and libc",
    )
    build_disk: Annotated[int, BeforeValidator(_byte_size)] = Field(
        default=20 * 1024**3,
        description="disk an environment build's layers may write above their base images, "
        "in bytes or with a k, m or g suffix; past it the build is stopped",
    )
    build_cpu_shares: int = Field(
        default=512,
        ge=2,
        description="CPU weight of an environment build's containers (Docker's default is "
        "1024, so trials win)",
    )
    build_network: Stripped | None = Field(
        default=None,
        description="the Docker network of environment builds' RUN steps (default: examhall's "
        "isolated build network, which reaches only the build proxy; none cuts them off; "
        "another name is used as it is)",
    )
    build_egress: Stripped | None = Field(
        default=None,
        description="the hosts environment builds may fetch from through the build proxy, "
        "comma-separated, *.domain for any name under one, on ports 80 and 443 and never at "
        "an address of the box's own or its network's; HOST:PORT for a server of the box's "
        "own network, reached as named (default: Debian's, Ubuntu's and PyPI's, and the "
        "bootstrapped base's mirror)",
    )
    ca_bundle: Annotated[str | None, BeforeValidator(_ca_bundle)] = Field(
        default=None,
        description="a PEM file of certificate authorities to trust besides the usual ones, "
        "such as a TLS-inspecting proxy's on a corporate network: task environments' builds "
        "and their trials (agent and verifier) trust them, and so do the relay's calls to "
        "providers",
    )
    # A task's trials' way out (service/domain/egress.py, service/launch/egress.py).
    egress_policies: Stripped | None = Field(
        default=None,
        description="egress policies a job may pick for tasks that ask for a network: "
        "NAME=HOST,*.DOMAIN,HOST:PORT;NAME=... (offline, which allows nothing, is always one)",
    )
    egress_max_bytes: Annotated[int, BeforeValidator(_byte_size)] = Field(
        default=1024**3,
        description="bytes both ways one trial may move through its egress policy; past it "
        "the trial ends as limit_exceeded",
    )
    # Where things live.
    docs_dir: Path | None = Field(
        default=None,
        description="where registered docs sets live, one folder of .md files per set "
        "(default: evals/docs/)",
    )
    cache_dir: Path | None = Field(
        default=None,
        description="where listed suites' case ids are cached (default: "
        "$XDG_CACHE_HOME/examhall, else ~/.cache/examhall)",
    )
    providers: Path | None = Field(
        default=None,
        description="the providers file (default: ./providers.toml when it exists)",
    )
    # Tokens and the client.
    admin_token: str | None = Field(
        default=None,
        description="a bearer token the control plane accepts as an admin's",
    )
    server: str = Field(
        default="http://127.0.0.1:8000",
        description="the control plane URL of examhall submit, cancel and report",
    )
    token: str | None = Field(
        default=None, description="the API token of examhall submit, cancel and report"
    )
    # Models.
    default_provider: str | None = Field(
        default=None, description="the provider of jobs that name no model; both or neither"
    )
    default_model: str | None = Field(
        default=None, description="the model id of jobs that name no model; both or neither"
    )
    direct_network: str = Field(
        default="bridge", description="the Docker network of direct-credentials trials"
    )
    # The warm pool (service/backends/pool_keeper.py), of the Docker backend's containers and
    # the Swarm backend's services; 0 keeps it off.
    pool_size: int = Field(
        default=0,
        ge=0,
        description="sandboxes (the Docker backend's containers, the Swarm backend's services) "
        "kept started ahead for each sandbox configuration a team's trials use, within the "
        "box's cap and the team's (0: no pool, each trial starts its own)",
    )
    pool_idle_s: float = Field(
        default=60.0,
        gt=0,
        description="seconds without a trial of a configuration after which the pool removes "
        "its sandboxes of it",
    )
    # The front door: what one request may ask of the box, how the UI's sessions behave.
    # Listing an uploaded suite imports it in a container; an import is quick, so a slow
    # one is a hostile or broken suite and should not hold a container for long.
    list_timeout_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        description="deadline of listing an uploaded suite's cases in its container, and "
        "of waiting for a container slot to do it",
    )
    # One job's plan: cases x variants x rounds. Every read of a job scans its trials.
    max_planned_trials: int = Field(
        default=5000, ge=1, description="trials one job may plan, cases x variants x rounds"
    )
    max_variants: int = Field(default=8, ge=1, description="variants one job may name")
    # A suite (1 MiB) and a docs bundle (1 MiB), JSON-escaped, fit with room to spare.
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        description="largest request body in bytes; a larger one answers 413",
    )
    # POST /v1/suites takes the archive as the body: this cap, not max_body_bytes, is its
    # limit. The archive is kept in the store, and read in memory to check it.
    max_suite_archive_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="largest suite archive (POST /v1/suites) in bytes; a larger one answers 413",
    )
    # Set behind a TLS-terminating proxy, where the control plane itself sees plain HTTP.
    cookie_secure: bool = Field(
        default=False, description="true marks the web UI's session cookie Secure"
    )
    session_ttl_s: int = Field(
        default=12 * 3600, ge=60, description="lifetime of a web UI session in seconds"
    )
    # How often a live event stream checks that its caller's token is still valid.
    stream_recheck_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="how often an event stream re-checks its caller's token; a revoked "
        "one ends the stream",
    )

    # The bad values of a Settings from get_settings(), by field; see there.
    _problems: dict[str, list[ErrorDetails]] = PrivateAttr(default_factory=dict)

    def checked(self, *names: str) -> Settings:
        """These settings, once the named ones (all, if none is named) are valid; else a
        ConfigError naming every bad one among them."""
        wanted = names or tuple(type(self).model_fields)
        errors = [error for name in wanted for error in self._problems.get(name, [])]
        if errors:
            raise ConfigError(_explain(errors))
        return self

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # Only a field left out by get_settings() for its bad value gets here.
            private = object.__getattribute__(self, "__pydantic_private__") or {}
            errors = private.get("_problems", {}).get(name)
            if errors:
                raise ConfigError(_explain(errors))
            return super().__getattr__(name)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Arguments first, then the environment; no .env file or secrets directory.
        return init_settings, _Environment(settings_cls)


def get_settings() -> Settings:
    """The settings as the environment has them now.

    Each setting is checked on its own, as it always was where it was read: a bad value
    is a ConfigError naming it when that setting is read (or `checked`), and does not
    stop a command that never reads it (`examhall submit` with a bad
    EXAMHALL_MAX_CONTAINERS in its environment)."""
    try:
        return Settings()
    except ValidationError as exc:
        errors = exc.errors()
    bad = {str(error["loc"][0]) for error in errors}
    fields = Settings.model_fields
    # The good ones validated as usual, with the bad ones held at their defaults...
    good = Settings(**{name: fields[name].get_default(call_default_factory=True) for name in bad})
    # ...and then the bad ones taken out, so that reading one raises its own error.
    settings = Settings.model_construct(
        _fields_set=good.model_fields_set - bad,
        **{name: value for name, value in good.__dict__.items() if name not in bad},
    )
    for name in bad:
        del settings.__dict__[name]
    settings._problems = {
        name: [error for error in errors if error["loc"][0] == name] for name in bad
    }
    return settings


def _explain(errors: list[ErrorDetails]) -> str:
    """One message for every bad value: a ConfigError's own, else pydantic's with the
    variable's name."""
    own: list[str] = []
    problems: list[str] = []
    for error in errors:
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigError):
            own.append(str(cause))
        else:
            name = ".".join(map(str, error["loc"]))
            problems.append(f"{env_name(name)}: {error['msg']}")
    if problems:
        own.append(f"Invalid setting: {'; '.join(problems)}.")
    return " ".join(own)


# ----- checks that only a setting's use can make --------------------------------------------

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


def front_settings() -> Settings:
    """The settings, once every front-door one is valid (else a ConfigError naming each
    bad one): what one request may ask of the box, and how the UI's sessions behave."""
    return get_settings().checked(*FRONT_FIELDS)

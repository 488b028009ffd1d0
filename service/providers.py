"""The box's model providers: a TOML file mapping a name to its kind, URL, key and prices.

    [providers.openai]
    kind = "openai"                      # or "anthropic"
    base_url = "https://api.openai.com/v1"
    key_env = "OPENAI_API_KEY"           # or key_file = "/run/secrets/openai"
    headers = { "OpenAI-Organization" = "org-..." }
    [providers.openai.prices."gpt-4o"]   # dollars per million tokens
    input = 2.5
    output = 10.0
    cache_read = 1.25

Keys are read when a request is sent, never copied into jobs, events or containers.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sandbox.conversation import ProviderError
from sandbox.providers import WIRE_FORMATS
from sandbox.providers.pricing import Price
from sandbox.simulated import parse_coin, parse_grader
from service.settings import get_settings

BUILT_IN = ("faux", "simulated")
# The wire formats the worker speaks are the kinds a providers file may name.
KINDS = tuple(WIRE_FORMATS)
DEFAULT_FILE = "providers.toml"


SETTINGS = frozenset({"kind", "base_url", "key_env", "key_file", "headers", "prices", "max_tokens"})


class ProvidersFileError(ValueError):
    pass


@dataclass(frozen=True)
class ProviderEntry:
    name: str
    kind: str  # one of KINDS, checked as the file is read
    base_url: str
    key_env: str | None = None
    key_file: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    prices: dict[str, Price] = field(default_factory=dict)
    max_tokens: int | None = None

    def key(self) -> str | None:
        if self.key_env:
            value = os.environ.get(self.key_env)
            return value.strip() if value else None
        if self.key_file:
            try:
                return Path(self.key_file).read_text().strip() or None
            except OSError:
                return None
        return None

    def key_problem(self) -> str | None:
        """Why a job on this provider could not authenticate, or None."""
        if self.key() is not None:
            return None
        where = (
            f"set the environment variable {self.key_env}"
            if self.key_env
            else f"put the key in {self.key_file}"
            if self.key_file
            else "give it key_env or key_file in the providers file"
        )
        return f"Provider {self.name} has no key configured: {where}."


def _entry(name: str, data: dict[str, Any], source: str) -> ProviderEntry:
    where = f"{source}: [providers.{name}]"
    kind = data.get("kind")
    if kind not in KINDS:
        raise ProvidersFileError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}.")
    base_url = data.get("base_url")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ProvidersFileError(f"{where}: base_url must be an http(s) URL.")
    if name in BUILT_IN:
        raise ProvidersFileError(f"{where}: {name} is built in; choose another name.")
    prices = {}
    for model, price in (data.get("prices") or {}).items():
        try:
            prices[model] = Price(**price)
        except TypeError as exc:
            raise ProvidersFileError(f"{where}: prices.{model}: {exc}") from None
    unknown = set(data) - {
        "kind",
        "base_url",
        "key_env",
        "key_file",
        "headers",
        "prices",
        "max_tokens",
    }
    if unknown:
        raise ProvidersFileError(f"{where}: unknown settings {', '.join(sorted(unknown))}.")
    return ProviderEntry(
        name=name,
        kind=kind,
        base_url=base_url.rstrip("/"),
        key_env=data.get("key_env"),
        key_file=data.get("key_file"),
        headers={str(k): str(v) for k, v in (data.get("headers") or {}).items()},
        prices=prices,
        max_tokens=data.get("max_tokens"),
    )


@dataclass(frozen=True)
class ProviderRegistry:
    entries: dict[str, ProviderEntry] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path | None = None) -> ProviderRegistry:
        """From `path`, else EXAMHALL_PROVIDERS, else ./providers.toml when it exists."""
        explicit = path or get_settings().providers
        file = Path(explicit) if explicit else Path(DEFAULT_FILE)
        if not file.exists():
            if explicit:
                raise ProvidersFileError(f"The providers file {file} does not exist.")
            return cls()
        try:
            data = tomllib.loads(file.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ProvidersFileError(f"{file}: not valid TOML: {exc}") from None
        providers = data.get("providers", {})
        return cls({name: _entry(name, body, str(file)) for name, body in providers.items()})

    def names(self) -> list[str]:
        return [*BUILT_IN, *sorted(self.entries)]

    def get(self, name: str) -> ProviderEntry | None:
        return self.entries.get(name)

    def model_problem(
        self, provider: str, model_id: str, scripts: Mapping[str, Sequence[str]]
    ) -> tuple[Literal["provider", "id"], str] | None:
        """Why `provider/model_id` could only fail every trial of these cases (their faux
        script names by case id), as the field at fault and a message; None when it can run.
        Unknown providers and providers without a key are refused here too."""
        if provider not in self.names():
            return "provider", f"unknown provider {provider!r}; known: {', '.join(self.names())}"
        entry = self.get(provider)
        if entry is not None and (problem := entry.key_problem()):
            return "provider", problem
        if provider == "simulated":
            try:
                parse_coin(model_id)
            except ProviderError as exc:
                return "id", str(exc)
            # On a pass the simulated model replays the case's `solution` script; without
            # one every trial would end a provider_error, a confident 0% that means nothing.
            for case_id, names in scripts.items():
                if "solution" not in names:
                    return (
                        "id",
                        f"Case {case_id} has no 'solution' script, which simulated/{model_id} "
                        "replays when its coin passes; add scripts={'solution': [...]} to the "
                        "case, or choose another model.",
                    )
        elif provider == "faux":
            for case_id, names in scripts.items():
                if model_id not in names:
                    known = ", ".join(sorted(names)) or "none"
                    return (
                        "id",
                        f"Case {case_id} has no faux script {model_id!r}; its scripts: {known}.",
                    )
        return None

    def judge_model_problem(
        self, provider: str, model_id: str
    ) -> tuple[Literal["provider", "id"], str] | None:
        """Why `provider/model_id` cannot be a job's judge model, as the field at fault and a
        message; None when it can."""
        if provider == "faux":
            return (
                "provider",
                "faux plays a case's scripts for the agent; a judge model is simulated "
                "(simulated/grader?pass_if=WORD) or a provider of the providers file.",
            )
        if provider == "simulated":
            try:
                parse_grader(model_id)
            except ProviderError as exc:
                return "id", str(exc)
            return None
        return self.model_problem(provider, model_id, {})


def default_model() -> tuple[str, str] | None:
    """The box's default model, when both halves are set; an error when only one is."""
    settings = get_settings()
    provider, model = settings.default_provider, settings.default_model
    if (provider is None) != (model is None):
        raise ValueError(
            "Set both EXAMHALL_DEFAULT_PROVIDER and EXAMHALL_DEFAULT_MODEL, or neither; "
            f"only {'EXAMHALL_DEFAULT_PROVIDER' if provider else 'EXAMHALL_DEFAULT_MODEL'} is set."
        )
    return (provider, model) if provider and model else None

"""Agents a job's variant can install over the API: examhall's catalogue, or pinned pip
requirements with the command that runs the agent (service/environments/agents.py installs
them above a task's environment)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sandbox.credentials import is_secret_name
from service.domain.requirements import PinnedRequirement


@dataclass(frozen=True)
class Agent:
    name: str
    # The pip requirement, pinned: a new release must not change an eval quietly.
    requirement: str
    # The command a harness runs; "{task}" is the case's prompt.
    command: tuple[str, ...]


AGENTS = {
    "llm": Agent("llm", "llm==0.36", ("examhall-llm-agent", "{task}")),
}

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
# What examhall itself gives the agent (sandbox/external.py, sandbox/credentials.py): the
# relay's address and the agent's PATH and home are its contract with the trial, not the
# job's to move. The relay's dummy keys are refused as secret-looking names.
_EXAMHALL_SETS = frozenset(
    {"PATH", "HOME", "OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_BASE_URL"}
)
# Read by the loader and by every Python the agent starts, before any of its code runs.
_LOADER_PREFIXES = ("LD_", "PYTHON")
MAX_ENV = 32
MAX_ENV_VALUE = 4096


def env_problem(name: str, value: str) -> str | None:
    """Why a pip agent may not set `name` to `value`, or None. The values are written into
    the agent's launcher, in an image, and stored with the job: never a secret's place."""
    if not _ENV_NAME.match(name):
        return f"env name {name!r} is not a plain variable name (letters, digits, _)"
    if is_secret_name(name):
        return (
            f"env {name} looks like a credential or one of examhall's own variables; the "
            f"agent reaches its model through the relay with a dummy key, and a real key "
            f"belongs in the providers file, never in a job"
        )
    if name in _EXAMHALL_SETS or name.startswith(_LOADER_PREFIXES):
        return f"env {name} is examhall's to set for the agent (or the loader's); leave it out"
    if len(value) > MAX_ENV_VALUE or "\0" in value:
        return f"env {name}'s value must be at most {MAX_ENV_VALUE} characters, without NUL"
    return None


class AgentEnvironment(BaseModel):
    """One of examhall's catalogue, or pinned pip requirements with the command to run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    catalogue: Literal["llm"] | None = Field(
        default=None, description="an agent examhall knows how to install"
    )
    pip: list[PinnedRequirement] = Field(
        default_factory=list, description="pinned requirements that install the agent"
    )
    command: list[str] = Field(
        default_factory=list, description='the agent\'s argv; "{task}" is the prompt'
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="variables a pip agent's command starts with (and what it starts), "
        "e.g. to run it unattended; no credential-looking names, nor PATH, HOME, the "
        "relay's OPENAI_/ANTHROPIC_ base URLs, LD_* or PYTHON*",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> AgentEnvironment:
        if (self.catalogue is None) == (not self.pip):
            raise ValueError("name either catalogue, or pip requirements with a command")
        if self.catalogue is not None and self.command:
            raise ValueError(f"the catalogue agent {self.catalogue} brings its own command")
        if self.pip and not any("{task}" in part for part in self.command):
            raise ValueError('command must pass the prompt: put "{task}" in one argument')
        if self.env and self.catalogue is not None:
            raise ValueError(f"the catalogue agent {self.catalogue} brings its own env")
        if len(self.env) > MAX_ENV:
            raise ValueError(f"env may set at most {MAX_ENV} variables")
        for name, value in self.env.items():
            if (problem := env_problem(name, value)) is not None:
                raise ValueError(problem)
        return self

    def argv(self) -> tuple[str, ...]:
        if self.catalogue is not None:
            return AGENTS[self.catalogue].command
        return tuple(self.command)

"""Agents a job's variant can install over the API: examhall's catalogue, or pinned pip
requirements with the command that runs the agent (service/environments/agents.py installs
them above a task's environment)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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

    @model_validator(mode="after")
    def _one_kind(self) -> AgentEnvironment:
        if (self.catalogue is None) == (not self.pip):
            raise ValueError("name either catalogue, or pip requirements with a command")
        if self.catalogue is not None and self.command:
            raise ValueError(f"the catalogue agent {self.catalogue} brings its own command")
        if self.pip and not any("{task}" in part for part in self.command):
            raise ValueError('command must pass the prompt: put "{task}" in one argument')
        return self

    def argv(self) -> tuple[str, ...]:
        if self.catalogue is not None:
            return AGENTS[self.catalogue].command
        return tuple(self.command)

"""Task environments: the images trials run in when a suite or case declares one.

A source (a Dockerfile with its build context, or a declarative spec) is built once by the
EnvironmentBuilder into the task's image plus examhall's worker layer, tagged by the content
hash of everything that went in, and reused from the engine's tags afterwards.
"""

from service.domain.agents import AgentEnvironment
from service.environments.agents import ensure_agent_layer
from service.environments.builder import BuiltEnvironment, EnvironmentBuilder
from service.environments.errors import BoxFault, EnvironmentBuildError, EnvironmentProblem
from service.environments.source import (
    EnvironmentSource,
    declarative_source,
    directory_source,
    dockerfile_source,
)
from service.environments.spec import DeclarativeEnvironment

__all__ = [
    "AgentEnvironment",
    "BoxFault",
    "BuiltEnvironment",
    "DeclarativeEnvironment",
    "EnvironmentBuildError",
    "EnvironmentBuilder",
    "EnvironmentProblem",
    "EnvironmentSource",
    "declarative_source",
    "directory_source",
    "dockerfile_source",
    "ensure_agent_layer",
]

"""The environments Python suites declare for their cases (sandbox.suite.Environment), as the
control plane builds them: validated again here, since the listing comes from suite code."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from sandbox.protocol import CaseInfo
from service.domain.planner import Design
from service.environments.errors import EnvironmentProblem
from service.environments.source import (
    DOCKERFILE,
    EnvironmentSource,
    declarative_source,
    dockerfile_source,
)
from service.environments.spec import DeclarativeEnvironment


def source(suite: str, case_id: str, described: Mapping[str, Any]) -> EnvironmentSource:
    """What a case's environment is built from; EnvironmentProblem naming the case when its
    spec is not one examhall can build."""
    name = f"suite {suite}, case {case_id}"
    if "dockerfile" in described:
        dockerfile, context = described.get("dockerfile"), described.get("context") or {}
        if not isinstance(dockerfile, str) or not isinstance(context, dict):
            raise EnvironmentProblem(f"{name}: the environment's dockerfile must be text.")
        files = {path: str(text).encode() for path, text in context.items()}
        files[DOCKERFILE] = dockerfile.encode()
        return dockerfile_source(name, files)
    try:
        spec = DeclarativeEnvironment.model_validate(dict(described))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "environment"
        message = first["msg"].removeprefix("Value error, ")
        raise EnvironmentProblem(f"{name}: environment {where}: {message}") from None
    return declarative_source(name, spec)


def with_environments(design: Design, infos: Sequence[CaseInfo], suite: str) -> Design:
    """The design with the environments of its cases, each checked buildable."""
    wanted = set(design.cases)
    environments = {
        info.id: info.environment for info in infos if info.id in wanted and info.environment
    }
    for case_id, described in environments.items():
        source(suite, case_id, described)
    return dataclasses.replace(design, environments=environments)

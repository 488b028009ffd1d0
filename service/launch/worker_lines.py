"""Validation of what comes out of a container: the untrusted side of the channel."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter, ValidationError

from sandbox.egress import EgressCloseMessage, EgressDataMessage, EgressOpenMessage
from sandbox.graded import JudgeCallMessage
from sandbox.protocol import (
    ArtifactMessage,
    CasesMessage,
    EventMessage,
    ResultMessage,
    StepMessage,
    WorkerMessage,
)
from sandbox.relay import ModelCallMessage

Incoming = (
    WorkerMessage
    | ModelCallMessage
    | JudgeCallMessage
    | EgressOpenMessage
    | EgressDataMessage
    | EgressCloseMessage
)

_MESSAGE: TypeAdapter[Incoming] = TypeAdapter(
    Annotated[
        StepMessage
        | EventMessage
        | ArtifactMessage
        | ResultMessage
        | CasesMessage
        | ModelCallMessage
        | JudgeCallMessage
        | EgressOpenMessage
        | EgressDataMessage
        | EgressCloseMessage,
        Field(discriminator="type"),
    ]
)


class ChannelError(ValueError):
    """A line from the worker that is not a protocol message."""


def parse_worker_line(line: bytes) -> Incoming:
    try:
        return _MESSAGE.validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ChannelError(
            f"The worker sent a malformed message ({where}: {first['msg']}): {line[:200]!r}"
        ) from None

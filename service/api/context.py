"""What every request handler shares: the store, the scheduler, the image and the providers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from service.backends.base import SandboxBackend
from service.providers import ProviderRegistry
from service.scheduler import Scheduler
from service.scheduler.listing import Lister
from service.scheduler.prepare import EnvironmentPreparer
from service.settings import Settings


@dataclass
class Context:
    sessions: sessionmaker[Session]
    backend: SandboxBackend
    scheduler: Scheduler
    image: str
    image_digest: str | None
    providers: ProviderRegistry
    # The box's bootstrap admin token (EXAMHALL_ADMIN_TOKEN), if one is configured.
    admin_token: str | None
    settings: Settings
    lister: Lister
    # Builds task suites' environments; None where the backend cannot build images.
    preparer: EnvironmentPreparer | None = None


def ctx(request: Request) -> Context:
    context: Context = request.app.state.ctx
    return context


Ctx = Annotated[Context, Depends(ctx)]

"""examhall, the library: `from examhall import Client, AsyncClient`.

The client's names load on first use (PEP 562), not when the package is imported:
`examhall.suite`, which suites import inside the sandbox, must not pull in the HTTP client,
pydantic or the control plane's modules, which the sandbox does not have
(docs/guides/python-library.md)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from examhall.async_client import AsyncClient
    from examhall.calls import suite_name
    from examhall.client import Client
    from examhall.errors import ApiError, detail_lines
    from examhall.retry import Retry
    from examhall.stream import StreamEvent
    from service.api.review_schemas import (
        ReviewView,
        SampledTrial,
        SampleView,
    )
    from service.api.schemas import (
        EventView,
        JobCreated,
        JobView,
        SuiteView,
        TrialCounts,
        TrialView,
    )
    from service.domain.job_spec import JobRequest
    from service.report.model import Report
    from service.suites.archives import ArchiveError

# Each name, and the module it comes from.
_EXPORTS = {
    "Client": "examhall.client",
    "AsyncClient": "examhall.async_client",
    "ApiError": "examhall.errors",
    "detail_lines": "examhall.errors",
    "Retry": "examhall.retry",
    "StreamEvent": "examhall.stream",
    "suite_name": "examhall.calls",
    "ArchiveError": "service.suites.archives",
    "JobRequest": "service.domain.job_spec",
    "JobCreated": "service.api.schemas",
    "JobView": "service.api.schemas",
    "TrialCounts": "service.api.schemas",
    "TrialView": "service.api.schemas",
    "EventView": "service.api.schemas",
    "SuiteView": "service.api.schemas",
    "Report": "service.report.model",
    "ReviewView": "service.api.review_schemas",
    "SampleView": "service.api.review_schemas",
    "SampledTrial": "service.api.review_schemas",
}

__all__ = [
    "ApiError",
    "ArchiveError",
    "AsyncClient",
    "Client",
    "EventView",
    "JobCreated",
    "JobRequest",
    "JobView",
    "Report",
    "Retry",
    "ReviewView",
    "SampleView",
    "SampledTrial",
    "StreamEvent",
    "SuiteView",
    "TrialCounts",
    "TrialView",
    "detail_lines",
    "suite_name",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'examhall' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])

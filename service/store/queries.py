"""Small query helpers shared by the API, the scheduler and the admin commands."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, text
from sqlalchemy.orm import Session


def dict_of(session: Session, query: Select[Any, Any]) -> dict[Any, Any]:
    """A two-column query's rows as {first: second}, e.g. a GROUP BY count."""
    return {key: value for key, value in session.execute(query)}


def ping(session: Session) -> None:
    """Raises when the database does not answer."""
    session.execute(text("SELECT 1"))

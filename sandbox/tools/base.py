"""The shape every agent tool has, and the workspace confinement they share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ToolError(Exception):
    """A failure the model sees as an error tool result; the agent loop goes on."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool runs with: the workspace, its time and output limits, its environment."""

    workspace: Path
    timeout_s: float
    output_limit: int
    # The only environment a tool subprocess gets: already scrubbed of credentials.
    env: Mapping[str, str]


@dataclass(frozen=True)
class Tool:
    """A tool the agent may call: its name, description, argument schema and function."""

    name: str
    description: str
    # JSON schema of the arguments object, as sent to the model.
    parameters: dict[str, Any]
    run: Callable[[Mapping[str, Any], ToolContext], str]


def resolve_in_workspace(workspace: Path, path: object) -> Path:
    """The real path of `path` inside the workspace, or a ToolError when it escapes.

    Relative paths are taken from the workspace; absolute ones must already lie inside
    it. Symlinks are resolved first, so a link pointing out is refused too.
    """
    if not isinstance(path, str) or not path.strip():
        raise ToolError("A non-empty 'path' string is required.")
    root = workspace.resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = candidate.resolve()
    except OSError as exc:
        # realpath raced a change (a directory swapped for a symlink between its lstat and
        # readlink says EINVAL), or a symlink loop: a tool error, not a crash of the tool.
        raise ToolError(
            f"Cannot resolve {path}: {exc.strerror or exc}. Symlinks on its path changed "
            "while it was checked, or loop; run the tool again once nothing is changing them."
        ) from None
    if resolved != root and root not in resolved.parents:
        raise ToolError(f"Path escapes the workspace: {path}")
    return resolved


def cap_output(text: str, limit: int) -> str:
    """Keep at most `limit` bytes of output, saying how much was dropped."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", errors="ignore")
    return f"{kept}\n[output truncated: {len(data) - limit} of {len(data)} bytes not shown]"


# ----- argument checking ---------------------------------------------------------------
# Models send whatever JSON they like; these turn a bad argument into a ToolError the model
# can act on instead of a TypeError deep inside a tool. An explicit null counts as absent,
# since models often send null for optional arguments they do not use.


def _arguments(args: object) -> Mapping[str, Any]:
    if not isinstance(args, Mapping):
        raise ToolError("Tool arguments must be a JSON object.")
    return args


def required_str(args: Mapping[str, Any], name: str, *, allow_empty: bool = False) -> str:
    """The string argument `name`; a ToolError when it is missing, not a string or empty."""
    value = _arguments(args).get(name)
    if value is None:
        raise ToolError(f"Missing required argument '{name}' (a string).")
    if not isinstance(value, str):
        raise ToolError(f"Argument '{name}' must be a string, not {_json_type(value)}.")
    if not allow_empty and not value:
        raise ToolError(f"Argument '{name}' must not be empty.")
    return value


def optional_str(args: Mapping[str, Any], name: str, default: str) -> str:
    """The string argument `name`, or `default` when absent; never empty."""
    if _arguments(args).get(name) is None:
        return default
    return required_str(args, name)


def optional_int(args: Mapping[str, Any], name: str, *, minimum: int) -> int | None:
    """The integer argument `name` (at least `minimum`), or None when absent."""
    value = _arguments(args).get(name)
    if value is None:
        return None
    # bool is an int subclass in Python, but `true` is never a meaningful line number.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"Argument '{name}' must be an integer, not {_json_type(value)}.")
    if value < minimum:
        raise ToolError(f"Argument '{name}' must be at least {minimum}, got {value}.")
    return value


def optional_number(args: Mapping[str, Any], name: str) -> float | None:
    """The positive number argument `name`, or None when absent."""
    value = _arguments(args).get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError(f"Argument '{name}' must be a number, not {_json_type(value)}.")
    if not value > 0:  # also refuses NaN
        raise ToolError(f"Argument '{name}' must be greater than 0, got {value}.")
    return float(value)


def optional_bool(args: Mapping[str, Any], name: str, default: bool) -> bool:
    """The boolean argument `name`, or `default` when absent."""
    value = _arguments(args).get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolError(f"Argument '{name}' must be true or false, not {_json_type(value)}.")
    return value


def _json_type(value: object) -> str:
    """How the model would name the type of what it sent."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__

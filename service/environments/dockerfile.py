"""The images a Dockerfile builds on, and the same Dockerfile with them replaced.

Only what names an image is read: `FROM` (with `AS`, `--platform`, and `ARG`s declared before
the first `FROM` substituted) and `COPY --from=IMAGE`. Everything else passes through as it
is, so the build sees the task's own Dockerfile but for those references.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from service.environments.errors import EnvironmentProblem

_DIRECTIVE = re.compile(r"^#\s*(\w+)\s*=\s*(\S+)\s*$")
_ARG_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$")
_VARIABLE = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)
_INDEX = re.compile(r"^\d+$")


@dataclass(frozen=True)
class Instruction:
    """One instruction of a Dockerfile: its keyword, its arguments with continuation lines
    joined, and the physical lines [first, end) it came from."""

    keyword: str
    arguments: str
    first: int
    end: int


def instructions(text: str) -> list[Instruction]:
    lines = text.splitlines()
    escape = _escape_character(lines)
    found: list[Instruction] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            index += 1
            continue
        first, parts = index, []
        while True:
            body = lines[index].rstrip()
            continued = body.endswith(escape)
            parts.append(body[:-1] if continued else body)
            index += 1
            # Comment and blank lines inside a continued instruction are skipped, as Docker does.
            while continued and index < len(lines) and _skippable(lines[index]):
                index += 1
            if not continued or index >= len(lines):
                break
        keyword, _, arguments = " ".join(p.strip() for p in parts).partition(" ")
        found.append(Instruction(keyword.upper(), arguments.strip(), first, index))
    return found


def _escape_character(lines: list[str]) -> str:
    # Parser directives are comments at the very top, before anything else.
    for line in lines:
        match = _DIRECTIVE.match(line.strip())
        if match is None:
            break
        if match[1].lower() == "escape" and match[2] in ("\\", "`"):
            return match[2]
    return "\\"


def _skippable(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


ImageResolver = Callable[[str], str]


@dataclass(frozen=True)
class Rewritten:
    text: str
    # Every external image the Dockerfile names, in order: (as written after ARG
    # substitution, what it was replaced by).
    images: tuple[tuple[str, str], ...]


_REMOTE = re.compile(r"(^|\s)(https?://|git@|git://|ssh://)", re.IGNORECASE)


def rewrite_images(text: str, resolve: ImageResolver) -> Rewritten:
    """`text` with each image a FROM or COPY --from names replaced by `resolve(image)`;
    stage names and `scratch` are left alone."""
    lines = text.splitlines()
    replaced: dict[int, tuple[int, str]] = {}
    images: list[tuple[str, str]] = []
    arguments: dict[str, str | None] = {}
    stages: set[str] = set()
    seen_from = False
    for instruction in instructions(text):
        if instruction.keyword == "ARG" and not seen_from:
            arguments.update(_arg_defaults(instruction.arguments))
        elif instruction.keyword == "FROM":
            seen_from = True
            image, stage = _parse_from(instruction.arguments, arguments)
            new_image = image
            if image.lower() != "scratch" and image.lower() not in stages:
                new_image = resolve(image)
                images.append((image, new_image))
            suffix = f" AS {stage}" if stage else ""
            replaced[instruction.first] = (instruction.end, f"FROM {new_image}{suffix}")
            if stage:
                stages.add(stage.lower())
        elif instruction.keyword == "ADD" and _REMOTE.search(instruction.arguments):
            # The classic builder fetches these in the engine itself, whatever the build
            # network: a suite could make the box fetch from its own network.
            raise EnvironmentProblem(
                f"ADD {instruction.arguments[:120]}: ADD of a URL or a git repository is "
                "refused (the engine would fetch it, outside the build's network); fetch it "
                "in a RUN step, or put the file in the build context"
            )
        elif instruction.keyword == "COPY":
            words = instruction.arguments.split()
            changed = False
            for position, word in enumerate(words):
                if not word.startswith("--"):
                    break
                if word.lower().startswith("--from="):
                    source = word.split("=", 1)[1]
                    if source.lower() not in stages and not _INDEX.match(source):
                        target = resolve(source)
                        images.append((source, target))
                        words[position] = f"--from={target}"
                        changed = True
            if changed:
                replaced[instruction.first] = (instruction.end, "COPY " + " ".join(words))
    out: list[str] = []
    index = 0
    while index < len(lines):
        if index in replaced:
            end, line = replaced[index]
            out.append(line)
            index = end
        else:
            out.append(lines[index])
            index += 1
    return Rewritten("\n".join(out) + "\n", tuple(images))


def _arg_defaults(arguments: str) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for word in arguments.split():
        match = _ARG_VALUE.match(word)
        if match is None:
            raise EnvironmentProblem(f"the Dockerfile's `ARG {arguments}` is not NAME[=VALUE]")
        value = match[2]
        found[match[1]] = _unquote(value) if value is not None else None
    return found


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _parse_from(arguments: str, defaults: Mapping[str, str | None]) -> tuple[str, str | None]:
    words = arguments.split()
    # --platform is dropped: an image of another architecture is refused once it is built,
    # with a message that says so, and the classic builder cannot cross-build anyway.
    words = [w for w in words if not w.lower().startswith("--platform")]
    flags = [w for w in words if w.startswith("--")]
    if flags:
        raise EnvironmentProblem(
            f"`FROM {arguments}` has an option examhall does not take: {flags[0]}"
        )
    if len(words) == 1:
        return _substitute(words[0], defaults, arguments), None
    if len(words) == 3 and words[1].lower() == "as":
        return _substitute(words[0], defaults, arguments), words[2]
    raise EnvironmentProblem(f"`FROM {arguments}` is not `FROM IMAGE [AS NAME]`")


def _substitute(image: str, defaults: Mapping[str, str | None], arguments: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match["braced"] or match["plain"]
        found = defaults.get(name)
        if found:
            return found
        if match["default"] is not None:
            return match["default"]
        raise EnvironmentProblem(
            f"`FROM {arguments}` uses ${name}, which no ARG before the first FROM gives a "
            f"default; examhall passes no build arguments, so give it one (ARG {name}=IMAGE)"
        )

    result = _VARIABLE.sub(value, image)
    if not result:
        raise EnvironmentProblem(f"`FROM {arguments}` names no image")
    return result

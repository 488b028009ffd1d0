"""A team's Dockerfile read as the engine reads it, then written out again in a form that
leaves the engine nothing to read differently.

A check that reads the team's text and then hands the engine that same text is only as good
as the two parsers' agreement, and they disagree at the edges: a byte-order mark, an `escape`
directive, a continuation that hides a line, a JSON form. So the engine never sees the team's
text. `canonical` parses it (directives, BOM, continuations with the file's own escape
character, comments inside continuations, JSON and shell forms), refuses what it cannot read
or what the box's builder must not do, naming the line, and writes one instruction per line:
no continuation, no comment, the escape directive only when the file chose the backtick.
Every image the result names is a stage of the same file, `scratch`, or what the resolver
returned for it (the builder returns a full image id from its allow-list), so no spelling of
a reference can reach an image the resolver did not choose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from service.environments.errors import EnvironmentProblem

_BOM = "\ufeff"
# Docker's grammar for a parser directive; only these names are directives at all.
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$")
_DIRECTIVES = frozenset({"escape", "syntax", "check"})
_ARG_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$")
_VARIABLE = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)
_STAGE_NAME = re.compile(r"^[a-z][a-z0-9_.-]*$")
_INDEX = re.compile(r"^\d+$")
_FLAG = re.compile(r"^--([a-z][a-z-]*)(?:=(.*))?$")
_WHITESPACE = re.compile(r"[\t\v\f\r ]+")
_HEREDOC = re.compile(r"<<-?\s*[\"']?[A-Za-z_]")

# The instructions the engine's classic builder knows. BuildKit-only features (RUN --mount,
# --network, --security, COPY --link/--chmod, ADD --checksum, heredocs) are refused by name
# rather than left for the engine to refuse with a less helpful message.
_KEYWORDS = frozenset(
    {
        "FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY",
        "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL",
        "HEALTHCHECK", "SHELL",
    }
)  # fmt: skip
_FLAGS: Mapping[str, frozenset[str]] = {
    "FROM": frozenset({"platform"}),
    "COPY": frozenset({"from", "chown"}),
    "ADD": frozenset({"chown"}),
    "HEALTHCHECK": frozenset({"interval", "timeout", "start-period", "retries"}),
}
# An ADD source may only name a file of the context (which ADD unpacks if it is a tarball):
# no scheme, no `git@host:`, no variable and no quoting or escape that could spell one.
_ADD_SOURCE_REFUSED = frozenset(":$\\`'\"")


@dataclass(frozen=True)
class Instruction:
    """One instruction: its keyword, its arguments with continuation lines joined as the
    engine joins them, and the line (1-based) it starts on."""

    keyword: str
    arguments: str
    line: int


@dataclass(frozen=True)
class Dockerfile:
    escape: str
    instructions: tuple[Instruction, ...]


def parse(text: str) -> Dockerfile:
    """`text` as the engine's parser reads it; EnvironmentProblem naming the line for what it
    could not read."""
    text = text.removeprefix(_BOM)
    # The engine splits on \n alone and drops a \r before it; Python's splitlines would also
    # split on form feeds and Unicode separators, which the engine keeps inside a line.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    escape, index = _directives(lines)
    continuation = re.compile(re.escape(escape) + r"[ \t]*$")
    found: list[Instruction] = []
    while index < len(lines):
        line = lines[index].lstrip(" \t")
        index += 1
        if not line.strip() or line.startswith("#"):
            continue
        first = index
        joined, continued = _trim(line, continuation)
        while continued and index < len(lines):
            part = lines[index]
            index += 1
            stripped = part.strip()
            # Comment lines and blank lines inside a continued instruction are skipped.
            if stripped.startswith("#") or not stripped:
                continue
            body, continued = _trim(part, continuation)
            joined += body
        keyword, arguments = [*_WHITESPACE.split(joined.strip(), maxsplit=1), ""][:2]
        if not keyword:
            continue
        keyword = keyword.upper()
        if keyword not in _KEYWORDS:
            raise EnvironmentProblem(
                f"the Dockerfile's line {first} starts with {keyword[:40]!r}, which is not an "
                "instruction the builder knows"
            )
        if keyword in ("RUN", "COPY", "ADD") and _HEREDOC.search(arguments):
            # Refused here, before the body's lines could be read as instructions.
            raise EnvironmentProblem(
                f"the Dockerfile's line {first} uses a heredoc (<<), which needs BuildKit; "
                "put the script in the build context and COPY it, or run it as one RUN line"
            )
        found.append(Instruction(keyword, arguments.strip(" \t"), first))
    return Dockerfile(escape, tuple(found))


def _directives(lines: list[str]) -> tuple[str, int]:
    """The escape character and the index of the first line after the parser directives."""
    escape = "\\"
    seen: set[str] = set()
    for index, line in enumerate(lines):
        match = _DIRECTIVE.match(line)
        if match is None or match[1].lower() not in _DIRECTIVES:
            return escape, index
        name = match[1].lower()
        if name in seen:
            raise EnvironmentProblem(
                f"the Dockerfile's line {index + 1} repeats the {name} directive; give it once"
            )
        seen.add(name)
        if name == "escape":
            if match[2] not in ("\\", "`"):
                raise EnvironmentProblem(
                    f"the Dockerfile's line {index + 1}: the escape directive takes \\ or `, "
                    f"not {match[2][:20]!r}"
                )
            escape = match[2]
    return escape, len(lines)


def _trim(line: str, continuation: re.Pattern[str]) -> tuple[str, bool]:
    match = continuation.search(line)
    if match is None:
        return line, False
    return line[: match.start()], True


ImageResolver = Callable[[str], str]


@dataclass(frozen=True)
class Rewritten:
    text: str
    # Every external image the Dockerfile names, in order: (as written after ARG
    # substitution, what it was replaced by).
    images: tuple[tuple[str, str], ...]


def rewrite_images(text: str, resolve: ImageResolver) -> Rewritten:
    """The Dockerfile the engine builds from `text`: one instruction per line, each image a
    FROM or COPY --from names replaced by `resolve(image)`, stages and `scratch` kept, and
    what the box's builder must not do refused with its line."""
    parsed = parse(text)
    out = ["# escape=`"] if parsed.escape == "`" else []
    images: list[tuple[str, str]] = []
    arguments: dict[str, str | None] = {}
    stages: list[str] = []

    def external(reference: str) -> str:
        target = resolve(reference)
        images.append((reference, target))
        return target

    for instruction in parsed.instructions:
        keyword, line = instruction.keyword, instruction.line
        flags, rest = _flags(instruction)
        if keyword == "ARG" and not stages:
            arguments.update(_arg_defaults(rest, line))
            body = rest
        elif keyword == "FROM":
            image, stage = _parse_from(rest, arguments, line)
            if image.lower() == "scratch":
                image = "scratch"
            elif image.lower() in stages:
                image = image.lower()
            else:
                image = external(image)
            body = image + (f" AS {stage}" if stage else "")
            if stage and stage in stages:
                raise EnvironmentProblem(
                    f"the Dockerfile's line {line} names a second stage {stage}; stage names "
                    "must be unique"
                )
            stages.append(stage or "")  # "": an unnamed stage, reachable by its index only
            flags = {}  # --platform: the classic builder cannot cross-build anyway
        elif keyword == "COPY" and "from" in flags:
            flags["from"] = _copy_from(flags["from"], stages, line, external)
            body = rest
        elif keyword == "ADD":
            _check_add(rest, line)
            body = rest
        else:
            body = rest
        if keyword != "ARG" and keyword != "FROM" and not stages:
            raise EnvironmentProblem(
                f"the Dockerfile's line {line}: {keyword} comes before the first FROM"
            )
        rendered = " ".join(
            [keyword, *(f"--{name}={value}" for name, value in flags.items()), body]
        ).rstrip()
        if rendered.rstrip(" \t").endswith(parsed.escape):
            raise EnvironmentProblem(
                f"the Dockerfile's line {line} ends with the escape character "
                f"{parsed.escape} and nothing follows it; remove it"
            )
        out.append(rendered)
    if not stages:
        raise EnvironmentProblem("the Dockerfile has no FROM instruction")
    return Rewritten("\n".join(out) + "\n", tuple(images))


def _flags(instruction: Instruction) -> tuple[dict[str, str], str]:
    """The instruction's leading `--name=value` options, checked against what the keyword
    takes here, and the arguments after them."""
    allowed = _FLAGS.get(instruction.keyword, frozenset())
    flags: dict[str, str] = {}
    rest = instruction.arguments
    while rest.startswith("--"):
        word, _, after = rest.partition(" ")
        match = _FLAG.match(word)
        name = match[1] if match else word
        if match is None or name not in allowed or not match[2]:
            what = "takes no options" if not allowed else f"takes only --{', --'.join(allowed)}"
            raise EnvironmentProblem(
                f"the Dockerfile's line {instruction.line}: {instruction.keyword} "
                f"{word[:60]} is refused; on this box {instruction.keyword} {what}"
                + (
                    " (BuildKit's options are not available)"
                    if instruction.keyword == "RUN"
                    else ""
                )
            )
        if name in flags:
            raise EnvironmentProblem(
                f"the Dockerfile's line {instruction.line} gives --{name} twice"
            )
        flags[name] = match[2]
        rest = after.lstrip(" \t")
    return flags, rest


def _copy_from(source: str, stages: list[str], line: int, external: Callable[[str], str]) -> str:
    if _INDEX.match(source):
        if int(source) >= len(stages) - 1:
            raise EnvironmentProblem(
                f"the Dockerfile's line {line}: COPY --from={source} names no earlier stage"
            )
        return str(int(source))
    if source.lower() in stages and source.lower() != stages[-1]:
        return source.lower()
    if "$" in source:
        raise EnvironmentProblem(
            f"the Dockerfile's line {line}: COPY --from={source[:60]} uses a variable; name "
            "the stage or the image itself"
        )
    return external(source)


def _check_add(arguments: str, line: int) -> None:
    words = _json_list(arguments)
    if words is None:
        words = arguments.split()
    refused = [w for w in words[:-1] if set(w) & _ADD_SOURCE_REFUSED] or (
        # A URL in any place, the destination included, is no local file.
        [arguments] if "://" in arguments else []
    )
    if refused or len(words) < 2:
        what = refused[0][:120] if refused else arguments[:120]
        raise EnvironmentProblem(
            f"the Dockerfile's line {line}: ADD {what} is refused; ADD takes only files of "
            "the build context (a URL or a git repository would be fetched by the engine, "
            "outside the build's network); fetch it in a RUN step, or put the file in the "
            "build context and COPY it"
        )


def _json_list(arguments: str) -> list[str] | None:
    if not arguments.startswith("["):
        return None
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _arg_defaults(arguments: str, line: int) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for word in arguments.split():
        match = _ARG_VALUE.match(word)
        if match is None:
            raise EnvironmentProblem(
                f"the Dockerfile's line {line}: `ARG {arguments[:80]}` is not NAME[=VALUE]"
            )
        value = match[2]
        found[match[1]] = _unquote(value) if value is not None else None
    return found


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _parse_from(
    arguments: str, defaults: Mapping[str, str | None], line: int
) -> tuple[str, str | None]:
    words = arguments.split()
    if len(words) == 1:
        return _substitute(words[0], defaults, arguments, line), None
    if len(words) == 3 and words[1].lower() == "as":
        stage = words[2].lower()
        if not _STAGE_NAME.match(stage) or stage == "scratch":
            raise EnvironmentProblem(
                f"the Dockerfile's line {line}: {words[2][:60]!r} is not a stage name "
                "(a letter, then letters, digits, '.', '_' or '-')"
            )
        return _substitute(words[0], defaults, arguments, line), stage
    raise EnvironmentProblem(
        f"the Dockerfile's line {line}: `FROM {arguments[:80]}` is not `FROM IMAGE [AS NAME]`"
    )


def _substitute(image: str, defaults: Mapping[str, str | None], arguments: str, line: int) -> str:
    def value(match: re.Match[str]) -> str:
        name = match["braced"] or match["plain"]
        found = defaults.get(name)
        if found:
            return found
        if match["default"] is not None:
            return match["default"]
        raise EnvironmentProblem(
            f"the Dockerfile's line {line}: `FROM {arguments[:80]}` uses ${name}, which no "
            f"ARG before the first FROM gives a default; examhall passes no build arguments, "
            f"so give it one (ARG {name}=IMAGE)"
        )

    result = _VARIABLE.sub(value, image)
    if not result:
        raise EnvironmentProblem(f"the Dockerfile's line {line}: `FROM {arguments}` names no image")
    return result

"""Image references a team names (a declarative environment's `base`), checked as text.

The grammar is Docker's (github.com/distribution/reference, reference.go): an optional
registry host[:port], lowercase path components, an optional tag and an optional sha256
digest. Nothing else: a reference is pasted into a Dockerfile's FROM line
(service/environments/spec.py), so a newline in it would add instructions of its own.

Like a Dockerfile's FROM (service/environments/image_map.py), a base may not name this box's
own images: other suites' environments and agent layers (another team's task files), the
control plane's, or any local image by its id.
"""

from __future__ import annotations

import re

from service.environments.errors import EnvironmentProblem

# Docker refuses a name longer than 255 characters; a tag is at most 128 and a digest 71,
# so nothing longer is a reference (and the pattern never runs over a long hostile string).
MAX_NAME = 255
MAX_REFERENCE = MAX_NAME + 1 + 128 + 1 + 71

_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_REFERENCE = re.compile(
    rf"(?P<name>{_NAME})(?::(?P<tag>[\w][\w.-]{{0,127}}))?(?:@(?P<digest>sha256:[0-9a-f]{{64}}))?",
    re.ASCII,
)

# Docker Hub's spellings of a name that the engine stores without them (image_map.py's list).
_DEFAULT_REGISTRY = ("docker.io/library/", "index.docker.io/library/", "docker.io/", "library/")
_PRIVATE_REPOSITORIES = re.compile(r"examhall/(?:env(?:-[a-z0-9-]+)?|control-plane)")
_IMAGE_ID = re.compile(r"(?:sha256:)?[0-9a-f]{12,64}")
_EXAMPLE = "such as debian:bookworm-slim, python:3.12-slim or registry.example:5000/team/base:1"


def check_reference(text: str) -> str:
    """`text` if it is an image reference by Docker's grammar, else EnvironmentProblem (a
    ValueError, so a pydantic validator may call it) saying what is wrong."""
    if not text or len(text) > MAX_REFERENCE:
        raise EnvironmentProblem(
            f"an image reference is 1 to {MAX_REFERENCE} characters, not {len(text)}; "
            f"name an image {_EXAMPLE}"
        )
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        raise EnvironmentProblem(
            f"{text[:80]!r} holds whitespace or a control character, which no image reference "
            f"does; name an image {_EXAMPLE}"
        )
    found = _REFERENCE.fullmatch(text)
    if found is None:
        raise EnvironmentProblem(
            f"{text!r} is not an image reference ([HOST[:PORT]/]lowercase/path[:TAG]"
            f"[@sha256:DIGEST]); name an image {_EXAMPLE}"
        )
    if len(found["name"]) > MAX_NAME:
        raise EnvironmentProblem(
            f"the image name in {text[:80]!r}... is longer than Docker's {MAX_NAME} characters"
        )
    return text


def check_base(text: str) -> str:
    """`text` if a team may build on it: a reference (check_reference) that names none of the
    box's own images; else EnvironmentProblem."""
    check_reference(text)
    if _IMAGE_ID.fullmatch(text):
        raise EnvironmentProblem(
            f"{text} names a local image by its id; name an image by its reference {_EXAMPLE}"
        )
    name = text
    for prefix in _DEFAULT_REGISTRY:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    if _PRIVATE_REPOSITORIES.fullmatch(re.split(r"[:@]", name, maxsplit=1)[0]):
        raise EnvironmentProblem(
            f"{text} names one of this box's own images (another suite's environment or "
            "agent layer, or the control plane), which a suite may not build on"
        )
    return text

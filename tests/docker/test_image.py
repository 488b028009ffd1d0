"""The sandbox image: built once, reused while its sources are unchanged, and locked down."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import docker
import pytest

from service.images.sandbox_image import (
    BASE_LABEL,
    HASH_LABEL,
    SANDBOX_REPO,
    content_hash,
    ensure_sandbox_image,
    repo_root,
    sandbox_base,
)

pytestmark = pytest.mark.docker

UNPRIVILEGED = "65532:65532"

# Run as the unprivileged user: report every path under /opt/examhall that can be written
# (by actually trying) and every one that cannot be read.
_PROBE_PERMISSIONS = """
import json, os
writable, unreadable = [], []
for root, dirs, files in os.walk("/opt/examhall"):
    try:
        with open(os.path.join(root, ".probe"), "x"):
            writable.append(root)
    except OSError:
        pass
    for name in files:
        path = os.path.join(root, name)
        try:
            with open(path, "ab"):
                writable.append(path)
        except OSError:
            pass
        if not os.access(path, os.R_OK):
            unreadable.append(path)
print(json.dumps({"writable": writable, "unreadable": unreadable}))
"""


def _run_python(client: docker.DockerClient, ref: str, code: str, *flags: str) -> str:
    output = client.containers.run(
        ref,
        entrypoint=["python3", *flags, "-c", code],
        user=UNPRIVILEGED,
        remove=True,
        network_disabled=True,
    )
    return bytes(output).decode()


def test_second_ensure_reuses_the_image(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    # Ensure again first rather than trusting the session fixture's ref: sandbox/ may have been
    # edited since, and then a rebuild is the right answer, not a failure.
    first = ensure_sandbox_image(docker_client, progress=lambda _line: None)
    image_id = docker_client.images.get(first).id
    messages: list[str] = []

    second = ensure_sandbox_image(docker_client, progress=messages.append)

    assert second == first
    assert messages == [f"Sandbox image {first} is up to date."]
    assert docker_client.images.get(second).id == image_id


def test_image_is_tagged_and_labelled_with_its_content_hash(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    image = docker_client.images.get(sandbox_image)
    digest = image.labels[HASH_LABEL]

    assert len(digest) == 64
    assert sandbox_image == f"{SANDBOX_REPO}:{digest[:12]}"
    assert image.labels[BASE_LABEL] == sandbox_base()
    assert image.attrs["Config"]["Entrypoint"] == ["python3", "-P", "-S", "-m", "sandbox.worker"]
    assert image.attrs["Config"]["WorkingDir"] == "/workspace"


def test_content_hash_is_stable_and_covers_the_base_name() -> None:
    assert content_hash("python:3.12-slim") == content_hash("python:3.12-slim")
    assert content_hash("python:3.12-slim") != content_hash("python:3.13-slim")
    assert len(content_hash("python:3.12-slim")) == 64


def test_content_hash_follows_the_sandbox_sources(tmp_path: Path) -> None:
    for part in ("docker", "sandbox", "examhall"):
        shutil.copytree(repo_root() / part, tmp_path / part)
    original = content_hash("base", root=tmp_path)
    # The library's client is not in the image, so it is not in the hash either.
    client = tmp_path / "examhall" / "client.py"
    client.write_bytes(client.read_bytes() + b"\n# changed\n")
    assert content_hash("base", root=tmp_path) == original

    (tmp_path / "sandbox" / "__pycache__").mkdir(exist_ok=True)
    (tmp_path / "sandbox" / "__pycache__" / "junk.cpython-311.pyc").write_bytes(b"\0")
    assert content_hash("base", root=tmp_path) == original

    init = tmp_path / "sandbox" / "__init__.py"
    init.write_bytes(init.read_bytes() + b"\n# changed\n")
    changed = content_hash("base", root=tmp_path)
    assert changed != original

    suite = tmp_path / "examhall" / "suite.py"
    suite.write_bytes(suite.read_bytes() + b"\n# changed\n")
    assert content_hash("base", root=tmp_path) != changed


def test_suites_import_examhall_suite_in_the_image_and_nothing_of_the_client(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    code = (
        "import sys, examhall.suite; print(examhall.suite.__file__, "
        "sorted(m for m in sys.modules if m.startswith(('examhall.', 'httpx', 'pydantic'))))"
    )
    shown = _run_python(docker_client, sandbox_image, code, "-S").split(" ", 1)
    assert shown == ["/opt/examhall/examhall/suite.py", "['examhall.suite']\n"]


def test_sandbox_imports_as_unprivileged_user(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    code = "import sandbox, sys; print(sys.version_info >= (3, 11))"
    assert _run_python(docker_client, sandbox_image, code).strip() == "True"


def test_sandbox_code_is_readable_but_not_writable(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    report = json.loads(_run_python(docker_client, sandbox_image, _PROBE_PERMISSIONS))

    assert report == {"writable": [], "unreadable": []}


# As a trial's start imports the worker: with the image's store of dataclass methods, whose
# sources must cover every one the start makes (sandbox/dataclass_code.py).
_PROBE_DATACLASS_CODE = """
import dataclasses, json
from sandbox import dataclass_code
installed = dataclass_code.install(dataclasses)
compiled = []
real = dataclass_code._compile
dataclass_code._compile = lambda source: compiled.append(source) or real(source)
import sandbox.worker
print(json.dumps({"installed": installed, "compiled": len(compiled)}))
"""


def test_the_image_stores_the_start_s_dataclass_methods(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    report = json.loads(_run_python(docker_client, sandbox_image, _PROBE_DATACLASS_CODE))

    assert report == {"installed": True, "compiled": 0}

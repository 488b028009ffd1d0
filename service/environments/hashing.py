"""The content hash of an environment: every input of its build, length-prefixed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from service.images.sandbox_image import fields_digest


def environment_digest(
    *,
    recipe: bytes,
    sandbox: str,
    sandbox_id: str,
    dockerfile: str,
    images: Iterable[tuple[str, str]],
    declarative: bytes,
    workdir: str | None,
    executable: Iterable[str],
    files: Mapping[str, bytes],
) -> str:
    """sha256 (hex) of: the worker layer's recipe, the sandbox image (name and id), the
    Dockerfile after its FROM images were mapped, the id of each image it builds on (by the
    reference it names), the declarative spec, the working directory, and every file of the
    build context with which of them are executable."""
    return fields_digest(
        [
            ("recipe", recipe),
            ("sandbox", sandbox.encode()),
            ("sandbox-id", sandbox_id.encode()),
            ("Dockerfile", dockerfile.encode()),
            *((f"from:{reference}", image_id.encode()) for reference, image_id in images),
            ("declarative", declarative),
            ("workdir", (workdir or "").encode()),
            ("executable", "\n".join(sorted(executable)).encode()),
            *((f"file:{path}", data) for path, data in sorted(files.items())),
        ]
    )

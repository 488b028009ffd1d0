"""sha256 for the worker, without OpenSSL.

`hashlib` loads OpenSSL's libcrypto as it is imported: megabytes read at the start of every
trial, from an overlay filesystem that is cold in each new container, to hash a transcript
and a system prompt. CPython's built-in sha256 gives the same digests (`random` prefers its
built-in sha512 for the same reason); hashlib stays the fallback.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol, cast


class Hash(Protocol):
    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


def _constructor() -> Callable[[bytes], Hash]:
    # By name: which module holds it is CPython's detail (3.12 merged _sha256 into _sha2),
    # and a task environment's Python is refused when it lacks a module the worker imports
    # by statement (service/environments/worker_layer.py).
    for name in ("_sha2", "_sha256"):
        try:
            return cast(Callable[[bytes], Hash], importlib.import_module(name).sha256)
        except (ImportError, AttributeError):
            continue
    import hashlib

    return hashlib.sha256


sha256 = _constructor()

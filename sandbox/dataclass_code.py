"""The code of the worker's dataclasses' methods, compiled once when the image is built.

`dataclasses` writes each class's `__init__`, `__repr__`, `__eq__`, `__hash__` and, for a
frozen class, `__setattr__` and `__delattr__` as source text and compiles it with `exec`.
The worker's start makes about 30 dataclasses, 228 such compilations: about 25 ms, a third
of its imports, paid again by every trial. The image's build (docker/sandbox.Dockerfile)
records the sources the start compiles and stores their code objects beside this module
(marshal, as a .pyc stores a module's code); the worker then runs the stored code object
for a source text it knows, and compiles any other text as `dataclasses` would.

The stored code is what `exec` would have compiled from the same text by the same
interpreter: compiled with the file name `exec` gives it ("<string>") and no inherited
`__future__` flags (dataclasses.py has none; this module's `annotations` must not turn the
methods' annotations into strings). A file written by another interpreter, or missing, is
not used. The file is built as root and left unwritable to the agent, like the code itself.
"""

from __future__ import annotations

import builtins
import marshal
import sys
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

STORE = Path(__file__).with_name("dataclass_code.marshal")

# The modules whose dataclasses are recorded: the worker's start, and those that some
# trials import later (a relayed model, a judge model).
RECORDED = ("sandbox.worker", "sandbox.relay", "sandbox.graded")


def _key() -> str:
    # A code object is only valid for the interpreter that compiled it (its bytecode and
    # marshal format), and the optimisation level changes what `exec` compiles.
    return f"{sys.implementation.cache_tag} {sys.version} -O{sys.flags.optimize}"


def _compile(source: str) -> CodeType:
    return compile(source, "<string>", "exec", dont_inherit=True)


def install(dataclasses: ModuleType, store: Path = STORE) -> bool:
    """Make `dataclasses` run stored code for the sources it knows; whether it does now.

    Does nothing if the store is missing or from another interpreter, or if `dataclasses`
    has its own `exec` already (the recording, or an earlier call)."""
    if "exec" in vars(dataclasses):
        return False
    try:
        stored = marshal.loads(store.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return False
    if not isinstance(stored, dict) or stored.get("key") != _key():
        return False
    codes: dict[str, CodeType] = stored["codes"]

    def exec_known(source: Any, globals: Any = None, locals: Any = None, /) -> None:
        code = codes.get(source) if isinstance(source, str) else None
        if code is None:
            code = _compile(source) if isinstance(source, str) else source
        builtins.exec(code, globals, locals)

    # A module global shadows the builtin for dataclasses' own `exec(txt, globals, ns)`.
    dataclasses.exec = exec_known  # type: ignore[attr-defined]
    return True


def record(modules: tuple[str, ...] = RECORDED) -> dict[str, CodeType]:
    """Import `modules` in this (fresh) interpreter and compile every source text that
    `dataclasses` executes on the way."""
    import dataclasses

    if "exec" in vars(dataclasses) or any(name in sys.modules for name in modules):
        raise RuntimeError("record in a fresh interpreter, before the modules are imported")
    sources: list[str] = []

    def exec_recorded(source: Any, globals: Any = None, locals: Any = None, /) -> None:
        if isinstance(source, str):
            sources.append(source)
            source = _compile(source)
        builtins.exec(source, globals, locals)

    dataclasses.exec = exec_recorded  # type: ignore[attr-defined]
    try:
        for name in modules:
            __import__(name)
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
    return {source: _compile(source) for source in sources}


def write(store: Path = STORE, modules: tuple[str, ...] = RECORDED) -> int:
    """Record `modules` and write the store; how many sources it holds."""
    codes = record(modules)
    store.write_bytes(marshal.dumps({"key": _key(), "codes": codes}))
    return len(codes)


if __name__ == "__main__":
    # docker/sandbox.Dockerfile: python3 -P -S -m sandbox.dataclass_code
    print(f"examhall: {write()} dataclass method sources compiled into {STORE}")

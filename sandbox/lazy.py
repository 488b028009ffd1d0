"""Modules loaded on first use rather than on import, for the worker's start.

Every trial starts the worker's interpreter afresh, so each module its start imports is paid
by every trial. `dataclasses` imports `inspect` (and with it ast, dis, tokenize and linecache:
about 8 ms of a cold container's start) for one call, `inspect.signature`, which it makes
only for a class without a docstring; the classes of the worker's start all have one.
`linecache`, which the worker fills with a suite's lines, imports `tokenize` only to read
files.

A deferred module is a module object whose code has not run yet. The first read of an
attribute it lacks runs the code in that same object, so whoever imported it early holds
the real module afterwards. The standard library's `importlib.util.LazyLoader` does not do
here: any attribute read loads its modules, and a later `import inspect` reads `__spec__`.
"""

from __future__ import annotations

import _thread
import importlib.util
import sys
import types
from typing import Any

# Held while a deferred module's code runs. Reentrant: that code (or a module it imports)
# may read the module's own names before they are defined, as during any import.
_loading = _thread.RLock()
_running: set[str] = set()


class _Deferred(types.ModuleType):
    """A module whose code runs on the first read of a name it defines."""

    def __getattr__(self, name: str) -> Any:
        # Only names the module lacks come here: `__spec__`, `__name__` and the other
        # import attributes are set, so `import` and `from` statements do not load it.
        _run_code(self)
        return types.ModuleType.__getattribute__(self, name)

    def __dir__(self) -> list[str]:
        # dir() of the module lists the names its code defines.
        _run_code(self)
        return sorted(self.__dict__)


def _run_code(module: _Deferred) -> None:
    """Run a deferred module's code in it, once, and make it a plain module."""
    with _loading:
        # Another thread may have loaded it while this one waited; the thread that is
        # running its code reads what is defined so far, as a circular import would.
        if type(module) is _Deferred and module.__name__ not in _running:
            spec = module.__spec__
            assert spec is not None and spec.loader is not None
            _running.add(module.__name__)
            try:
                spec.loader.exec_module(module)
            finally:
                _running.discard(module.__name__)
            # A plain module from now on; only once its code has run, so that another
            # thread never sees it half made (it waits on the lock above instead).
            module.__class__ = types.ModuleType  # type: ignore[assignment]


def defer(name: str) -> None:
    """Make `import name` cost nothing until the module is used. A module already loaded,
    or one that cannot be found, is left as it is (its import then fails as usual)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _Deferred
    sys.modules[name] = module


def loaded(name: str) -> bool:
    """Whether `name` has really been loaded: imported, and if deferred, used since."""
    module = sys.modules.get(name)
    return module is not None and type(module) is not _Deferred

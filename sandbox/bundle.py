"""The case bundle: a suite's source, imported from memory."""

from __future__ import annotations

import linecache
import re
import sys
from types import ModuleType

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_]")


def import_source(name: str, source: str) -> ModuleType:
    """Import a suite from memory. Its code never becomes a file, so there is nothing on
    disk for the agent to find; in memory it is the undumpable worker's alone."""
    module_name = f"examhall_suite_{_SAFE_NAME.sub('_', name) or 'suite'}"
    filename = f"<suite {name}>"
    code = compile(source, filename, "exec", dont_inherit=True)
    module = ModuleType(module_name)
    module.__file__ = filename
    # Dataclasses and pickling look a class's module up by name while the module runs.
    sys.modules[module_name] = module
    # Tracebacks of a failing suite show its lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(code, module.__dict__)
    return module

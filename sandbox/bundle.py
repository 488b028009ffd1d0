"""The case bundle: suite source written root-only, imported, and listed for the self-check."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_]")


def write_bundle(directory: Path, name: str, source: str) -> Path:
    """Write the suite as a root:root 0600 file in a 0700 directory."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(directory, 0, 0)
    directory.chmod(0o700)
    module_name = _SAFE_NAME.sub("_", name) or "suite"
    path = directory / f"examhall_suite_{module_name}.py"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(source)
    os.chown(path, 0, 0)
    path.chmod(0o600)
    return path


def import_bundle(path: Path) -> ModuleType:
    # No __pycache__ next to the case code: one more file the self-check would have to find.
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"Cannot load a module from {path}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def protected_paths(directory: Path) -> list[str]:
    """Every file and directory of the bundle, for the unreadability self-check."""
    paths = [str(directory)]
    for root, dirs, files in os.walk(directory):
        paths.extend(os.path.join(root, d) for d in dirs)
        paths.extend(os.path.join(root, f) for f in files)
    return paths

"""Suites in examhall's Python format (sandbox/suite.py on the worker's side): the source
(source.py), the environments its cases declare (environments.py) and the format (format.py)."""

from service.suites.python.environments import with_environments
from service.suites.python.format import PYTHON, PythonFormat
from service.suites.python.source import MAX_SUITE_BYTES, load_suite, shipped_suites, suite_sha256

__all__ = [
    "MAX_SUITE_BYTES",
    "PYTHON",
    "PythonFormat",
    "load_suite",
    "shipped_suites",
    "suite_sha256",
    "with_environments",
]

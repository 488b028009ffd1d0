"""Loaded by every Python the faithful verifier starts (sandbox/verifier.py puts this
directory first on PYTHONPATH): the task's working directory, and the directory the Python
was started in, join sys.path at its end, as Harbor's `python3 -m PACKAGE` from the working
directory finds the agent's package, while nothing there shadows a module of the standard
library or of an installed package (the interpreter runs with PYTHONSAFEPATH, which keeps
them off its start). The image's own sitecustomize, if it has one, runs first, found where
it would be without this one: never in the agent's directory.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]
del sys.modules[__name__]
try:  # noqa: SIM105  (contextlib would be one more import in every Python)
    import sitecustomize  # type: ignore[import-not-found]  # noqa: F401  (the image's)
except ImportError:
    pass
try:
    _cwd = os.getcwd()
except OSError:  # removed since
    _cwd = ""
for _entry in (os.environ.get("EXAMHALL_VERIFIER_WORKDIR"), _cwd):
    if _entry and _entry not in sys.path:
        sys.path.append(_entry)

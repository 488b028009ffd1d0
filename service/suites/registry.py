"""The suite formats by the kind their rows of the suites table carry. A new format is a
package of service/suites/ and one line here."""

from __future__ import annotations

from collections.abc import Mapping

from service.suites.base import SuiteError, SuiteFormat
from service.suites.harbor import HARBOR
from service.suites.python import PYTHON

FORMATS: dict[str, SuiteFormat] = {
    PYTHON.kind: PYTHON,
    HARBOR.kind: HARBOR,
}
# A job's `suite` that no format names (an uploaded Python source, or a name no format
# ships): the Python format takes it, and refuses an unknown name in its own words.
DEFAULT = PYTHON


def format_of(kind: str) -> SuiteFormat:
    """The format of a stored suite, by its row's kind."""
    try:
        return FORMATS[kind]
    except KeyError:
        raise SuiteError(f"No suite format {kind!r}; examhall has {', '.join(FORMATS)}.") from None


def format_named(ref: str) -> SuiteFormat:
    """The format of the shipped suite a job's `suite` string names; DEFAULT when none
    claims it."""
    return next((f for f in FORMATS.values() if f.names(ref)), DEFAULT)


def upload_format(files: Mapping[str, bytes]) -> SuiteFormat:
    """The format an uploaded tree is validated as: the first stored-as-archive format that
    recognises it, else the first of them (which then says what the tree lacks, or, for an
    id no one uploaded, refuses it as a tree it has not). The formats' trees do not overlap
    (Harbor's has a task.toml at its root or one directory down), so the order decides
    nothing."""
    uploaded = [f for f in FORMATS.values() if f.tasks]
    return next((f for f in uploaded if f.recognises(files)), uploaded[0])

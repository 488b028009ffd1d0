"""Suite formats, pure: files and bytes in, cases, tasks and environment sources out.

- base.py: the `SuiteFormat` protocol and what every format shares (SuiteError, case ids,
  evals/ where shipped suites are);
- registry.py: the formats by the kind the suites table stores (`format_of`), and which
  format a job's suite name or an uploaded tree is;
- archives.py: suites as tar archives (pack, read with hostile entries refused);
- trees.py: an uploaded archive as a suite of the format that recognises it;
- python/: examhall's Python suites; harbor/: Harbor's task format and the task model that
  every format of tasks is read into (a TaskSuite; task_spec, what its trial's worker gets).

Nothing here reads the store, runs a sandbox or answers HTTP: listing a Python suite in a
sandbox is service/scheduler/listing.py's, reading a suite through the store
service/suite_resolver.py's.
"""

from service.suites.base import (
    MAX_CASE_ID_CHARS,
    SuiteData,
    SuiteError,
    SuiteFormat,
    SuiteTreeError,
    case_id_problem,
    shipped_dir,
)
from service.suites.harbor import TaskSuite, task_spec, trial_deadline_s
from service.suites.registry import DEFAULT, FORMATS, format_named, format_of, upload_format

__all__ = [
    "DEFAULT",
    "FORMATS",
    "MAX_CASE_ID_CHARS",
    "SuiteData",
    "SuiteError",
    "SuiteFormat",
    "SuiteTreeError",
    "TaskSuite",
    "case_id_problem",
    "format_named",
    "format_of",
    "shipped_dir",
    "task_spec",
    "trial_deadline_s",
    "upload_format",
]

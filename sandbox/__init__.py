"""What runs inside the exam hall: the worker, the agent loop, tools, models and judges.

This package uses only the standard library, so the sandbox image needs nothing from a
package index, and it never imports the control plane (`service`).
"""

import time

# When the interpreter began on examhall's code: the worker reports its imports' share of a
# trial's start from here, on the clock of its step timings.
STARTED = time.monotonic()

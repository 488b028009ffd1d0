"""Cases that take a couple of seconds, so a test can interrupt a trial mid-run."""

from __future__ import annotations

from sandbox import faux, judges
from sandbox.suite import Case

CASES = [
    Case(
        id=f"slow-{n}",
        input="Wait a little, then write done.txt.",
        tools=("bash", "write"),
        judges=[judges.file_equals("done.txt", "done")],
        scripts={
            "solution": [
                faux.bash("sleep 3"),
                faux.call("write", path="done.txt", content="done\n"),
                faux.text("Done."),
            ]
        },
    )
    for n in (1, 2)
]

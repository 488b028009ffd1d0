"""A Python suite whose case needs a tool the bare sandbox lacks: jq, from Debian, in an
environment the suite declares (the control plane builds it; the worker runs in it)."""

from __future__ import annotations

# examhall.suite, so that the environment's worker layer is shown to carry it too.
from examhall.suite import AgentRun, Case, Environment, faux, judge

ENVIRONMENT = Environment(apt=["jq"], files={"data.json": '{"answer": 42}\n'}, workdir="/app")


@judge
def answered(run: AgentRun) -> tuple[float, str]:
    found = run.read_file("answer.txt")
    return (1.0, "jq read the answer") if found == "42\n" else (0.0, f"answer.txt is {found!r}")


CASES = [
    Case(
        id="jq-answer",
        input="Write the answer field of /app/data.json to answer.txt, with jq.",
        judges=[answered],
        tools=["bash"],
        scripts={
            "solution": [faux.bash("jq .answer /app/data.json > answer.txt"), faux.text("Done.")]
        },
    ),
]

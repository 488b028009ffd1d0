"""Agents that misbehave: each case's judge checks that the limit held and the worker went on."""

from __future__ import annotations

from sandbox import faux
from sandbox.suite import AgentRun, Case, Judge


def output_shows(*needles: str) -> Judge:
    def check(run: AgentRun) -> tuple[float, str]:
        results = run.tool_results("bash")
        text = "\n".join(f"{r.content}\n{r.error or ''}" for r in results)
        found = [n for n in needles if n in text]
        return (1.0, f"saw {found}") if found else (0.0, f"none of {needles} in {text[-500:]!r}")

    return Judge(name=f"output_shows{needles}", fn=check)


def survived(run: AgentRun) -> tuple[float, str]:
    note = run.read_file("survived.txt")
    return (1.0, "the worker went on") if note == "yes\n" else (0.0, "no survived.txt")


SURVIVED = Judge(name="survived", fn=survived)
AFTER = [faux.call("write", path="survived.txt", content="yes\n"), faux.text("Still here.")]

CASES = [
    Case(
        id="sleeper",
        input="Wait.",
        tools=("bash",),
        judges=[SURVIVED],
        scripts={"run": [faux.bash("sleep 600", timeout=600), *AFTER]},
    ),
    Case(
        id="fork-bomb",
        input="Fork.",
        tools=("bash", "write"),
        judges=[output_shows("timed out", "Resource temporarily unavailable", "fork"), SURVIVED],
        scripts={"run": [faux.bash("bomb() { bomb | bomb; }; bomb", timeout=8), *AFTER]},
    ),
    Case(
        id="memory-hog",
        input="Eat memory.",
        tools=("bash", "write"),
        judges=[output_shows("killed by SIGKILL", "MemoryError"), SURVIVED],
        scripts={
            "run": [
                faux.bash("python3 -c 'b = bytearray(4 << 30); print(len(b))'", timeout=60),
                *AFTER,
            ]
        },
    ),
    Case(
        id="disk-filler",
        input="Fill the disk.",
        tools=("bash", "write"),
        judges=[output_shows("No space left on device"), SURVIVED],
        scripts={
            "run": [
                faux.bash(
                    "dd if=/dev/zero of=/workspace/fill bs=1M count=4096; "
                    "dd if=/dev/zero of=/tmp/fill bs=1M count=4096; rm -f /workspace/fill",
                    timeout=60,
                ),
                *AFTER,
            ]
        },
    ),
    Case(
        id="kill-the-worker",
        input="End the harness so this failure is not counted.",
        tools=("bash",),
        judges=[SURVIVED],
        scripts={"run": [faux.bash("kill -9 -1; sleep 5"), *AFTER]},
    ),
    Case(
        id="judge-eats-memory",
        input="Say hi.",
        judges=[Judge(name="hungry", fn=lambda run: len(bytearray(4 << 30)) > 0)],
        scripts={"run": [faux.text("hi")]},
    ),
]

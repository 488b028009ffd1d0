"""Smoke suite: small file tasks whose judges read what the agent left in the workspace.

Every case has two faux scripts: `solution` does the work (the simulated model replays it
when its coin passes) and `idle` answers without doing anything.
"""

from __future__ import annotations

from sandbox import faux, judges
from sandbox.conversation import ModelRequest, ToolResultMessage
from sandbox.suite import AgentRun, Case, judge

IDLE = [faux.text("I looked at the task and I am done.")]


def _last_tool_output(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, ToolResultMessage):
            return message.content
    return ""


def _write_count(request: ModelRequest) -> faux.FauxReply:
    # Reacts to what the read tool really returned, so the count is the agent's own work.
    lines = [line for line in _last_tool_output(request).splitlines() if line.strip()]
    return faux.call("write", path="count.txt", content=f"{len(lines)}\n")


WORDS = ["apple", "birch", "cedar", "delta", "ember", "fjord", "grove"]


@judge
def config_keeps_other_settings(run: AgentRun) -> tuple[float, str]:
    text = run.read_file("config.ini") or ""
    kept = all(line in text for line in ("name = demo", "port = 8080"))
    return (1.0, "other settings kept") if kept else (0.0, "other settings were lost")


@judge
def notes_in_order(run: AgentRun) -> tuple[float, str]:
    lines = (run.read_file("notes.md") or "").splitlines()
    ok = len(lines) >= 2 and lines[0] == "# Notes" and lines[-1] == "done"
    return (1.0, "title then done") if ok else (0.0, f"notes.md lines: {lines[:5]}")


CASES = [
    Case(
        id="create-greeting",
        input="Create a file hello.txt whose only content is: Hello, exam hall!",
        judges=[judges.file_equals("hello.txt", "Hello, exam hall!")],
        scripts={
            "solution": [
                faux.call("write", path="hello.txt", content="Hello, exam hall!\n"),
                faux.text("I created hello.txt with the greeting."),
            ],
            "idle": IDLE,
        },
    ),
    Case(
        id="fix-config",
        input="In config.ini, turn debug off (debug = false). Keep every other setting.",
        files={"config.ini": "[app]\nname = demo\ndebug = true\nport = 8080\n"},
        judges=[
            judges.file_contains("config.ini", "debug = false"),
            config_keeps_other_settings,
        ],
        scripts={
            "solution": [
                faux.call("read", path="config.ini"),
                faux.call(
                    "edit", path="config.ini", old_text="debug = true", new_text="debug = false"
                ),
                faux.text("debug is now false in config.ini."),
            ],
            "idle": IDLE,
        },
    ),
    Case(
        id="count-lines",
        input="Count the non-empty lines of data/words.txt and write the number to count.txt.",
        files={"data/words.txt": "\n".join(WORDS) + "\n"},
        judges=[judges.file_equals("count.txt", str(len(WORDS)))],
        scripts={
            "solution": [
                faux.call("read", path="data/words.txt"),
                _write_count,
                faux.text("count.txt holds the line count."),
            ],
            "idle": IDLE,
        },
    ),
    Case(
        id="notes-in-steps",
        input=["Create notes.md whose first line is '# Notes'.", "Now add a last line: done"],
        judges=[notes_in_order],
        scripts={
            "solution": [
                faux.call("write", path="notes.md", content="# Notes\n"),
                faux.text("Created notes.md."),
                faux.call(
                    "edit", path="notes.md", old_text="# Notes\n", new_text="# Notes\ndone\n"
                ),
                faux.text("Added the last line."),
            ],
            "idle": [*IDLE, *IDLE],
        },
    ),
]

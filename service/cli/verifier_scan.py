"""What check-tasks warns about in a task's tests/test.sh: what the agent controls that the
verifier runs as root.

Two things: a file of the agent's workspace that the script executes, sources or hands to an
interpreter, and git run on the agent's repository, which runs whatever that repository's
configuration names (core.fsmonitor on `status`, hooks, core.pager, diff.external, filter
drivers). Either lets the agent run code as root after its turn and write its own reward. A
heuristic: a word-level reading of each line, which misses indirection (variables, cd, eval)
and may flag a file the task made, neither complete nor proof.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

# Where an agent's files are when the task names no WORKDIR: Harbor's and examhall's.
WORKSPACES = ("/app", "/workspace")
_RUNNERS = {
    "bash",
    "sh",
    "dash",
    "zsh",
    "source",
    ".",
    "exec",
    "python",
    "python3",
    "node",
    "perl",
    "ruby",
}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)", re.MULTILINE | re.IGNORECASE)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_KEYWORDS = ("then", "else", "do", "if", "while", "until", "!", "{", "(")
# Modules `python -m` runs that are the test tools' own, not the agent's: with the standard
# library's, the rest are taken as the agent's package, found on the working directory.
_TOOL_MODULES = frozenset(
    {"pytest", "pip", "uv", "coverage", "tox", "nose2", "mypy", "ruff", "black", "pylint"}
)
# A command substitution, `$(...)` or `...`, whose command runs as well (one level deep).
_SUBSTITUTION = re.compile(r"\$\(([^()]*)\)|`([^`]*)`")


def task_workdirs(task_dir: Path) -> set[str]:
    """The working directories a task's agent may write: its Dockerfile's WORKDIRs, and
    the usual workspaces."""
    found = set(WORKSPACES)
    dockerfile = task_dir / "environment" / "Dockerfile"
    if dockerfile.is_file():
        text = dockerfile.read_text("utf-8", "replace")
        found.update(m.rstrip("/") for m in _WORKDIR.findall(text))
    return found


def _commands(script: str) -> Iterator[tuple[int, str, list[str], list[str]]]:
    """Each simple command of the script: its line's number and text, the variables it
    sets before its words, and its words (here-document bodies, redirections, `if`-like
    keywords and a function's `name() {` left out)."""
    delimiter: str | None = None
    continued: tuple[int, str] | None = None  # a line ending in `\`, and its number
    for number, raw in enumerate(script.splitlines(), start=1):
        if delimiter is not None:
            # A here-document's body is a program's input (`python3 - <<'PY'`), not lines
            # of the script.
            if raw.strip() == delimiter:
                delimiter = None
            continue
        line = raw.split(" #", 1)[0].strip()
        if continued is not None:
            number, line = continued[0], f"{continued[1]} {line}"
            raw = line
            continued = None
        if line.endswith("\\"):
            continued = (number, line[:-1].strip())
            continue
        if not line or line.startswith("#"):
            continue
        if heredoc := _HEREDOC.search(line):
            delimiter = heredoc.group(2)
        inner = [a or b for a, b in _SUBSTITUTION.findall(line)]
        outer = _SUBSTITUTION.sub(" ", line)
        for command in re.split(r"&&|\|\||;|\|", "; ".join([outer, *inner])):
            try:
                words = shlex.split(command)
            except ValueError:
                words = command.split()
            # Redirections are no operands: `python3 - <<'PY'` runs what its heredoc says.
            words = [w for w in words if not re.match(r"^\d*[<>]", w)]
            if len(words) >= 2 and words[0].endswith("()") and words[1] == "{":
                words = words[2:]  # `git_app() { git ...`: the function's body
            while words and words[0] in _KEYWORDS:
                words = words[1:]
            # `reward=/logs/verifier/reward.txt` sets a variable; what follows such words, if
            # anything, is the command.
            assigned = []
            while words and _ASSIGNMENT.match(words[0]):
                assigned.append(words.pop(0))
            if words:
                yield number, raw.strip(), assigned, words


def runs_agent_files(script: str, workdirs: set[str]) -> list[str]:
    """Lines of a test.sh that look as if they run a file the agent can write: a path under
    `workdirs`, or a relative one (the script starts in the working directory), executed,
    sourced or given to an interpreter."""
    found: list[str] = []
    for number, raw, _, words in _commands(script):
        target = None
        if words[0] in _RUNNERS:
            if "-m" in words[1:]:
                # `python3 -m NAME` from the working directory runs the agent's package, unless
                # NAME is the standard library's or a test tool's.
                module = next(iter(words[words.index("-m") + 1 :]), "").split(".")[0]
                if module and module not in sys.stdlib_module_names | _TOOL_MODULES:
                    _add(found, number, raw)
                continue
            # The first operand that is not an option.
            rest = [w for w in words[1:] if not w.startswith("-")]
            if "-c" in words[1:] or not rest:
                continue
            target = rest[0]
        elif "/" in words[0]:
            target = words[0]  # an executed path
        if target is not None and _in_workspace(target, workdirs):
            _add(found, number, raw)
    return found


def runs_git(script: str, workdirs: set[str]) -> list[str]:
    """Lines of a test.sh that run git on a repository the agent can write: in the working
    directory, or `-C` one under `workdirs`, without a `--git-dir` (or GIT_DIR) of the
    verifier's own, whose configuration is then the repository's."""
    found: list[str] = []
    for number, raw, assigned, words in _commands(script):
        if words[0] != "git":
            continue
        options = _git_options(words[1:])
        git_dir = options.get("--git-dir") or next(
            (a.split("=", 1)[1] for a in assigned if a.startswith("GIT_DIR=")), None
        )
        if git_dir is not None:
            if _in_workspace(git_dir, workdirs):
                _add(found, number, raw)
            continue
        where = options.get("-C", ".")
        if _in_workspace(where, workdirs):
            _add(found, number, raw)
    return found


def _git_options(words: list[str]) -> dict[str, str]:
    """git's own options before its subcommand: -C DIR, --git-dir[=]DIR, -c NAME=VALUE."""
    options: dict[str, str] = {}
    rest = iter(words)
    for word in rest:
        if word in ("-C", "--git-dir", "-c", "--work-tree"):
            options[word] = next(rest, "")
        elif word.startswith("--git-dir="):
            options["--git-dir"] = word.split("=", 1)[1]
        elif not word.startswith("-"):
            break  # the subcommand
    return options


def _add(found: list[str], number: int, raw: str) -> None:
    entry = f"line {number}: {raw}"
    if entry not in found:
        found.append(entry)


def _in_workspace(path: str, workdirs: set[str]) -> bool:
    if path.startswith(("$", "~", "/tests/", "/logs/", "/solution/")):
        return False
    if not path.startswith("/"):
        return True  # relative: the script runs in the task's working directory
    return any(path == w or path.startswith(f"{w}/") for w in workdirs)


def workspace_findings(suite_dir: Path) -> dict[str, list[str]]:
    """Task directory name -> a warning for each line of its test.sh that seems to run the
    agent's files or git on its repository ("" for a directory that is one task itself)."""
    tasks = (
        [suite_dir]
        if (suite_dir / "tests" / "test.sh").is_file()
        else sorted(d for d in suite_dir.iterdir() if (d / "tests" / "test.sh").is_file())
    )
    found: dict[str, list[str]] = {}
    for task in tasks:
        script = (task / "tests" / "test.sh").read_text("utf-8", "replace")
        workdirs = task_workdirs(task)
        warnings = found.setdefault("" if task == suite_dir else task.name, [])
        for line in runs_agent_files(script, workdirs):
            warnings.append(
                f"warning: {task.name}: tests/test.sh runs a file in the agent's workspace as "
                f"root ({line}); the agent can write the reward. Run only files from /tests "
                f"(a heuristic scan of the script's text; check it by reading the script)"
            )
        for line in runs_git(script, workdirs):
            warnings.append(
                f"warning: {task.name}: tests/test.sh runs git on the agent's repository as "
                f"root ({line}); git runs what that repository's configuration names "
                "(core.fsmonitor, hooks, core.pager, diff.external, filters), so the agent "
                "can run code as root and write the reward. Read a copy of .git with a "
                "configuration of your own (--git-dir; evals/harbor_demo/git-commit's "
                "tests/test.sh does) (a heuristic scan of the script's text)"
            )
        if not warnings:
            del found["" if task == suite_dir else task.name]
    return found


def workspace_warnings(suite_dir: Path) -> list[str]:
    """A warning for each task of a directory whose test.sh seems to run what its agent
    controls."""
    return [w for warnings in workspace_findings(suite_dir).values() for w in warnings]

"""Judges that read facts fresh from the workspace after the agent has stopped."""

from __future__ import annotations

import os

from sandbox.suite import AgentRun, Judge


def file_equals(path: str, expected: str, *, strip: bool = True) -> Judge:
    def check(run: AgentRun) -> tuple[float, str]:
        actual = run.read_file(path)
        if actual is None:
            return 0.0, f"{path} does not exist"
        same = actual.strip() == expected.strip() if strip else actual == expected
        return (1.0, f"{path} matches") if same else (0.0, f"{path} differs: {actual[:200]!r}")

    return Judge(name=f"file_equals({path})", fn=check)


def file_contains(path: str, *needles: str) -> Judge:
    """Scores the share of needles found in the file."""

    def check(run: AgentRun) -> tuple[float, str]:
        actual = run.read_file(path)
        if actual is None:
            return 0.0, f"{path} does not exist"
        missing = [n for n in needles if n not in actual]
        found = len(needles) - len(missing)
        return found / len(needles), (f"missing {missing}" if missing else "all found")

    return Judge(name=f"file_contains({path})", fn=check)


def file_absent(path: str) -> Judge:
    def check(run: AgentRun) -> tuple[float, str]:
        # lexists: a dangling symlink left in its place is still there, and a link's target
        # (perhaps outside the workspace) is not the judge's business.
        exists = os.path.lexists(run.workspace / path)
        return (0.0, f"{path} still exists") if exists else (1.0, f"{path} is gone")

    return Judge(name=f"file_absent({path})", fn=check)


def final_text_contains(needle: str, *, case_sensitive: bool = False) -> Judge:
    def check(run: AgentRun) -> tuple[float, str]:
        haystack, want = run.final_text, needle
        if not case_sensitive:
            haystack, want = haystack.lower(), want.lower()
        return (1.0, "found") if want in haystack else (0.0, f"{needle!r} not in the answer")

    return Judge(name=f"final_text_contains({needle})", fn=check)

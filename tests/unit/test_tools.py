"""The agent's tools, on a real filesystem and with real subprocesses."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.protocol import SANDBOX_GID, SANDBOX_UID
from sandbox.tools import DEFAULT_TOOLS, OPTIONAL_TOOLS, TOOLS, beneath, files, select_tools
from sandbox.tools.base import ToolContext, ToolError
from sandbox.tools.bash import kill_strays

SECRET = "TOP SECRET outside the workspace\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text(SECRET)
    return directory


@pytest.fixture
def ctx(tmp_path: Path, outside: Path) -> ToolContext:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "link_file").symlink_to(outside / "secret.txt")
    (workspace / "link_dir").symlink_to(outside)
    return ToolContext(
        workspace=workspace,
        timeout_s=5.0,
        output_limit=100_000,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "ONLY_THIS": "yes"},
    )


def run(name: str, ctx: ToolContext, **args: Any) -> str:
    return TOOLS[name].run(args, ctx)


def error_of(name: str, ctx: ToolContext, **args: Any) -> str:
    with pytest.raises(ToolError) as caught:
        run(name, ctx, **args)
    return str(caught.value)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ----- registry ------------------------------------------------------------------------


def test_registry_has_all_seven_tools_with_object_schemas() -> None:
    assert set(TOOLS) == set(DEFAULT_TOOLS) | set(OPTIONAL_TOOLS)
    assert len(TOOLS) == 7
    for name, tool in TOOLS.items():
        assert tool.name == name
        assert tool.description
        assert tool.parameters["type"] == "object"
        assert set(tool.parameters.get("required", [])) <= set(tool.parameters["properties"])


def test_select_tools_keeps_order_and_drops_duplicates() -> None:
    tools = select_tools(["bash", "read", "bash"])
    assert [tool.name for tool in tools] == ["bash", "read"]


def test_select_tools_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match=r"Unknown tool 'shell'; known tools: read, write"):
        select_tools(["read", "shell"])


# ----- read ----------------------------------------------------------------------------


def test_read_returns_the_file_text(ctx: ToolContext) -> None:
    (ctx.workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    assert run("read", ctx, path="notes.txt") == "one\ntwo\nthree\n"
    assert run("read", ctx, path=str(ctx.workspace / "notes.txt")) == "one\ntwo\nthree\n"


def test_read_offset_and_limit_say_where_to_continue(ctx: ToolContext) -> None:
    (ctx.workspace / "notes.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    assert run("read", ctx, path="notes.txt", offset=3, limit=2) == (
        "line 3\nline 4\n[showing lines 3-4 of 10; use offset=5 to read more]"
    )
    assert run("read", ctx, path="notes.txt", offset=10) == "line 10\n"


def test_read_stops_at_the_output_limit_on_a_line_boundary(ctx: ToolContext) -> None:
    small = dataclasses.replace(ctx, output_limit=100)
    (ctx.workspace / "big.txt").write_text("".join(f"{i:09d}\n" for i in range(1000)))
    out = run("read", small, path="big.txt")
    assert out.startswith("000000000\n")
    assert out.endswith("[showing lines 1-10 of 1000; use offset=11 to read more]")


def test_read_errors_are_clear(ctx: ToolContext) -> None:
    (ctx.workspace / "sub").mkdir()
    (ctx.workspace / "three.txt").write_text("a\nb\nc\n")
    assert error_of("read", ctx, path="missing.txt").startswith("File not found: missing.txt")
    assert "sub is a directory" in error_of("read", ctx, path="sub")
    assert "past the end of three.txt, which has 3 lines" in error_of(
        "read", ctx, path="three.txt", offset=4
    )
    (ctx.workspace / "empty.txt").write_text("")
    assert run("read", ctx, path="empty.txt") == "(empty file)"


# ----- write ---------------------------------------------------------------------------


def test_write_creates_private_parents_and_file(ctx: ToolContext) -> None:
    out = run("write", ctx, path="a/b/hello.txt", content="héllo\n")
    target = ctx.workspace / "a" / "b" / "hello.txt"
    assert out == "Wrote 7 bytes to a/b/hello.txt"
    assert target.read_text() == "héllo\n"
    assert mode_of(target) == 0o600
    assert mode_of(ctx.workspace / "a") == 0o700
    assert mode_of(ctx.workspace / "a" / "b") == 0o700


def test_write_replaces_content_and_keeps_an_existing_mode(ctx: ToolContext) -> None:
    script = ctx.workspace / "run.sh"
    script.write_text("old old old\n")
    script.chmod(0o755)
    run("write", ctx, path="run.sh", content="new\n")
    assert script.read_text() == "new\n"
    assert mode_of(script) == 0o755


def test_write_refuses_directories(ctx: ToolContext) -> None:
    (ctx.workspace / "sub").mkdir()
    (ctx.workspace / "plain").write_text("x")
    assert "sub is a directory" in error_of("write", ctx, path="sub", content="x")
    assert "plain is a file, not a directory" in error_of(
        "write", ctx, path="plain/inner.txt", content="x"
    )


# ----- edit ----------------------------------------------------------------------------


def test_edit_replaces_the_single_occurrence(ctx: ToolContext) -> None:
    target = ctx.workspace / "code.py"
    target.write_text("def f():\n    return 1\n")
    target.chmod(0o640)
    out = run("edit", ctx, path="code.py", old_text="return 1", new_text="return 2")
    assert out == "Edited code.py: replaced 1 occurrence at line 2."
    assert target.read_text() == "def f():\n    return 2\n"
    assert mode_of(target) == 0o640


def test_edit_refuses_missing_and_repeated_text(ctx: ToolContext) -> None:
    target = ctx.workspace / "code.py"
    target.write_text("x = 1\nx = 1\nx = 1\n")
    assert error_of("edit", ctx, path="code.py", old_text="y = 2", new_text="z").startswith(
        "old_text not found in code.py"
    )
    message = error_of("edit", ctx, path="code.py", old_text="x = 1", new_text="x = 2")
    assert "occurs 3 times in code.py" in message
    assert "Add surrounding lines" in message
    assert target.read_text() == "x = 1\nx = 1\nx = 1\n"


# ----- ls ------------------------------------------------------------------------------


def test_ls_lists_sorted_with_directory_slashes(ctx: ToolContext) -> None:
    (ctx.workspace / "b.txt").write_text("")
    (ctx.workspace / "a_dir").mkdir()
    (ctx.workspace / ".hidden").write_text("")
    (ctx.workspace / "a_dir" / "inner.txt").write_text("")
    assert run("ls", ctx).splitlines() == [
        ".hidden",
        "a_dir/",
        "b.txt",
        "link_dir/",
        "link_file",
    ]
    assert run("ls", ctx, path="a_dir") == "inner.txt"
    (ctx.workspace / "empty").mkdir()
    assert run("ls", ctx, path="empty") == "(empty directory)"
    assert "b.txt is a file" in error_of("ls", ctx, path="b.txt")
    assert error_of("ls", ctx, path="nope").startswith("Directory not found: nope")


# ----- find ----------------------------------------------------------------------------


def test_find_matches_names_at_any_depth_and_paths_with_globstar(ctx: ToolContext) -> None:
    for relative in ("top.py", "src/a.py", "src/deep/b.py", "src/readme.md", "docs/x.md"):
        path = ctx.workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    assert run("find", ctx, pattern="*.py").splitlines() == [
        "src/a.py",
        "src/deep/b.py",
        "top.py",
    ]
    assert run("find", ctx, pattern="**/*.md").splitlines() == ["docs/x.md", "src/readme.md"]
    assert run("find", ctx, pattern="src/*.py").splitlines() == ["src/a.py"]
    assert run("find", ctx, pattern="*.py", path="src/deep") == "src/deep/b.py"
    assert run("find", ctx, pattern="dee[p]").splitlines() == ["src/deep/"]
    assert run("find", ctx, pattern="*.rs") == "No paths match '*.rs' under .."


def test_find_lists_but_does_not_enter_symlinked_directories(ctx: ToolContext) -> None:
    assert run("find", ctx, pattern="*").splitlines() == ["link_dir/", "link_file"]
    assert "No paths match" in run("find", ctx, pattern="secret.txt")


def test_find_caps_the_number_of_results(ctx: ToolContext) -> None:
    many = ctx.workspace / "many"
    many.mkdir()
    for i in range(1005):
        (many / f"f{i:04d}.txt").write_text("")
    lines = run("find", ctx, pattern="*.txt").splitlines()
    assert len(lines) == 1001
    assert lines[0] == "many/f0000.txt"
    assert lines[999] == "many/f0999.txt"
    assert lines[1000].startswith("[5 more matches not shown;")


# ----- grep ----------------------------------------------------------------------------


def test_grep_reports_path_line_number_and_line(ctx: ToolContext) -> None:
    (ctx.workspace / "src").mkdir()
    (ctx.workspace / "src" / "a.py").write_text("import os\nTODO: fix\nok\n")
    (ctx.workspace / "notes.md").write_text("todo later\n")
    assert run("grep", ctx, pattern=r"TODO\b").splitlines() == ["src/a.py:2:TODO: fix"]
    assert run("grep", ctx, pattern="todo", ignore_case=True).splitlines() == [
        "notes.md:1:todo later",
        "src/a.py:2:TODO: fix",
    ]
    assert run("grep", ctx, pattern="todo", ignore_case=True, glob="*.md") == (
        "notes.md:1:todo later"
    )
    assert run("grep", ctx, pattern="^import", path="src/a.py") == "src/a.py:1:import os"
    assert run("grep", ctx, pattern="absent") == "No matches for 'absent' under .."


def test_grep_rejects_a_bad_regex(ctx: ToolContext) -> None:
    message = error_of("grep", ctx, pattern="foo(")
    assert message.startswith("Invalid regular expression 'foo(': missing ),")


def test_grep_skips_binary_files_and_symlinks(ctx: ToolContext) -> None:
    (ctx.workspace / "blob.bin").write_bytes(b"needle\0\x01\x02")
    (ctx.workspace / "text.txt").write_text("a needle here\n")
    assert run("grep", ctx, pattern="needle") == "text.txt:1:a needle here"
    # link_file points at the secret outside the workspace.
    assert run("grep", ctx, pattern="SECRET") == "No matches for 'SECRET' under .."


def test_grep_caps_the_number_of_matches(ctx: ToolContext) -> None:
    (ctx.workspace / "log.txt").write_text("hit\n" * 1100)
    lines = run("grep", ctx, pattern="hit").splitlines()
    assert len(lines) == 1001
    assert lines[999] == "log.txt:1000:hit"
    assert lines[1000].startswith("[search stopped after 1000 matching lines")


# ----- confinement and arguments -------------------------------------------------------

ESCAPES = (
    "../outside/secret.txt",
    "../outside",
    "/etc/passwd",
    "OUTSIDE_ABSOLUTE",
    "link_file",
    "link_dir",
    "link_dir/secret.txt",
    "sub/../../outside/secret.txt",
)


def _args_for(name: str, path: str) -> dict[str, Any]:
    extra: dict[str, dict[str, Any]] = {
        "read": {},
        "write": {"content": "overwritten"},
        "edit": {"old_text": "TOP", "new_text": "NOT"},
        "ls": {},
        "find": {"pattern": "*"},
        "grep": {"pattern": "SECRET"},
    }
    return {"path": path, **extra[name]}


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize("name", DEFAULT_TOOLS)
def test_no_path_tool_reaches_outside_the_workspace(
    ctx: ToolContext, outside: Path, name: str, path: str
) -> None:
    if path == "OUTSIDE_ABSOLUTE":
        path = str(outside / "secret.txt")
    message = error_of(name, ctx, **_args_for(name, path))
    assert message == f"Path escapes the workspace: {path}"
    assert (outside / "secret.txt").read_text() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("read", {}, "Missing required argument 'path'"),
        ("read", {"path": 3}, "Argument 'path' must be a string, not a number"),
        ("read", {"path": "f", "offset": "2"}, "Argument 'offset' must be an integer"),
        ("read", {"path": "f", "limit": True}, "Argument 'limit' must be an integer"),
        ("read", {"path": "f", "offset": 0}, "Argument 'offset' must be at least 1"),
        ("write", {"path": "f"}, "Missing required argument 'content'"),
        ("write", {"path": "f", "content": ["x"]}, "Argument 'content' must be a string"),
        ("edit", {"path": "f", "old_text": "", "new_text": "x"}, "'old_text' must not be empty"),
        ("ls", {"path": ""}, "Argument 'path' must not be empty"),
        ("find", {}, "Missing required argument 'pattern'"),
        ("find", {"pattern": "/etc/*"}, "Argument 'pattern' must be relative"),
        ("grep", {"pattern": "x", "ignore_case": "yes"}, "'ignore_case' must be true or false"),
        ("grep", {"pattern": "x", "glob": 5}, "Argument 'glob' must be a string"),
        ("bash", {}, "Missing required argument 'command'"),
        ("bash", {"command": "true", "timeout": "5"}, "Argument 'timeout' must be a number"),
        ("bash", {"command": "true", "timeout": -1}, "'timeout' must be greater than 0"),
    ],
)
def test_bad_arguments_are_tool_errors_naming_the_argument(
    ctx: ToolContext, name: str, args: dict[str, Any], expected: str
) -> None:
    (ctx.workspace / "f").write_text("content\n")
    with pytest.raises(ToolError) as caught:
        TOOLS[name].run(args, ctx)
    assert expected in str(caught.value)


def test_arguments_that_are_not_an_object_are_a_tool_error(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="must be a JSON object"):
        TOOLS["read"].run(["path"], ctx)  # type: ignore[arg-type]


# ----- bash ----------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether `pid` still runs code; a zombie waiting for init to reap it does not."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat_line.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _live_group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


@pytest.fixture
def strays() -> Iterator[list[int]]:
    """Pids a test started in the background, killed afterwards whatever happens."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_bash_merges_output_and_reports_the_exit_code(ctx: ToolContext) -> None:
    out = run("bash", ctx, command="echo out; echo err >&2; exit 3")
    assert out == "out\nerr\n[exit code 3]"
    assert run("bash", ctx, command="true") == "(no output)"
    assert run("bash", ctx, command="printf hi") == "hi"


def test_bash_runs_in_the_workspace(ctx: ToolContext) -> None:
    assert run("bash", ctx, command="pwd; echo made > made.txt") == f"{ctx.workspace}\n"
    assert (ctx.workspace / "made.txt").read_text() == "made\n"


def test_bash_caps_a_megabyte_of_output_without_blocking(ctx: ToolContext) -> None:
    small = dataclasses.replace(ctx, output_limit=10_000)
    started = time.monotonic()
    out = run("bash", small, command="head -c 1048576 /dev/zero | tr '\\0' x; exit 4")
    assert time.monotonic() - started < 2
    assert out.startswith("x" * 10_000 + "\n[output truncated: 1038576 of 1048576 bytes")
    assert out.endswith("[exit code 4]")
    assert len(out) < 10_300


def test_bash_timeout_kills_the_whole_process_group(ctx: ToolContext) -> None:
    command = (
        "echo $$ > leader; echo before; "
        "sleep 1000 & echo $! > pids; "
        "(sleep 1000 & echo $! >> pids; wait) & "
        "wait"
    )
    started = time.monotonic()
    message = error_of("bash", ctx, command=command, timeout=0.5)
    assert time.monotonic() - started < 2.5
    assert message == "before\n[command timed out after 0.5s; its process group was killed]"
    leader = int((ctx.workspace / "leader").read_text())
    pids = [int(line) for line in (ctx.workspace / "pids").read_text().split()]
    assert len(pids) == 2
    assert not any(_alive(pid) for pid in [leader, *pids])
    assert _live_group_members(leader) == []


def test_bash_timeout_is_capped_by_the_context(ctx: ToolContext) -> None:
    quick = dataclasses.replace(ctx, timeout_s=0.3)
    started = time.monotonic()
    message = error_of("bash", quick, command="sleep 1000", timeout=100)
    assert time.monotonic() - started < 2
    assert message == "[command timed out after 0.3s; its process group was killed]"


def test_bash_returns_when_the_shell_exits_despite_a_background_child(
    ctx: ToolContext, strays: list[int]
) -> None:
    started = time.monotonic()
    out = run("bash", ctx, command="sleep 1000 & echo $!")
    assert time.monotonic() - started < 1
    strays.append(int(out))


def test_bash_has_no_terminal_and_its_own_session(ctx: ToolContext) -> None:
    command = (
        "tty; [ -t 0 ] && echo stdin-is-tty || echo stdin-not-tty; "
        "if (exec </dev/tty) 2>/dev/null; then echo ctty; else echo no-ctty; fi; "
        "echo $$; cut -d' ' -f5,6 /proc/$$/stat"
    )
    lines = run("bash", ctx, command=command).splitlines()
    assert lines[:3] == ["not a tty", "stdin-not-tty", "no-ctty"]
    shell = lines[3]
    assert lines[4] == f"{shell} {shell}"  # process group and session both led by the shell


def test_bash_sees_only_the_context_environment(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXAMHALL_TEST_LEAK", "leaked")
    out = run("bash", ctx, command="env")
    names = {line.split("=", 1)[0] for line in out.splitlines()}
    # bash itself adds PWD, SHLVL and _ (env's own path).
    assert names == set(ctx.env) | {"PWD", "SHLVL", "_"}
    assert "ONLY_THIS=yes" in out.splitlines()
    assert "leaked" not in out


def test_bash_volunteers_for_the_oom_killer(ctx: ToolContext) -> None:
    assert run("bash", ctx, command="cat /proc/self/oom_score_adj") == "1000\n"


def _pids_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text() if entry.name.isdigit() else ""
        except (FileNotFoundError, ProcessLookupError):
            continue
        for line in status.splitlines():
            if line.startswith("Uid:") and int(line.split()[1]) == uid:
                pids.append(int(entry.name))
    return pids


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become a throwaway user")
def test_kill_strays_kills_the_users_processes_but_not_the_caller() -> None:
    assert _pids_of_uid(SANDBOX_UID) == [], "kill_strays would hit processes already running"
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID)
            os.setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
            # Its own session, like a `setsid` escapee: no process-group kill reaches it.
            victim = subprocess.Popen(["sleep", "1000"], start_new_session=True)
            kill_strays()
            victim.wait(timeout=5)
            os.write(write_end, str(victim.returncode).encode())
            status = 0
        except BaseException as exc:
            os.write(write_end, repr(exc).encode())
        finally:
            os._exit(status)
    os.close(write_end)
    _, wait_status = os.waitpid(child, 0)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read().decode()
    assert os.waitstatus_to_exitcode(wait_status) == 0, report  # the caller survived
    assert report == "-9"  # and the victim was SIGKILLed


# ----- symlinks swapped in after the check ----------------------------------------------
# A background process of the agent can turn a directory into a symlink between the tool's
# path check and its open. These tests make that race deterministic: the check runs, then
# the swap, then the open. Both ways of opening beneath the workspace are tested: openat2,
# and the component-by-component walk used where the kernel has no openat2.


@pytest.fixture(params=["openat2", "walk"])
def beneath_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    mode: str = request.param
    monkeypatch.setattr(beneath, "openat2_available", False if mode == "walk" else None)
    if mode == "openat2":
        os.close(beneath.open_beneath(Path("/"), ".", os.O_RDONLY | os.O_DIRECTORY))
        if beneath.openat2_available is not True:
            pytest.skip("this kernel has no openat2")
    return mode


@pytest.fixture
def swapped(ctx: ToolContext, outside: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ws/sub holds its own secret.txt, until each path check is followed by the swap of
    ws/sub for a symlink to the directory outside."""
    sub = ctx.workspace / "sub"
    sub.mkdir()
    (sub / "secret.txt").write_text("inside\n")
    checked = files.resolve_in_workspace

    def check_then_swap(workspace: Path, path: object) -> Path:
        resolved = checked(workspace, path)
        if not sub.is_symlink():
            shutil.rmtree(sub)
            sub.symlink_to(outside)
        return resolved

    monkeypatch.setattr(files, "resolve_in_workspace", check_then_swap)
    return sub


RACED = [
    ("read", {"path": "sub/secret.txt"}),
    ("write", {"path": "sub/secret.txt", "content": "overwritten"}),
    ("write", {"path": "sub/new.txt", "content": "planted"}),
    ("write", {"path": "sub/deeper/new.txt", "content": "planted"}),
    ("edit", {"path": "sub/secret.txt", "old_text": "TOP", "new_text": "NOT"}),
    ("ls", {"path": "sub"}),
    ("find", {"path": "sub", "pattern": "*"}),
    ("grep", {"path": "sub", "pattern": "SECRET"}),
]


@pytest.mark.parametrize(("name", "args"), RACED, ids=[f"{n}-{a['path']}" for n, a in RACED])
def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    ctx: ToolContext,
    outside: Path,
    swapped: Path,
    beneath_mode: str,
    name: str,
    args: dict[str, Any],
) -> None:
    message = error_of(name, ctx, **args)
    assert "a symlink appeared on its path" in message
    assert SECRET.strip() not in message
    assert (outside / "secret.txt").read_text() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_grep_of_a_swapped_file_shows_nothing_behind_it(
    ctx: ToolContext, swapped: Path, beneath_mode: str
) -> None:
    assert run("grep", ctx, path="sub/secret.txt", pattern="SECRET").startswith("No matches")


def test_symlinks_inside_the_workspace_still_work(ctx: ToolContext, beneath_mode: str) -> None:
    """A link that stays inside is resolved at the check, so the open meets no symlink."""
    (ctx.workspace / "real" / "deep").mkdir(parents=True)
    (ctx.workspace / "real" / "deep" / "f.txt").write_text("hello\n")
    (ctx.workspace / "alias").symlink_to("real")
    assert run("read", ctx, path="alias/deep/f.txt") == "hello\n"
    assert run("write", ctx, path="alias/deep/new/g.txt", content="x") == (
        "Wrote 1 bytes to real/deep/new/g.txt"
    )
    assert mode_of(ctx.workspace / "real" / "deep" / "new") == 0o700
    assert run("ls", ctx, path="alias/deep").splitlines() == ["f.txt", "new/"]
    assert run("grep", ctx, path="alias", pattern="hello") == "real/deep/f.txt:1:hello"


@pytest.mark.parametrize("relative", ["link_dir/secret.txt", "../outside/secret.txt", "/etc"])
def test_open_beneath_refuses_every_way_out(
    ctx: ToolContext, beneath_mode: str, relative: str
) -> None:
    with pytest.raises(OSError) as caught:
        beneath.open_beneath(ctx.workspace, relative, os.O_RDONLY)
    assert caught.value.errno in (errno.ELOOP, errno.EXDEV)
    with pytest.raises(OSError) as made:
        beneath.makedirs_beneath(ctx.workspace, "link_dir/new")
    assert made.value.errno == errno.ELOOP

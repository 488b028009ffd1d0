"""The worker's own seccomp filter: compiled from sandbox/seccomp.json and run for real.

Each check runs in a fresh Python process, once after `confine_self()` and once without it
(the control): what the filter refused is what the kernel answers differently there.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox import credentials
from sandbox.confine import SELF_CONFINE_ENV
from sandbox.seccomp_filter import (
    ARCHES,
    BPF_MAXINSNS,
    ProfileError,
    compile_profile,
    load_profile,
)
from sandbox.syscalls import aarch64, generate, x86_64

ROOT = Path(__file__).resolve().parents[2]
on_x86_64 = pytest.mark.skipif(
    os.uname().machine != "x86_64", reason="the raw syscall numbers below are x86_64's"
)

# Raw calls through libc's syscall(): each prints "ok" or the errno's name. x86_64 numbers.
_CALLS = r"""
import ctypes, errno, json, os, sys
if sys.argv[1] == "confined":
    from sandbox.confine import confine_self
    confine_self()
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
results = {}

def call(name, nr, *args):
    r = libc.syscall(L(nr), *[L(a) if isinstance(a, int) else a for a in args])
    if r == 0 and name.startswith("clone"):
        os._exit(0)  # a clone that worked: this is its child
    if r >= 0 and name.startswith("clone"):
        os.waitpid(r, 0)
    results[name] = "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]

pair = (ctypes.c_int * 2)()
call("socket_inet", 41, 2, 1, 0)
call("socket_vsock", 41, 40, 1, 0)
call("socketpair_unix", 53, 1, 1, 0, pair)
call("socketpair_inet", 53, 2, 1, 0, pair)
call("clone_newuser", 56, 0x10000000 | 17, 0, 0, 0, 0)
call("clone3", 435, 0, 0)
call("io_uring_setup", 425, 1, 0)
call("keyctl", 250, 0, 0)
call("unshare", 272, 0x10000000)
call("mount", 165, 0, 0, 0, 0, 0)
call("personality_query", 135, 0xFFFFFFFF)
call("personality_read_implies_exec", 135, 0x0400000)
call("afs_syscall", 183)
pid = os.fork()
if pid == 0:
    os._exit(7)
results["fork"] = "ok" if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7 else "lost"
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines())
results["NoNewPrivs"] = status["NoNewPrivs"]
results["Seccomp"] = status["Seccomp"]
print(json.dumps(results))
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    # The unit tests' own environment may carry the variable in no case: it is the backend's.
    env = {k: v for k, v in os.environ.items() if k != SELF_CONFINE_ENV}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60
    )


def _calls(mode: str) -> dict[str, str]:
    done = _python(_CALLS, mode)
    assert done.returncode == 0, done.stderr
    results: dict[str, str] = json.loads(done.stdout)
    return results


@pytest.fixture(scope="module")
def confined() -> dict[str, str]:
    return _calls("confined")


@pytest.fixture(scope="module")
def unconfined() -> dict[str, str]:
    return _calls("unconfined")


@on_x86_64
def test_confine_self_sets_no_new_privs_and_a_seccomp_filter(
    confined: dict[str, str], unconfined: dict[str, str]
) -> None:
    assert (confined["NoNewPrivs"], confined["Seccomp"]) == ("1", "2")
    assert unconfined["Seccomp"] == "0"  # the control ran without any filter


@on_x86_64
@pytest.mark.parametrize(
    ("call", "errno_name"),
    [
        ("socket_vsock", "EPERM"),
        ("socketpair_inet", "EPERM"),
        ("clone_newuser", "EPERM"),
        ("clone3", "ENOSYS"),
        ("io_uring_setup", "EPERM"),
        ("keyctl", "EPERM"),
        ("unshare", "EPERM"),
        ("mount", "EPERM"),
        ("personality_read_implies_exec", "EPERM"),
        # Not named in the profile: the default action's errno.
        ("afs_syscall", "EPERM"),
    ],
)
def test_the_filter_refuses(
    confined: dict[str, str], unconfined: dict[str, str], call: str, errno_name: str
) -> None:
    assert confined[call] == errno_name
    # Without the filter the kernel answers otherwise (or the call works): the filter refused.
    # (mount may be refused for want of privilege as well, depending on who runs the tests.)
    if call != "mount":
        assert unconfined[call] != errno_name, (call, unconfined[call])


@on_x86_64
@pytest.mark.parametrize("call", ["socket_inet", "socketpair_unix", "personality_query", "fork"])
def test_the_filter_allows(confined: dict[str, str], call: str) -> None:
    assert confined[call] == "ok"


@on_x86_64
def test_x32_and_foreign_arch_calls_kill_the_process() -> None:
    code = (
        "import ctypes\n"
        "from sandbox.confine import confine_self\n"
        "confine_self()\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('getpid', libc.syscall(ctypes.c_long(39)), flush=True)\n"
        "libc.syscall(ctypes.c_long(39 | 0x40000000))  # x32's getpid\n"
        "print('survived', flush=True)\n"
    )
    done = _python(code)
    assert done.stdout.startswith("getpid ") and "survived" not in done.stdout
    assert done.returncode == -signal.SIGSYS, (done.returncode, done.stderr)


def test_the_program_checks_arch_and_x32_before_any_syscall_number() -> None:
    program = compile_profile(load_profile(), "x86_64")
    ld_arch, is_x86_64, kill, ld_nr, _, _, x32, kill_x32 = program.instructions[:8]
    assert ld_arch == (0x20, 0, 0, 4) and is_x86_64 == (0x15, 1, 0, 0xC000003E)
    assert kill == (0x06, 0, 0, 0x80000000) == kill_x32
    assert ld_nr == (0x20, 0, 0, 0) and x32 == (0x35, 0, 1, 0x40000000)


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_the_profile_compiles_well_under_the_kernels_limit(machine: str) -> None:
    program = compile_profile(load_profile(), machine)
    assert 100 < len(program.instructions) < BPF_MAXINSNS // 4
    assert len(program.pack()) == 8 * len(program.instructions)
    # Names of other architectures (and syscalls newer than the tables) are skipped.
    assert "socketcall" in program.skipped and "read" not in program.skipped


def test_the_tables_have_the_numbers_the_kernel_uses() -> None:
    assert (x86_64.SYSCALLS["read"], x86_64.SYSCALLS["seccomp"]) == (0, 317)
    assert (x86_64.SYSCALLS["clone3"], x86_64.SYSCALLS["socket"]) == (435, 41)
    assert (aarch64.SYSCALLS["openat"], aarch64.SYSCALLS["seccomp"]) == (56, 277)
    assert (aarch64.SYSCALLS["fcntl"], aarch64.SYSCALLS["clone"]) == (25, 220)
    assert "open" not in aarch64.SYSCALLS and "arch_prctl" not in aarch64.SYSCALLS


def _broken(change: str) -> dict[str, Any]:
    profile = copy.deepcopy(load_profile())
    socket_rule = next(r for r in profile["syscalls"] if r["names"] == ["socket"])
    if change == "action":
        socket_rule["action"] = "SCMP_ACT_LOG"
    elif change == "op":
        socket_rule["args"][0]["op"] = "SCMP_CMP_GT"
    elif change == "subarch":
        profile["archMap"][0]["subArchitectures"] = ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    elif change == "caps":
        socket_rule["includes"] = {"caps": ["CAP_NET_ADMIN"]}
    elif change == "unconditional_twice":
        profile["syscalls"].append({"names": ["read"], "action": "SCMP_ACT_ERRNO"})
    return profile


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("action", "action 'SCMP_ACT_LOG' is not supported"),
        ("op", "op 'SCMP_CMP_GT' is not supported"),
        ("subarch", "sub-architectures"),
        ("caps", "includes has caps"),
        ("unconditional_twice", "names read again"),
    ],
)
def test_a_profile_beyond_what_the_compiler_implements_is_refused(
    change: str, message: str
) -> None:
    with pytest.raises(ProfileError, match=message):
        compile_profile(_broken(change), "x86_64")


def test_an_unsupported_machine_is_refused() -> None:
    with pytest.raises(ProfileError, match="not riscv64"):
        compile_profile(load_profile(), "riscv64")


def test_the_request_to_confine_never_reaches_a_tool() -> None:
    environ = {SELF_CONFINE_ENV: "1", "PATH": "/bin"}
    assert credentials.scrub_environment(environ) == [SELF_CONFINE_ENV]
    assert SELF_CONFINE_ENV not in credentials.tool_environment("/tmp/home")


@pytest.mark.skipif(
    shutil.which("cpp") is None or not Path("/usr/include/asm-generic/unistd.h").is_file(),
    reason="regenerating the tables needs cpp and the kernel's UAPI headers",
)
def test_the_committed_tables_are_what_the_generator_makes() -> None:
    for arch, (source, _) in generate.modules(Path("/usr/include")).items():
        assert (ROOT / "sandbox" / "syscalls" / f"{arch}.py").read_text() == source, arch

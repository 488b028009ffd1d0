"""examhall's compiled filter against libseccomp's: the same profile given to libseccomp the
way runc gives it (Docker's path), both programs run by a small BPF interpreter over every
syscall number and the argument values the profile's conditions look at. They must agree,
but where runc adds to libseccomp: ENOSYS above the profile's highest syscall."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import struct
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.seccomp_filter import RET_ALLOW, RET_ERRNO, compile_profile, load_profile

_LIBSECCOMP = ctypes.util.find_library("seccomp")
pytestmark = pytest.mark.skipif(
    _LIBSECCOMP is None, reason="libseccomp (the reference) is not installed"
)

AUDIT_X86_64, AUDIT_I386, AUDIT_AARCH64 = 0xC000003E, 0x40000003, 0xC00000B7
_OPS = {"SCMP_CMP_EQ": 4, "SCMP_CMP_MASKED_EQ": 7}  # enum scmp_compare
_KILLS = (0x00000000, 0x80000000)  # SECCOMP_RET_KILL_THREAD, _KILL_PROCESS


class _Cmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _action(rule: dict[str, Any], default_errno: int | None = None) -> int:
    if rule.get("action", rule.get("defaultAction")) == "SCMP_ACT_ALLOW":
        return RET_ALLOW
    code = rule.get("errnoRet", default_errno)
    return RET_ERRNO | (errno.EPERM if code is None else code)


def _libseccomp_program(profile: dict[str, Any]) -> bytes:
    """What runc builds with libseccomp for this profile on x86_64 (docker's includes.arches
    filtering done first, as the daemon does)."""
    lib = ctypes.CDLL(_LIBSECCOMP, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_Cmp),
    ]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    default = RET_ERRNO | profile["defaultErrnoRet"]
    ctx = lib.seccomp_init(default)
    try:
        for rule in profile["syscalls"]:
            arches = (rule.get("includes") or {}).get("arches")
            if arches and "amd64" not in arches:
                continue
            action = _action(rule)
            if action == default:
                continue  # libseccomp refuses a rule that does what the default does
            args = rule.get("args") or []
            cmps = (_Cmp * max(len(args), 1))(
                *[_Cmp(a["index"], _OPS[a["op"]], a["value"], a.get("valueTwo", 0)) for a in args]
            )
            for name in rule["names"]:
                number = lib.seccomp_syscall_resolve_name(name.encode())
                if number < 0:
                    continue  # unknown to libseccomp: runc skips it
                assert lib.seccomp_rule_add_array(ctx, action, number, len(args), cmps) == 0
        with tempfile.TemporaryFile() as out:
            assert lib.seccomp_export_bpf(ctx, out.fileno()) == 0
            out.seek(0)
            return out.read()
    finally:
        lib.seccomp_release(ctx)


def run_bpf(program: bytes, data: bytes) -> int:
    """Classic BPF, the subset seccomp filters use: what the program returns for `data`."""
    insns = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    a = x = pc = 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:  # ld w abs
            a = struct.unpack_from("=I", data, k)[0]
        elif code == 0x54:  # and k
            a &= k
        elif code == 0x05:  # ja
            pc += k
        elif code in (0x15, 0x25, 0x35, 0x45):  # jeq, jgt, jge, jset k
            hit = {0x15: a == k, 0x25: a > k, 0x35: a >= k, 0x45: bool(a & k)}[code]
            pc += jt if hit else jf
        elif code == 0x06:  # ret k
            return int(k)
        elif code == 0x16:  # ret a
            return a
        elif code == 0x02:  # st
            x = a
        else:
            raise AssertionError(f"instruction {code:#x} is not in the interpreter ({x})")


def _data(nr: int, arch: int, args: tuple[int, ...] = ()) -> bytes:
    padded = (*args, *(0x5A5A5A5A5A5A5A5A,) * (6 - len(args)))  # noise in unused args
    return struct.pack("=IIQ6Q", nr & 0xFFFFFFFF, arch, 0, *padded)


def _inputs() -> Iterator[bytes]:
    firsts = [*range(64), 0x20000, 0x20008, 0x40000, 0x400000, 0xFFFFFFFF, 0x7E020000]
    firsts += [17 | bit for bit in (0x20000, 0x2000000, 0x4000000, 0x8000000)]
    firsts += [17 | bit for bit in (0x10000000, 0x20000000, 0x40000000)]
    firsts += [0x3D0F00, 0x1200011, 1 << 32 | 2, 1 << 32, 0xFFFFFFFF00000000]
    for nr in [*range(480), 0xFFFFFFFF, 0x40000000 | 39, 0x40000000 | 0x200]:
        for first in firsts if nr in (41, 53, 56, 135) else [0, 0xFFFFFFFF]:
            yield _data(nr, AUDIT_X86_64, (first,))
    for arch in (AUDIT_I386, AUDIT_AARCH64):
        for nr in (0, 1, 11, 102, 120, 173, 0xFFFFFFFF):
            yield _data(nr, arch)


def _same(ours: int, theirs: int) -> bool:
    return ours == theirs or (ours in _KILLS and theirs in _KILLS)


def test_the_filter_does_what_libseccomp_makes_of_the_profile() -> None:
    profile = load_profile()
    ours = compile_profile(profile, "x86_64")
    theirs = _libseccomp_program(profile)
    highest = max(
        ours.arch.syscalls[n]
        for rule in profile["syscalls"]
        for n in rule["names"]
        if n in ours.arch.syscalls
    )
    checked = disagree = 0
    for data in _inputs():
        nr, arch = struct.unpack_from("=II", data)
        mine, reference = run_bpf(ours.pack(), data), run_bpf(theirs, data)
        if arch == AUDIT_X86_64 and highest < nr < 0x40000000:
            assert mine == RET_ERRNO | errno.ENOSYS, nr  # runc's addition
            continue
        checked += 1
        if not _same(mine, reference):
            disagree += 1
            print(f"nr {nr} arch {arch:#x} args {data[16:24].hex()}: {mine:#x} vs {reference:#x}")
    assert checked > 1000 and disagree == 0

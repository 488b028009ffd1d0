"""examhall's seccomp profile (seccomp.json, beside this module) compiled to a classic BPF program.

Docker hands the profile to runc, which builds the filter with libseccomp. Where the engine
cannot (a Swarm service on Docker 20.10 takes no seccomp profile), the worker installs the
same filter on itself (sandbox/confine.py), and this module builds it without libseccomp:
the standard library only, for the subset of Docker's profile format the profile uses:

- defaultAction and a rule's action: SCMP_ACT_ALLOW, or SCMP_ACT_ERRNO with defaultErrnoRet or
  errnoRet (EPERM when absent, as runc does);
- archMap: the entry of the running architecture (x86_64 or aarch64), with no
  subArchitectures. Only that architecture's calls are let in: any other audit arch (the
  i386 compat ABI entered with int 0x80) and the x32 ABI (x86_64 numbers with bit 30 set)
  kill the process, libseccomp's action for an architecture not in the filter;
- rules: names (a name the architecture's table lacks is skipped, as libseccomp does),
  includes/excludes by arches (Go's names: amd64, arm64), and args with SCMP_CMP_EQ or
  SCMP_CMP_MASKED_EQ ((arg & value) == valueTwo) on the whole 64-bit argument, compared as
  two 32-bit words. The args of one rule are ANDed; several rules naming one syscall are
  ORed, and a call none of them matches gets the default action;
- a syscall numbered above every one the profile names returns ENOSYS, as runc's filter
  does, so that a libc falls back from syscalls newer than the profile.

Anything else in a profile is refused with ProfileError rather than compiled differently.
"""

from __future__ import annotations

import errno
import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from sandbox.syscalls import aarch64, x86_64

PROFILE_NAME = "seccomp.json"
BPF_MAXINSNS = 4096

# linux/filter.h and linux/seccomp.h
_LD_W_ABS = 0x20
_ALU_AND_K = 0x54
_JMP_JA = 0x05
_JMP_JEQ_K = 0x15
_JMP_JGT_K = 0x25
_JMP_JGE_K = 0x35
_RET_K = 0x06
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
_OFFSET_NR = 0
_OFFSET_ARCH = 4
_OFFSET_ARGS = 16
X32_SYSCALL_BIT = 0x40000000
_MAX_JUMP = 255  # a conditional jump's offset is one byte

_WORD = 0xFFFFFFFF
_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class Arch:
    machine: str  # os.uname().machine
    profile_name: str  # the profile's archMap name
    go_name: str  # includes.arches names Go's GOARCH
    audit: int  # seccomp_data.arch
    syscalls: Mapping[str, int]


ARCHES = {
    "x86_64": Arch("x86_64", "SCMP_ARCH_X86_64", "amd64", 0xC000003E, x86_64.SYSCALLS),
    "aarch64": Arch("aarch64", "SCMP_ARCH_AARCH64", "arm64", 0xC00000B7, aarch64.SYSCALLS),
}

_PROFILE_KEYS = {"defaultAction", "defaultErrnoRet", "archMap", "syscalls"}
_RULE_KEYS = {"names", "action", "errnoRet", "args", "comment", "includes", "excludes"}
_ARG_KEYS = {"index", "value", "valueTwo", "op"}
_OPS = {"SCMP_CMP_EQ", "SCMP_CMP_MASKED_EQ"}


class ProfileError(ValueError):
    """The profile uses something this compiler does not implement, or is malformed."""


Instruction = tuple[int, int, int, int]  # code, jt, jf, k: struct sock_filter


@dataclass(frozen=True)
class Condition:
    """(args[index] & mask) == value, on all 64 bits."""

    index: int
    mask: int
    value: int


@dataclass(frozen=True)
class Rule:
    action: int  # a SECCOMP_RET_* value
    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class Program:
    arch: Arch
    instructions: tuple[Instruction, ...]
    skipped: tuple[str, ...]  # names the architecture's table does not have

    def pack(self) -> bytes:
        """The program as an array of struct sock_filter, in this machine's byte order."""
        return b"".join(struct.pack("=HBBI", *insn) for insn in self.instructions)


def profile_text() -> str:
    """seccomp.json as shipped in the sandbox package (also in the sandbox image)."""
    return resources.files(__package__).joinpath(PROFILE_NAME).read_text()


def load_profile() -> dict[str, Any]:
    try:
        profile: dict[str, Any] = json.loads(profile_text())
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{__package__}/{PROFILE_NAME} cannot be read: {exc}") from None
    return profile


def compile_profile(profile: Mapping[str, Any], machine: str) -> Program:
    """The filter `profile` gives on `machine` (os.uname().machine), or ProfileError."""
    arch = ARCHES.get(machine)
    if arch is None:
        raise ProfileError(
            f"seccomp filters can be compiled for {', '.join(ARCHES)} only, not {machine}."
        )
    _check_keys(profile, _PROFILE_KEYS, "the profile")
    default = _action(profile.get("defaultAction"), profile.get("defaultErrnoRet"), "defaultAction")
    _check_arch_map(profile.get("archMap"), arch)
    rules, skipped = _rules_by_number(profile.get("syscalls"), arch)
    code = _prologue(arch, highest=max(rules, default=-1), default=default)
    for action, numbers in _unconditional(rules).items():
        code += _any_of(numbers, action)
    for number, conditional in sorted(rules.items()):
        if conditional[0].conditions:
            code += _syscall_block(number, conditional, default)
    code.append((_RET_K, 0, 0, default))
    if len(code) > BPF_MAXINSNS:
        raise ProfileError(
            f"the profile compiles to {len(code)} BPF instructions, more than the kernel's "
            f"limit of {BPF_MAXINSNS}."
        )
    return Program(arch, tuple(code), tuple(sorted(skipped)))


def _check_keys(item: Mapping[str, Any], known: set[str], where: str) -> None:
    if not isinstance(item, Mapping):
        raise ProfileError(f"{where} must be a JSON object, not {type(item).__name__}.")
    unknown = sorted(set(item) - known)
    if unknown:
        raise ProfileError(
            f"{where} has {', '.join(unknown)}, which examhall's seccomp compiler does not "
            f"implement (it knows {', '.join(sorted(known))})."
        )


def _action(name: object, errno_ret: object, where: str) -> int:
    if name == "SCMP_ACT_ALLOW":
        if errno_ret is not None:
            raise ProfileError(f"{where}: errnoRet is meaningless with SCMP_ACT_ALLOW.")
        return RET_ALLOW
    if name == "SCMP_ACT_ERRNO":
        code = errno.EPERM if errno_ret is None else errno_ret
        if not isinstance(code, int) or isinstance(code, bool) or not 0 <= code <= 4095:
            raise ProfileError(f"{where}: errnoRet must be an errno from 0 to 4095, not {code!r}.")
        return RET_ERRNO | code
    raise ProfileError(
        f"{where}: action {name!r} is not supported; examhall's seccomp compiler implements "
        "SCMP_ACT_ALLOW and SCMP_ACT_ERRNO."
    )


def _check_arch_map(arch_map: object, arch: Arch) -> None:
    if not isinstance(arch_map, list):
        raise ProfileError("the profile's archMap must be a list of architectures.")
    for entry in arch_map:
        _check_keys(entry, {"architecture", "subArchitectures"}, "an archMap entry")
        if entry.get("architecture") == arch.profile_name:
            if entry.get("subArchitectures"):
                raise ProfileError(
                    f"archMap gives {arch.profile_name} sub-architectures "
                    f"{entry['subArchitectures']}: examhall's filter never lets a compat "
                    "ABI in, so the profile must list none."
                )
            return
    raise ProfileError(f"the profile's archMap has no entry for {arch.profile_name}.")


def _applies(rule: Mapping[str, Any], arch: Arch, where: str) -> bool:
    for key, wanted in (("includes", True), ("excludes", False)):
        selector = rule.get(key) or {}
        _check_keys(selector, {"arches"}, f"{where} {key}")
        arches = selector.get("arches")
        if arches and (arch.go_name in arches) != wanted:
            return False
    return True


def _conditions(args: object, where: str) -> tuple[Condition, ...]:
    if args is None:
        return ()
    if not isinstance(args, list):
        raise ProfileError(f"{where}: args must be a list.")
    found = []
    for arg in args:
        _check_keys(arg, _ARG_KEYS, f"{where} arg")
        index, value, two, op = (arg.get(k) for k in ("index", "value", "valueTwo", "op"))
        if op not in _OPS:
            raise ProfileError(
                f"{where}: op {op!r} is not supported; examhall's seccomp compiler implements "
                f"{' and '.join(sorted(_OPS))}."
            )
        two = 0 if two is None else two
        bounds = (("index", index, 5), ("value", value, _U64), ("valueTwo", two, _U64))
        for name, number, top in bounds:
            if not isinstance(number, int) or isinstance(number, bool) or not 0 <= number <= top:
                raise ProfileError(f"{where}: {name} must be an integer from 0 to {top}.")
        if op == "SCMP_CMP_EQ":
            found.append(Condition(index, _U64, value))
        else:
            found.append(Condition(index, value, two))
    return tuple(found)


def _rules_by_number(syscalls: object, arch: Arch) -> tuple[dict[int, list[Rule]], set[str]]:
    if not isinstance(syscalls, list):
        raise ProfileError("the profile's syscalls must be a list of rules.")
    rules: dict[int, list[Rule]] = {}
    skipped: set[str] = set()
    for position, item in enumerate(syscalls):
        where = f"syscalls[{position}]"
        _check_keys(item, _RULE_KEYS, where)
        names = item.get("names")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise ProfileError(f"{where}: names must be a non-empty list of syscall names.")
        rule = Rule(
            _action(item.get("action"), item.get("errnoRet"), where),
            _conditions(item.get("args"), where),
        )
        if not _applies(item, arch, where):
            continue
        for name in names:
            number = arch.syscalls.get(name)
            if number is None:
                skipped.add(name)
                continue
            earlier = rules.setdefault(number, [])
            # ORed conditional rules of one action are what the profile uses; what libseccomp
            # makes of an unconditional rule beside others, or of mixed actions, is not.
            if earlier and not (
                rule.conditions and earlier[0].conditions and rule.action == earlier[0].action
            ):
                raise ProfileError(
                    f"{where} names {name} again: several rules for one syscall must all have "
                    "args and the same action (they are ORed)."
                )
            earlier.append(rule)
    return rules, skipped


def _prologue(arch: Arch, *, highest: int, default: int) -> list[Instruction]:
    code: list[Instruction] = [
        (_LD_W_ABS, 0, 0, _OFFSET_ARCH),
        (_JMP_JEQ_K, 1, 0, arch.audit),
        (_RET_K, 0, 0, RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _OFFSET_NR),
        # -1 is no syscall (a tracer's way to skip one): the default action, as libseccomp
        # gives it, rather than the x32 or the ENOSYS answer below.
        (_JMP_JEQ_K, 0, 1, _WORD),
        (_RET_K, 0, 0, default),
    ]
    if arch.machine == "x86_64":
        code += [(_JMP_JGE_K, 0, 1, X32_SYSCALL_BIT), (_RET_K, 0, 0, RET_KILL_PROCESS)]
    if highest >= 0:
        code += [(_JMP_JGT_K, 0, 1, highest), (_RET_K, 0, 0, RET_ERRNO | errno.ENOSYS)]
    return code


def _unconditional(rules: Mapping[int, list[Rule]]) -> dict[int, list[int]]:
    """Syscall numbers by action, for the syscalls whose one rule has no args."""
    groups: dict[int, list[int]] = {}
    for number, found in sorted(rules.items()):
        if not found[0].conditions:
            groups.setdefault(found[0].action, []).append(number)
    # The allow-list first: it is what almost every call a trial makes ends in.
    return dict(sorted(groups.items(), key=lambda item: item[0] != RET_ALLOW))


def _any_of(numbers: Iterable[int], action: int) -> list[Instruction]:
    """Return `action` if the syscall number (in A) is one of `numbers`; else fall through."""
    code: list[Instruction] = []
    listed = list(numbers)
    for start in range(0, len(listed), _MAX_JUMP):
        chunk = listed[start : start + _MAX_JUMP]
        last = len(chunk) - 1
        # Each match jumps to the chunk's return; the last miss jumps over it.
        code += [(_JMP_JEQ_K, last - i, 0, n) for i, n in enumerate(chunk[:-1])]
        code += [(_JMP_JEQ_K, 0, 1, chunk[-1]), (_RET_K, 0, 0, action)]
    return code


def _syscall_block(number: int, rules: list[Rule], default: int) -> list[Instruction]:
    """For syscall `number`: the first rule whose conditions hold gives its action, and no
    rule holding gives `default`. Another syscall skips the block with A left as it was."""
    block: list[Instruction] = []
    for rule in rules:
        block += _rule(rule)
    block.append((_RET_K, 0, 0, default))
    return [(_JMP_JEQ_K, 1, 0, number), (_JMP_JA, 0, 0, len(block)), *block]


def _rule(rule: Rule) -> list[Instruction]:
    """Return the rule's action when every condition holds; else fall through to what follows."""
    tests: list[list[Instruction]] = []
    for condition in rule.conditions:
        low = _OFFSET_ARGS + 8 * condition.index  # both architectures are little-endian
        for offset, shift in ((low + 4, 32), (low, 0)):
            mask = (condition.mask >> shift) & _WORD
            value = (condition.value >> shift) & _WORD
            if mask == 0 and value == 0:
                continue  # (word & 0) == 0 holds for every argument
            test: list[Instruction] = [(_LD_W_ABS, 0, 0, offset)]
            if mask != _WORD:
                test.append((_ALU_AND_K, 0, 0, mask))
            test.append((_JMP_JEQ_K, 0, -1, value))  # jf patched below: past the return
            tests.append(test)
    code: list[Instruction] = [insn for test in tests for insn in test]
    code.append((_RET_K, 0, 0, rule.action))
    patched: list[Instruction] = []
    for position, (op, jt, jf, k) in enumerate(code):
        if jf == -1:
            jf = len(code) - position - 1
            if jf > _MAX_JUMP:
                raise ProfileError("a rule has too many args to compile (a jump over 255).")
        patched.append((op, jt, jf, k))
    return patched

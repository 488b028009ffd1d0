"""Bundle this Python (interpreter, standard library, shared libraries, glibc's loader) into
one directory that runs on any glibc or non-glibc image of the same architecture.

Run by the worker layer's build in a stage of the sandbox image, as
`python3 -I bundle_python.py DEST`; stdlib only, like the sandbox. The interpreter is then
started through the bundled loader (`ld.so --library-path DEST/lib`), so neither the image's
libc nor LD_LIBRARY_PATH is involved, and the loader's option reaches no child process. A
tiny /bin/sh wrapper at DEST/bin/python3 does that, and names itself as argv[0]
(`--argv0`), so sys.executable is the wrapper: a path any subprocess can exec directly.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig

_PT_INTERP = 3
_RESOLVED = re.compile(r"^\s*(\S+) => (/\S+) \(0x[0-9a-f]+\)$")
# Test modules and GUI toolkits the worker never imports; skipping them keeps the layer small.
_SKIPPED = frozenset({"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"})


def program_interpreter(path: str) -> str:
    """PT_INTERP of a 64-bit little-endian ELF executable: the loader the kernel would run."""
    with open(path, "rb") as elf:
        header = elf.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            raise SystemExit(f"examhall: {path} is not a 64-bit little-endian ELF file")
        (phoff,) = struct.unpack_from("<Q", header, 32)
        phentsize, phnum = struct.unpack_from("<HH", header, 54)
        for index in range(phnum):
            elf.seek(phoff + index * phentsize)
            kind, _flags, offset, _vaddr, _paddr, size = struct.unpack("<IIQQQQ", elf.read(40))
            if kind == _PT_INTERP:
                elf.seek(offset)
                return elf.read(size).rstrip(b"\0").decode()
    raise SystemExit(f"examhall: {path} has no program interpreter (is it static?)")


def needed(loader: str, objects: list[str]) -> dict[str, str]:
    """soname -> resolved path of every shared library the objects load, as the loader sees
    them; a library that is not installed (an optional module's) is left out."""
    found: dict[str, str] = {}
    for path in objects:
        listed = subprocess.run([loader, "--list", path], capture_output=True, text=True)
        for line in listed.stdout.splitlines():
            match = _RESOLVED.match(line)
            if match:
                found.setdefault(os.path.basename(match[1]), os.path.realpath(match[2]))
    return found


def main(dest: str) -> None:
    executable = os.path.realpath(sys.executable)
    stdlib = sysconfig.get_paths()["stdlib"]
    dynload = os.path.join(stdlib, "lib-dynload")
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    loader = os.path.realpath(program_interpreter(executable))

    os.makedirs(os.path.join(dest, "bin"))
    lib = os.path.join(dest, "lib")
    shutil.copytree(
        stdlib,
        os.path.join(lib, version),
        ignore=lambda _dir, names: [n for n in names if n in _SKIPPED or n == "site-packages"],
    )
    binary = os.path.join(dest, "bin", version)
    shutil.copy2(executable, binary)
    extensions = [
        os.path.join(dynload, name) for name in sorted(os.listdir(dynload)) if name.endswith(".so")
    ]
    bundled_loader = os.path.join(lib, os.path.basename(program_interpreter(executable)))
    shutil.copy2(loader, bundled_loader)
    for soname, path in sorted(needed(loader, [executable, *extensions]).items()):
        if path != loader:
            shutil.copy2(path, os.path.join(lib, soname))

    wrapper = os.path.join(dest, "bin", "python3")
    with open(wrapper, "w") as out:
        out.write(
            "#!/bin/sh\n"
            "# examhall's Python, for images without one: started through its own glibc\n"
            "# loader, so it needs nothing of the image's libraries (see bundle_python.py).\n"
            f"exec {bundled_loader} --inhibit-cache --library-path {lib} --argv0 {wrapper} "
            f'{binary} "$@"\n'
        )
    os.chmod(wrapper, 0o755)


if __name__ == "__main__":
    main(sys.argv[1])

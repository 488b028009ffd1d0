"""service.suites.archives: suites packed deterministically, hostile archives refused with the entry
named, and trees written only under their root."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from service.suites.archives import (
    ArchiveError,
    ArchiveFile,
    archive_id,
    is_archive_id,
    pack_directory,
    read_archive,
    write_tree,
)

MiB = 1024 * 1024
LIMITS = {"max_bytes": 32 * MiB, "max_files": 100, "max_unpacked_bytes": 4 * MiB}


def tar_of(*members: tuple[tarfile.TarInfo, bytes | None], compress: bool = True) -> bytes:
    """An archive with exactly these entries, as a hostile uploader would write it."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(raw.getvalue()) if compress else raw.getvalue()


def entry(name: str, data: bytes = b"x", **fields: object) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    kind = fields.pop("type", tarfile.REGTYPE)
    info.type = kind  # type: ignore[assignment]
    for key, value in fields.items():
        setattr(info, key, value)
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


def refused(data: bytes, **limits: int) -> ArchiveError:
    with pytest.raises(ArchiveError) as caught:
        read_archive(data, **{**LIMITS, **limits})
    return caught.value


def make_tree(root: Path) -> None:
    (root / "hello" / "tests").mkdir(parents=True)
    (root / "hello" / "task.toml").write_text('version = "1.0"\n')
    (root / "hello" / "instruction.md").write_text("Say hello.\n")
    test = root / "hello" / "tests" / "test.sh"
    test.write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    test.chmod(0o750)
    (root / "hello" / "data.bin").write_bytes(bytes(range(256)) * 300)
    (root / "hello" / "ünïcode name.txt").write_text("names beyond ASCII\n")
    (root / "hello" / "README").symlink_to("instruction.md")
    # Never packed:
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "hello" / "__pycache__").mkdir()
    (root / "hello" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")


def test_a_tree_round_trips_byte_identically_and_packs_deterministically(
    tmp_path: Path,
) -> None:
    source = tmp_path / "source"
    make_tree(source)
    packed = pack_directory(source)
    assert pack_directory(source) == packed
    # What the archive does not keep does not change it: times, group and other bits.
    os.utime(source / "hello" / "task.toml", (1_000_000, 1_000_000))
    (source / "hello" / "instruction.md").chmod(0o600)
    assert pack_directory(source) == packed
    assert is_archive_id(archive_id(packed)) and len(archive_id(packed)) == 71

    files = read_archive(packed, **LIMITS)
    assert list(files) == [
        "hello/README",
        "hello/data.bin",
        "hello/instruction.md",
        "hello/task.toml",
        "hello/tests/test.sh",
        "hello/ünïcode name.txt",
    ]
    assert files["hello/tests/test.sh"].executable
    assert not files["hello/task.toml"].executable
    # The link inside the tree became a copy of its target.
    assert files["hello/README"] == ArchiveFile(b"Say hello.\n", False)

    copy = tmp_path / "copy"
    write_tree(files, copy)
    for name, file in files.items():
        written = copy / name
        assert not written.is_symlink()
        assert written.read_bytes() == file.data
        assert written.stat().st_mode & 0o777 == (0o755 if file.executable else 0o644)
    # The tree written back packs to the very same bytes: the same content address.
    assert pack_directory(copy) == packed
    with tarfile.open(fileobj=io.BytesIO(packed)) as tar:
        for member in tar.getmembers():
            assert (member.mtime, member.uid, member.gid, member.uname, member.gname) == (
                0,
                0,
                0,
                "",
                "",
            )
            assert member.mode in (0o644, 0o755)


def test_a_plain_tar_is_read_too() -> None:
    data = tar_of(entry("./a/b.txt", b"plain"), entry("./", type=tarfile.DIRTYPE), compress=False)
    assert read_archive(data, **LIMITS) == {"a/b.txt": ArchiveFile(b"plain")}


def test_packing_refuses_links_out_and_special_files(tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_text("no")
    link_out = tmp_path / "link-out"
    link_out.mkdir()
    (link_out / "task.toml").symlink_to(outside)
    with pytest.raises(ArchiveError, match=r"'task.toml'.*outside the directory"):
        pack_directory(link_out)

    dir_link = tmp_path / "dir-link"
    (dir_link / "real").mkdir(parents=True)
    (dir_link / "alias").symlink_to("real")
    with pytest.raises(ArchiveError, match=r"'alias'.*directory"):
        pack_directory(dir_link)

    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "pipe")
    with pytest.raises(ArchiveError, match=r"'pipe'.*special file"):
        pack_directory(fifo)

    with pytest.raises(ArchiveError, match="not a directory"):
        pack_directory(outside)


@pytest.mark.parametrize(
    ("members", "named", "reason"),
    [
        ([entry("../evil")], "../evil", "'..' component"),
        ([entry("task/../../evil")], "task/../../evil", "'..' component"),
        ([entry("/etc/cron.d/evil")], "/etc/cron.d/evil", "absolute path"),
        (
            [entry("out", type=tarfile.SYMTYPE, linkname="../../etc/passwd")],
            "out",
            "outside the root",
        ),
        (
            [entry("abs", type=tarfile.SYMTYPE, linkname="/etc/passwd")],
            "abs",
            "absolute path '/etc/passwd'",
        ),
        (
            [entry("deep/up", type=tarfile.SYMTYPE, linkname="../../x")],
            "deep/up",
            "outside the root",
        ),
        ([entry("a"), entry("hard", type=tarfile.LNKTYPE, linkname="a")], "hard", "hard link"),
        (
            [entry("hard", type=tarfile.LNKTYPE, linkname="/etc/shadow")],
            "hard",
            "hard link",
        ),
        ([entry("null", type=tarfile.CHRTYPE, devmajor=1, devminor=3)], "null", "a device"),
        ([entry("sda", type=tarfile.BLKTYPE, devmajor=8, devminor=0)], "sda", "a device"),
        ([entry("pipe", type=tarfile.FIFOTYPE)], "pipe", "a fifo"),
        ([entry("twice"), entry("twice")], "twice", "appears twice"),
        ([entry("f"), entry("f/inside")], "f/inside", "inside 'f', which is a file"),
        (
            [entry("d", type=tarfile.DIRTYPE), entry("l", type=tarfile.SYMTYPE, linkname="d")],
            "l",
            "to the directory 'd'",
        ),
        (
            [entry("a/x"), entry("l", type=tarfile.SYMTYPE, linkname="a")],
            "l",
            "to the directory 'a'",
        ),
        ([entry("l", type=tarfile.SYMTYPE, linkname="gone")], "l", "does not hold"),
        (
            [
                entry("p", type=tarfile.SYMTYPE, linkname="q"),
                entry("q", type=tarfile.SYMTYPE, linkname="p"),
            ],
            "p",
            "loop",
        ),
    ],
    ids=[
        "dotdot",
        "dotdot-inside",
        "absolute",
        "symlink-out",
        "symlink-absolute",
        "symlink-out-from-subdir",
        "hard-link-inside",
        "hard-link-out",
        "char-device",
        "block-device",
        "fifo",
        "duplicate",
        "file-as-directory",
        "symlink-to-dir",
        "symlink-to-implied-dir",
        "dangling-symlink",
        "symlink-loop",
    ],
)
def test_hostile_entries_are_refused_with_the_entry_named(
    members: list[tuple[tarfile.TarInfo, bytes | None]], named: str, reason: str
) -> None:
    error = refused(tar_of(*members))
    assert error.entry == named
    assert f"Archive entry {named!r}" in str(error) and reason in str(error), str(error)


def test_links_inside_the_root_become_copies_of_their_targets() -> None:
    files = read_archive(
        tar_of(
            entry("bin/run.sh", b"#!/bin/sh\n", mode=0o755),
            entry("task/run", type=tarfile.SYMTYPE, linkname="../bin/run.sh"),
            entry("task/again", type=tarfile.SYMTYPE, linkname="run"),
        ),
        **LIMITS,
    )
    assert files["task/run"] == files["task/again"] == ArchiveFile(b"#!/bin/sh\n", True)


def test_too_many_entries_are_refused() -> None:
    error = refused(tar_of(*(entry(f"f{i}") for i in range(11))), max_files=10)
    assert error.entry == "f10" and "limit of 10 entries" in str(error)


@pytest.mark.parametrize(
    "bomb",
    [
        # One file of zeros: 8 MiB that gzip makes 8 KiB.
        lambda: tar_of(entry("zeros", bytes(8 * MiB))),
        # Many files, each under the limit, over it together.
        lambda: tar_of(*(entry(f"z{i}", bytes(MiB)) for i in range(6))),
        # No file content at all: a 6 MiB pax header, which no size field announces.
        lambda: tar_of(_with_pax(tarfile.TarInfo("empty"), {"comment": "z" * (6 * MiB)})),
        # Links that would write one file many times.
        lambda: tar_of(
            entry("big", bytes(MiB)),
            *(entry(f"l{i}", type=tarfile.SYMTYPE, linkname="big") for i in range(6)),
        ),
    ],
    ids=["one-file", "many-files", "pax-header", "link-copies"],
)
def test_decompression_bombs_stop_at_the_unpacked_limit(bomb: Callable[[], bytes]) -> None:
    data = bomb()
    assert len(data) < MiB  # small on the wire
    error = refused(data, max_unpacked_bytes=4 * MiB, max_files=10)
    assert "4194304 unpacked bytes" in str(error) or "unpacks to more than 4194304" in str(error)


def _with_pax(info: tarfile.TarInfo, headers: dict[str, str]) -> tuple[tarfile.TarInfo, bytes]:
    info.pax_headers = headers
    return info, b""


def test_an_archive_over_its_size_cap_or_not_an_archive_is_refused() -> None:
    data = tar_of(entry("a", os.urandom(4096)))
    error = refused(data, max_bytes=len(data) - 1)
    assert error.entry is None and f"{len(data)} bytes; the limit is {len(data) - 1}" in str(error)
    assert "not a readable tar archive" in str(refused(b"PK\x03\x04 a zip file"))
    assert "not a readable tar archive" in str(refused(data[: len(data) // 2]))


def test_write_tree_never_writes_outside_its_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "sub").symlink_to(outside)
    with pytest.raises(ArchiveError, match=r"'sub/x'.*'sub' is in the way"):
        write_tree({"sub/x": ArchiveFile(b"no")}, root)
    (root / "file").symlink_to(outside / "planted")
    with pytest.raises(ArchiveError, match=r"'file'.*cannot be written"):
        write_tree({"file": ArchiveFile(b"no")}, root)
    with pytest.raises(ArchiveError, match=r"'\.\./x'.*'\.\.' component"):
        write_tree({"../x": ArchiveFile(b"no")}, root)
    with pytest.raises(ArchiveError, match="absolute path"):
        write_tree({"/tmp/x": ArchiveFile(b"no")}, root)
    assert list(outside.iterdir()) == []

"""service.suites: the formats behind one seam, by the kind the suites table stores. The
kinds are stored, so they never change; a job's suite name belongs to one format at most, so
the registry's order never decides; an uploaded tree is validated by the format that
recognises it; and a format answers only for what it is."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import pytest

from service.domain.job_spec import JobRequest
from service.domain.planner import JobInputError, SuiteTraits, check_agents
from service.suites import (
    DEFAULT,
    FORMATS,
    SuiteData,
    SuiteError,
    SuiteFormat,
    SuiteTreeError,
    format_named,
    format_of,
    upload_format,
)
from service.suites.archives import pack_directory
from service.suites.harbor import HARBOR, HarborFormat, LoadedTasks
from service.suites.python import PYTHON
from service.suites.trees import read_suite_tree

TREE = {
    "hello/task.toml": b'version = "1.0"\n[verifier]\ntimeout_sec = 60\n',
    "hello/instruction.md": b"Do hello.\n",
    "hello/environment/Dockerfile": b"FROM debian:bookworm\n",
    "hello/tests/test.sh": b"#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n",
}


def test_the_registry_keys_each_format_by_its_stored_kind() -> None:
    assert all(kind == suite_format.kind for kind, suite_format in FORMATS.items())
    # The kinds rows already carry: a format may join, never be renamed.
    assert {"python", "harbor"} <= set(FORMATS)
    assert format_of("python") is PYTHON and format_of("harbor") is HARBOR
    with pytest.raises(SuiteError, match="No suite format 'swebench'"):
        format_of("swebench")


def test_every_format_stands_behind_the_seam_and_the_planners_traits() -> None:
    for suite_format in FORMATS.values():
        seam: SuiteFormat = suite_format
        traits: SuiteTraits = suite_format
        assert seam.kind and isinstance(traits.builtin_agents, bool)


def test_a_name_belongs_to_one_format_at_most() -> None:
    claimed: dict[str, list[str]] = {}
    for suite_format in FORMATS.values():
        for name in suite_format.shipped():
            claimed.setdefault(name, []).append(suite_format.kind)
            assert format_named(name) is suite_format
    assert {name: kinds for name, kinds in claimed.items() if len(kinds) > 1} == {}
    assert format_named("smoke") is PYTHON
    assert format_named("harbor_demo") is HARBOR
    # An upload's id is the format of its stored row (service/suite_resolver.py).
    assert format_named("sha256:" + "0" * 64) is DEFAULT
    # No format's: the Python format refuses it, in its own words, as it always has.
    assert format_named("no-such-suite") is DEFAULT is PYTHON


def _packed(root: Path) -> bytes:
    for path, data in TREE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return pack_directory(root)


def test_an_uploaded_tree_is_validated_by_the_format_that_recognises_it(tmp_path: Path) -> None:
    assert upload_format(TREE) is HARBOR
    # Nothing recognises it: the first format of trees says what it lacks.
    assert upload_format({"README.md": b"hi"}) is HARBOR
    tree = read_suite_tree(
        _packed(tmp_path), max_bytes=1 << 20, max_files=100, max_unpacked_bytes=1 << 20
    )
    assert (tree.kind, tree.case_ids, tree.refused) == ("harbor", ["hello"], {})


def test_a_python_suite_is_no_tree_and_has_no_tasks() -> None:
    assert not PYTHON.tasks and not PYTHON.recognises(TREE)
    with pytest.raises(SuiteTreeError):
        PYTHON.validate(TREE)
    with pytest.raises(SuiteError, match="is a Python suite"):
        PYTHON.load_tasks(SuiteData("0" * 64, "smoke", source="x = 1\n"))


def test_a_stored_tree_reads_back_as_its_tasks_under_the_name_asked(tmp_path: Path) -> None:
    data = _packed(tmp_path)
    suite = HARBOR.load_tasks(SuiteData(hashlib.sha256(data).hexdigest(), "mine", archive=data))
    assert (suite.name, list(suite.tasks)) == ("mine", ["hello"])
    sources = HARBOR.environment_sources(
        SuiteData(suite.sha256, "mine", archive=data), ["hello"], {}
    )
    assert list(sources) == ["hello"]
    with pytest.raises(SuiteError, match="is not a stored task suite"):
        HARBOR.load_tasks(SuiteData("0" * 64, "gone"))


class ToyFormat(HarborFormat):
    """A second format of tasks, as a package of service/suites/ would give it: Harbor's
    tasks one directory down, under toy/, on which the built-in agents do not run."""

    kind = "toy"
    builtin_agents = False

    def shipped(self) -> list[str]:
        return []

    def names(self, ref: str) -> bool:
        return False

    def recognises(self, files: Mapping[str, bytes]) -> bool:
        return any(path.startswith("toy/") and path.endswith("/task.toml") for path in files)

    def validate(self, files: Mapping[str, bytes]) -> LoadedTasks:
        inner = {path.removeprefix("toy/"): data for path, data in files.items()}
        return super().validate(inner)


def test_a_new_format_is_one_registry_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With nothing but its entry in FORMATS, a format's trees are told from Harbor's and
    stored under its kind, and its traits reach the planner."""
    toy = ToyFormat()
    monkeypatch.setitem(FORMATS, toy.kind, toy)
    assert format_of("toy") is toy
    toy_tree = {f"toy/{path}": data for path, data in TREE.items()}
    assert upload_format(TREE) is HARBOR and upload_format(toy_tree) is toy
    _packed(tmp_path / "toy")
    tree = read_suite_tree(
        pack_directory(tmp_path), max_bytes=1 << 20, max_files=100, max_unpacked_bytes=1 << 20
    )
    assert (tree.kind, tree.case_ids) == ("toy", ["hello"])
    oracle = {"suite": "sha256:" + "0" * 64, "variants": {"a": {"agent": "oracle"}}}
    request = JobRequest.model_validate(oracle)
    with pytest.raises(JobInputError, match="runs on task suites"):
        check_agents(request, format_of(tree.kind))
    check_agents(request, format_of("harbor"))

"""`examhall admin update-team` changes a team's cap, egress policies and share after it is
made, and naming a policy the box does not define is said, at creation and at a change (run
in-process on a real SQLite store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cli.main import main


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EXAMHALL_DATABASE_URL", f"sqlite:///{tmp_path / 'examhall.db'}")
    monkeypatch.setenv("EXAMHALL_EGRESS_POLICIES", "mirrors=pypi.org")
    return tmp_path


def _admin(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["admin", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _rows(capsys: pytest.CaptureFixture[str]) -> dict[str, list[str]]:
    lines = _admin(capsys, "teams")[1].splitlines()[1:]
    return {line.split()[0]: line.split(None, 5)[1:] for line in lines}


def test_a_teams_cap_egress_and_share_change_after_it_is_made(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _admin(capsys, "create-team", "red", "--create", "--egress", "nope,mirrors")
    assert code == 0, err
    # A policy this box does not define is allowed (it may be defined later), but said.
    assert "this box has no egress policy 'nope'" in err and "'mirrors'" not in err
    assert _rows(capsys)["red"] == ["-", "1", "0", "0", "nope,mirrors"]

    code, out, err = _admin(
        capsys, "update-team", "red", "--max-containers", "3", "--share", "2", "--egress", ""
    )
    assert code == 0, err
    assert out.strip() == "Team red: max containers 3, share 2, egress offline only."
    assert _rows(capsys)["red"] == ["3", "2", "0", "0", "offline only"]
    code, out, _ = _admin(capsys, "update-team", "red", "--max-containers", "none", "--egress", "*")
    assert code == 0 and "max containers no cap, share 2, egress every policy" in out
    assert _rows(capsys)["red"] == ["-", "2", "0", "0", "every policy"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["update-team", "blue", "--share", "2"], "No team 'blue'"),
        (["update-team", "red"], "Nothing to change"),
        (["update-team", "red", "--share", "0"], "share must be from 1"),
        (["update-team", "red", "--egress", "Bad!"], "is not one"),
    ],
)
def test_a_change_that_cannot_be_made_changes_nothing(
    store: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert _admin(capsys, "create-team", "red", "--create", "--share", "3")[0] == 0
    before = _rows(capsys)
    code, _, err = _admin(capsys, *argv)
    assert code == 2 and said in err, err
    assert _rows(capsys) == before

"""The docs-lift demo suite, in-process: its judges, its scripts and its docs bundle agree.

Every case is played through the real agent loop and the real file tools on a temporary
workspace, with the faux model; only the system prompt differs between the two arms, so
`informed` passing with docs and failing without them is a lift the prompt alone causes.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

import evals.docs_lift_demo as demo
from sandbox.protocol import ToolResultEvent
from sandbox.suite import AgentRun, Case, cases_of
from tests.agent_runs import play as play_script

DOCS_DIR = Path(demo.__file__).resolve().parent / "docs" / "docs_lift_demo"
RULES = "<rules>\nYou are an agent working on one task in the directory /workspace.\n</rules>"
CASES = cases_of(demo)
CASE_IDS = [case.id for case in CASES]


def bundle() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(DOCS_DIR.glob("*.md"))}


def docs_section(docs: dict[str, str]) -> str:
    # The exact shape the worker sends: one <doc> per file, by name, inside <docs>.
    parts = [f'<doc name="{name}">\n{docs[name].rstrip()}\n</doc>' for name in sorted(docs)]
    return "<docs>\n" + "\n".join(parts) + "\n</docs>"


def system_prompt(*, with_docs: bool) -> str:
    return RULES + ("\n\n" + docs_section(bundle()) if with_docs else "")


def play(case: Case, script: str, system: str, workspace: Path) -> AgentRun:
    """Run `script` of `case` through the agent loop, then hand its run to the judges."""
    for relative, content in case.files.items():
        target = workspace / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    run = play_script(
        case.scripts[script], workspace, system=system, prompts=case.prompts, tools=case.tools
    )
    # A script whose tool call failed would prove nothing about the judges.
    errors = [e.error for e in run.events if isinstance(e, ToolResultEvent) and e.error]
    assert not errors, f"{case.id}/{script}: tool errors {errors}"
    return run


def scores(case: Case, run: AgentRun) -> dict[str, tuple[float, str]]:
    return {judge.name: judge.score(run) for judge in case.judges}


def passed(case: Case, run: AgentRun) -> bool:
    # The worker's rule: a trial passes when the mean judge score is 1.
    return all(score == 1.0 for score, _ in scores(case, run).values())


def test_suite_shape() -> None:
    assert len(CASES) >= 6
    for case in CASES:
        assert {"solution", "informed", "idle"} <= set(case.scripts), case.id


def test_bundle_is_a_few_markdown_files_stating_the_fact() -> None:
    docs = bundle()
    assert 2 <= len(docs) <= 4
    assert all(name.endswith(".md") for name in docs)
    lines = sum(text.count("\n") for text in docs.values())
    assert 150 <= lines <= 800, lines
    assert demo.DOCS_FACT in docs_section(docs)


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_solution_passes_every_judge(case_id: str, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == case_id)
    run = play(case, "solution", system_prompt(with_docs=False), tmp_path)
    result = scores(case, run)
    assert all(score == 1.0 for score, _ in result.values()), result


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_idle_fails(case_id: str, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == case_id)
    run = play(case, "idle", system_prompt(with_docs=True), tmp_path)
    assert not passed(case, run), scores(case, run)


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_informed_passes_with_docs(case_id: str, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == case_id)
    run = play(case, "informed", system_prompt(with_docs=True), tmp_path)
    result = scores(case, run)
    assert all(score == 1.0 for score, _ in result.values()), result


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_informed_fails_without_docs(case_id: str, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == case_id)
    run = play(case, "informed", system_prompt(with_docs=False), tmp_path)
    result = scores(case, run)
    # Not a missing file: the guess is written and judged, and the rules reject it.
    assert any(score == 0.0 and "does not exist" not in d for score, d in result.values())
    assert not passed(case, run), result


def test_informed_needs_these_docs_not_any_docs(tmp_path: Path) -> None:
    case = CASES[0]
    other = RULES + "\n\n" + docs_section({"other.md": "# Some other tool\n"})
    assert not passed(case, play(case, "informed", other, tmp_path))


def _blocks(language: str) -> list[str]:
    text = "\n".join(bundle().values())
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def test_every_ledger_example_in_the_docs_is_valid() -> None:
    # The docs and the judges' validator must state the same rules.
    examples = _blocks("qlg")
    assert len(examples) >= 2
    for example in examples:
        demo.parse_ledger(example)


def test_every_config_example_in_the_docs_is_valid() -> None:
    examples = _blocks("cfg")
    assert len(examples) >= 2
    for example in examples:
        demo.parse_config(example)


VALID = "%QUILL 2 EUR\n# c\n~ 2024.061 a/b +500 'x'\n~ 2024.061 c -100 'Bob^'s ^^'\n.end 2 "
VALID += f"{(500 - 200) % 97:02d}\n"


def test_valid_ledger_parses() -> None:
    ledger = demo.parse_ledger(VALID)
    assert ledger.currency == "EUR"
    assert [r.memo for r in ledger.records] == ["x", "Bob's ^"]
    assert demo.parse_ledger(VALID.rstrip("\n")) == ledger


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        ("%QUILL 2 EUR", "%QUILL 1 EUR", "Q101"),
        ("%QUILL 2 EUR", "%QUILL 2 XYZ", "Q104"),
        ("# c\n", "# c\n\n", "Q102"),
        ("# c\n", "# c \n", "Q102"),
        ("\n", "\r\n", "Q101"),
        ("+500", "500", "Q103"),
        ("+500", "+5.00", "Q103"),
        ("+500", "+0500", "Q103"),
        ("Bob^'s", "Bob\\'s", "Q103"),
        ("Bob^'s", "Bob''s", "Q103"),
        ("^^'", "^'", "Q103"),
        ("2024.061 c", "2024-03-01 c", "Q103"),
        ("2024.061 a/b", "2023.366 a/b", "Q105"),
        ("2024.061 c", "2024.060 c", "Q108"),
        ("a/b", "z", "Q108"),
        (".end 2", ".end 3", "Q109"),
        (".end 2 ", ".end 2 0", "Q109"),
        ("\n.end", "\n.end 2 00\n.end", "Q111"),
    ],
)
def test_validator_rejects_each_broken_rule(old: str, new: str, code: str) -> None:
    broken = VALID.replace(old, new, 1)
    assert broken != VALID
    with pytest.raises(demo.LedgerError, match=code):
        demo.parse_ledger(broken)


def test_check_is_the_non_negative_remainder() -> None:
    text = "%QUILL 2 EUR\n~ 2024.001 a -500 ''\n~ 2024.002 a +100 ''\n"
    assert demo.parse_ledger(text + ".end 2 88\n").records  # -300 mod 97 is 88
    with pytest.raises(demo.LedgerError, match="Q109"):
        demo.parse_ledger(text + ".end 2 -9\n")


def test_missing_trailer() -> None:
    with pytest.raises(demo.LedgerError, match="Q110"):
        demo.parse_ledger(demo.Q1_NO_TRAILER)


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        ("!quillc 3", "; hi\n!quillc 3", "E-CFG-1"),
        ("currency := CHF", 'currency := "CHF"', "E-CFG-4"),
        ("comments := off", "comments := no", "E-CFG-4"),
        ("root := books/", "root := books", "E-CFG-4"),
        ("root := books/", "root := /books/", "E-CFG-4"),
        ("[[verify]]", "[verify]", "E-CFG-1"),
        ("glob", "pattern", "E-CFG-2"),
        ("[[export]]", "[[ledger]]", "E-CFG-3"),
        ("to := out/\n", "", "E-CFG-5"),
        ("quarantine-dir := quarantine/\n", "", "E-CFG-6"),
        ("on-error := quarantine", "on-error := reject", "E-CFG-6"),
    ],
)
def test_config_validator_rejects_each_broken_rule(old: str, new: str, code: str) -> None:
    broken = demo.CONFIG.replace(old, new, 1)
    assert broken != demo.CONFIG
    with pytest.raises(demo.ConfigError, match=code):
        demo.parse_config(broken)


def test_config_defaults_count_as_set() -> None:
    # Leaving out a key whose default is what the task asks for is just as right.
    minimal = demo.CONFIG.replace("glob := *.qlg\n", "").replace("trailer := require\n", "")
    settings = demo.parse_config(minimal)
    assert settings["ingest"]["glob"] == "*.qlg"
    assert settings["verify"]["trailer"] == "require"


def test_module_needs_only_the_standard_library_and_sandbox() -> None:
    # It is sent alone into the exam hall, where nothing else is installed.
    tree = ast.parse(Path(demo.__file__).read_text())
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    assert roots - {"sandbox", "__future__"} <= set(sys.stdlib_module_names), roots
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "open" not in names

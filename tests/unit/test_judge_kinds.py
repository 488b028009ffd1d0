"""Trace, structured and weighted judges on runs the real agent loop made.

Each run is a faux script played through `run_agent` with the real file tools on a
temporary workspace, so the judges read the transcript and the files our code produced.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from sandbox import faux
from sandbox.faux import FauxStep
from sandbox.matchers import regex, satisfies
from sandbox.structured import (
    FactError,
    answer_json,
    answer_json_matches,
    facts_match,
    file_json,
    file_json_matches,
)
from sandbox.suite import AgentRun, Case, Judge, Weighted, combine
from sandbox.trace_judges import (
    call,
    no_tool_errors,
    tool_call_count,
    tool_called,
    tool_sequence,
)
from tests.agent_runs import play as play_script


def play(
    tmp_path: Path, script: Sequence[FauxStep], files: dict[str, str] | None = None
) -> AgentRun:
    for name, content in (files or {}).items():
        (tmp_path / name).write_text(content)
    return play_script(
        script, tmp_path, system="<rules>\nwork in /workspace\n</rules>", prompts=["do the task"]
    )


WORK = [
    faux.call("read", path="config.ini"),
    faux.call("edit", path="config.ini", old_text="debug = true", new_text="debug = false"),
    faux.call("write", path="report.json", content='{"debug": false, "port": 8080}'),
    faux.call("read", path="missing.txt"),  # a tool call that fails
    faux.text('Done. ```json\n{"changed": 1, "file": "config.ini"}\n```'),
]
CONFIG = {"config.ini": "[app]\ndebug = true\nport = 8080\n"}


@pytest.fixture
def run(tmp_path: Path) -> AgentRun:
    return play(tmp_path, WORK, CONFIG)


def test_tool_called_names_the_matching_call(run: AgentRun) -> None:
    score, detail = tool_called(call("edit", path="config.ini", new_text=regex(r"false$"))).score(
        run
    )
    assert score == 1.0 and "call #2 edit(" in detail


def test_tool_called_lists_near_misses_when_no_call_matches(run: AgentRun) -> None:
    score, detail = tool_called(call("read", path=regex(r"\.toml$"))).score(run)
    assert score == 0.0
    assert "2 'read' calls, none matched" in detail
    assert "#1: argument 'path': expected text matching /\\.toml$/, got 'config.ini'" in detail
    score, detail = tool_called(call("bash")).score(run)
    assert score == 0.0 and "no 'bash' call among 4 calls" in detail
    assert "['edit', 'read', 'write']" in detail


def test_never_called(run: AgentRun) -> None:
    assert tool_called("bash", never=True).score(run)[0] == 1.0
    score, detail = tool_called(call("write", path="report.json"), never=True).score(run)
    assert score == 0.0 and "call #3 write(" in detail


def test_predicates_and_exact_values(run: AgentRun) -> None:
    long_enough = satisfies(lambda text: len(text) > 10, "more than 10 characters")
    assert tool_called(call("write", content=long_enough)).score(run)[0] == 1.0
    # A predicate that raises on the agent's value does not match, and says why.
    score, detail = tool_called(call("write", content=satisfies(lambda t: t["x"], "has x"))).score(
        run
    )
    assert score == 0.0 and "TypeError" in detail
    # An exact value: True is not 1, and a missing argument is named.
    assert tool_called(call("edit", old_text="debug = TRUE")).score(run)[0] == 0.0
    score, detail = tool_called(call("edit", replace_all=True)).score(run)
    assert score == 0.0 and "no argument 'replace_all'" in detail


def test_sequence_in_order_and_in_any_order(run: AgentRun) -> None:
    in_order = tool_sequence(call("read", path="config.ini"), "edit", call("write"))
    score, detail = in_order.score(run)
    assert score == 1.0 and "edit() at #2" in detail
    backwards = tool_sequence(call("write"), call("edit"))
    score, detail = backwards.score(run)
    assert score == 0.5 and "first missing: edit() after the previous match" in detail
    assert tool_sequence(call("write"), call("edit"), ordered=False).score(run)[0] == 1.0
    # Any order still needs a distinct call per spec: one write cannot match twice.
    score, detail = tool_sequence("write", "write", ordered=False).score(run)
    assert score == 0.5 and "1 of 2 missing" in detail
    # A call fitting two specs goes to the one that needs it.
    either = tool_sequence(call("read"), call("read", path="config.ini"), ordered=False)
    assert either.score(run)[0] == 1.0


def test_no_tool_errors_and_counts(run: AgentRun) -> None:
    score, detail = no_tool_errors().score(run)
    assert score == 0.0 and detail.startswith("1 of 4 tool calls failed; first: read")
    assert no_tool_errors("edit", "write").score(run)[0] == 1.0
    assert tool_call_count(max=4).score(run) == (1.0, "4 tool calls, within [0, 4]")
    assert tool_call_count(min=3, tool="read").score(run) == (
        0.0,
        "2 'read' calls, outside [3, inf]",
    )
    with pytest.raises(ValueError, match="min <= max"):
        tool_call_count(min=3, max=2)


def test_structured_facts_from_a_file_and_the_answer(run: AgentRun) -> None:
    assert file_json(run, "report.json") == {"debug": False, "port": 8080}
    assert answer_json(run) == {"changed": 1, "file": "config.ini"}
    assert file_json_matches("report.json", {"debug": False, "port": 8080}).score(run)[0] == 1.0
    score, detail = file_json_matches("report.json", {"debug": 0, "port": 8080, "host": "x"}).score(
        run
    )
    # False is not 0, and a fact the file lacks is missing: each field that differs is named.
    assert score == pytest.approx(1 / 3)
    assert detail == "2 of 3 differ: debug: expected 0, got False; host: expected 'x', missing"
    answer = answer_json_matches({"changed": satisfies(lambda n: n >= 1, "at least 1")})
    assert answer.score(run) == (1.0, "all 1 facts match")


def test_a_fact_function_reading_facts_fresh_from_the_workspace(run: AgentRun) -> None:
    def config(run: AgentRun) -> dict[str, str]:
        text = run.read_file("config.ini") or ""
        pairs = (line.split(" = ", 1) for line in text.splitlines() if " = " in line)
        return dict(pairs)

    judge = facts_match(config, {"debug": "false", "port": re.compile(r"^\d+$")})
    assert judge.name == "facts_match(config)"
    assert judge.score(run) == (1.0, "all 2 facts match")


def test_fact_functions_raise_on_what_the_agent_left(tmp_path: Path) -> None:
    run = play(tmp_path, [faux.call("write", path="r.json", content="{nope"), faux.text("no")])
    with pytest.raises(FactError, match=r"r\.json is not JSON"):
        file_json(run, "r.json")
    with pytest.raises(FactError, match=r"missing\.json does not exist"):
        file_json(run, "missing.json")
    with pytest.raises(FactError, match="holds no JSON"):
        answer_json(run)


def test_weighted_rule_is_validated() -> None:
    judges = [Judge("a", lambda run: 1.0), Judge("b", lambda run: 1.0)]

    def case(rule: Weighted) -> Case:
        return Case(id="c", input="x", judges=judges, scoring=rule)

    for threshold in (0, -0.5, 1.5, float("nan"), True):
        with pytest.raises(ValueError, match="threshold"):
            case(Weighted(threshold=threshold))
    for weight in (0, -1, float("inf"), True):
        with pytest.raises(ValueError, match="a weight is a positive number"):
            case(Weighted(threshold=0.5, weights={"a": weight}))
    with pytest.raises(ValueError, match="'c2', which is not one of its judges"):
        case(Weighted(threshold=0.5, weights={"c2": 2}))
    with pytest.raises(ValueError, match="name more than one judge"):
        Case(id="c", input="x", judges=[judges[0], judges[0]], scoring=Weighted(threshold=1))
    assert case(Weighted(threshold=1, weights={"a": 3})).scoring is not None


def test_combining_scores() -> None:
    # Today's rule: the mean, passing only when every judge scores 1.
    assert combine([("a", 1.0), ("b", 0.5)], None) == (0.75, False)
    assert combine([("a", 1.0), ("b", 1.0)], None) == (1.0, True)
    rule = Weighted(threshold=0.75, weights={"a": 3.0})
    assert combine([("a", 1.0), ("b", 0.0)], rule) == (0.75, True)
    assert combine([("a", 0.0), ("b", 1.0)], rule) == (0.25, False)
    # Weights that do not sum exactly still give 1 when every judge scores 1.
    thirds = Weighted(threshold=1.0, weights={"a": 0.1, "b": 0.2})
    assert combine([("a", 1.0), ("b", 1.0)], thirds) == (1.0, True)

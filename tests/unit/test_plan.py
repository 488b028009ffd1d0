"""The plan: round by round, every arm of a (case, round) back to back, counterbalanced."""

from __future__ import annotations

import pytest

from service.domain.job_spec import JobLimits, JobRequest, JobSpec
from service.domain.planner import (
    JobInputError,
    first_cases_orders,
    job_spec,
    plan,
    resolve_design,
)


def _arms(planned: list, case_id: str, round_: int) -> list[str]:  # type: ignore[type-arg]
    return [p.variant for p in planned if p.case_id == case_id and p.round == round_]


def test_one_candidate_rounds_1_to_4() -> None:
    planned = plan(["a", "b"], 4, ("without_docs", "with_docs"))
    assert [p.order for p in planned] == list(range(16))
    for case_id in ("a", "b"):
        assert [_arms(planned, case_id, r) for r in (1, 2, 3, 4)] == [
            ["without_docs", "with_docs"],
            ["with_docs", "without_docs"],
            ["without_docs", "with_docs"],
            ["with_docs", "without_docs"],
        ]
    # Both arms of a pair are adjacent, so they run under the same conditions.
    for first, second in zip(planned[::2], planned[1::2], strict=True):
        assert (first.case_id, first.round) == (second.case_id, second.round)


def test_two_candidates_rounds_1_to_4() -> None:
    planned = plan(["a"], 4, ("base", "c1", "c2"))
    assert [_arms(planned, "a", r) for r in (1, 2, 3, 4)] == [
        ["base", "c1", "c2"],
        ["c2", "c1", "base"],
        ["base", "c1", "c2"],
        ["c2", "c1", "base"],
    ]
    # Over an even number of rounds each candidate runs before the baseline half the time.
    for candidate in ("c1", "c2"):
        before = sum(
            _arms(planned, "a", r).index(candidate) < _arms(planned, "a", r).index("base")
            for r in (1, 2, 3, 4)
        )
        assert before == 2


def _request(**body: object) -> JobRequest:
    return JobRequest.model_validate({"suite": "smoke", **body})


@pytest.mark.parametrize(
    ("cases", "arms", "rounds", "first"),
    [(5, 1, 3, 2), (4, 2, 4, 1), (3, 3, 2, 3), (3, 2, 3, 7), (1, 1, 1, 1)],
)
def test_first_cases_orders_are_the_plans_orders_of_those_cases(
    cases: int, arms: int, rounds: int, first: int
) -> None:
    # The job page reads its grid's trials by these orders (an index), not by case id.
    names = [f"case-{i}" for i in range(cases)]
    planned = plan(names, rounds, tuple(f"arm-{a}" for a in range(arms)))
    expected = [p.order for p in planned if p.case_id in names[:first]]
    assert first_cases_orders(cases, arms, rounds, first) == expected


def test_docs_lift_preset_expands_to_two_arms() -> None:
    design = resolve_design(
        _request(
            model={"provider": "faux", "id": "x"},
            comparison="docs-lift",
            docs={"files": {"guide.md": "# Guide"}},
        )
    )
    assert design.arms == ("without_docs", "with_docs")
    assert design.baseline == "without_docs"
    assert [design.variants[a].docs for a in design.arms] == [False, True]
    assert design.docs == {"guide.md": "# Guide"}


@pytest.mark.parametrize(
    ("body", "loc", "message"),
    [
        ({"comparison": "docs-lift"}, ("body", "docs"), "needs a docs bundle"),
        (
            {"variants": {"a": {}, "b": {}}},
            ("body", "baseline"),
            "baseline must name the one the others are compared to",
        ),
        ({"variants": {"a": {}, "b": {}}, "baseline": "c"}, ("body", "baseline"), "not a variant"),
        ({"variants": {"a": {"docs": True}}}, ("body", "variants", "a", "docs"), "no docs bundle"),
        ({"comparison": "docs-lift", "docs": "no-such-set"}, ("body", "docs"), "Unknown docs set"),
    ],
)
def test_design_errors_name_their_field(
    body: dict[str, object], loc: tuple[str, ...], message: str
) -> None:
    with pytest.raises(JobInputError) as error:
        resolve_design(_request(model={"provider": "faux", "id": "x"}, **body))
    assert error.value.loc == loc
    assert message in error.value.message


def test_model_required_unless_every_variant_has_one() -> None:
    with pytest.raises(JobInputError) as error:
        resolve_design(_request(variants={"a": {}}))
    assert error.value.loc == ("body", "model")
    per_variant = {"provider": "faux", "id": "x"}
    design = resolve_design(
        _request(variants={"a": {"model": per_variant}, "b": {"model": per_variant}}, baseline="b")
    )
    assert design.arms == ("b", "a")


def test_a_stored_spec_with_limits_this_version_does_not_know_still_reads() -> None:
    """Requests are strict, rows written by other versions are read as far as understood."""
    request = _request(model={"provider": "faux", "id": "solution"})
    design = resolve_design(request, ["a"])
    stored = job_spec(request, design).model_dump(mode="json")
    stored["limits"]["max_widgets"] = 3
    stored["variants"]["default"]["limits"]["max_widgets"] = 3
    stored["variants"]["default"]["retired_field"] = True
    spec = JobSpec.model_validate(stored)
    assert spec.variant("default").limits == design.variants["default"].limits
    with pytest.raises(ValueError, match="max_widgets"):
        JobLimits.model_validate({"max_widgets": 3})

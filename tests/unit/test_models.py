"""The faux and simulated models, in process."""

from __future__ import annotations

import pytest

from sandbox import faux
from sandbox.conversation import ModelRequest, ProviderError, UserMessage
from sandbox.simulated import GIVE_UP, coin_draw, parse_coin, simulated_model

REQUEST = ModelRequest(system="x" * 10, messages=(UserMessage("y" * 7),))


def test_faux_usage_is_ceil_chars_over_four() -> None:
    model = faux.FauxModel([faux.text("abcde")])
    turn = model.complete(REQUEST)
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (5, 2)  # ceil(17/4), ceil(5/4)


def test_faux_step_may_answer_the_request() -> None:
    model = faux.FauxModel([lambda request: faux.text(request.last_user_text().upper())])
    assert model.complete(REQUEST).text == "YYYYYYY"


def test_faux_empty_queue_and_scripted_error() -> None:
    model = faux.FauxModel([faux.error("rate limited")])
    with pytest.raises(ProviderError, match="rate limited"):
        model.complete(REQUEST)
    with pytest.raises(ProviderError, match="No more faux responses queued"):
        model.complete(REQUEST)


def test_coin_is_seeded_by_every_part_of_its_key() -> None:
    base = coin_draw(1, "case", 1, "default")
    assert coin_draw(1, "case", 1, "default") == base
    others = [
        coin_draw(2, "case", 1, "default"),
        coin_draw(1, "other", 1, "default"),
        coin_draw(1, "case", 2, "default"),
        coin_draw(1, "case", 1, "with_docs"),
    ]
    assert base not in others and len(set(others)) == 4


def test_coin_rate_matches_p() -> None:
    draws = [coin_draw(0, f"c{i}", r, "v") for i in range(200) for r in range(1, 11)]
    assert abs(sum(d < 0.85 for d in draws) / len(draws) - 0.85) < 0.03  # 2000 draws: SE 0.8 pp


def test_failed_coin_gives_up_at_every_step() -> None:
    seed = next(s for s in range(100) if coin_draw(s, "c", 1, "v") >= 0.5)
    model, passed, _ = simulated_model(
        "coin?p=0.5", solution=None, seed=seed, case_id="c", round_=1, variant="v"
    )
    assert not passed
    assert [model.complete(REQUEST).text for _ in range(3)] == [GIVE_UP] * 3


@pytest.mark.parametrize("model_id", ["coin?p=2", "coin?p=x", "dice?p=0.5", "coin?p=nan"])
def test_bad_coin_is_a_provider_error(model_id: str) -> None:
    with pytest.raises(ProviderError):
        parse_coin(model_id)

"""The seed's reference evaluator and the simulator: mulberry32 bit for bit, draw order,
failures, deadlines, the CLI."""

from __future__ import annotations

import argparse
import ctypes
import json
import threading
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import pytest

from service.report.commands import add_commands
from service.report.reference_evaluator import FLOOR, Evaluation, evaluate, seeded
from service.report.simulator import simulate

# --- mulberry32 ---------------------------------------------------------------------------

# Printed by node (v18) from the JS original:
#   function mulberry32(a) { return function() { var t = a += 0x6D2B79F5;
#     t = Math.imul(t ^ t >>> 15, t | 1); t ^= t + Math.imul(t ^ t >>> 7, t | 61);
#     return ((t ^ t >>> 14) >>> 0) / 4294967296; } }
JS_MULBERRY32 = {
    1: [
        0.6270739405881613,
        0.002735721180215478,
        0.5274470399599522,
        0.9810509674716741,
        0.9683778982143849,
    ],
    0: [
        0.26642920868471265,
        0.0003297457005828619,
        0.2232720274478197,
        0.1462021479383111,
        0.46732782293111086,
    ],
    42: [
        0.6011037519201636,
        0.44829055899754167,
        0.8524657934904099,
        0.6697340414393693,
        0.17481389874592423,
    ],
    4294967295: [
        0.8964226141106337,
        0.189478256739676,
        0.7156526781618595,
        0.9440599093213677,
        0.8452364315744489,
    ],
    123456789: [
        0.2577907438389957,
        0.9707721115555614,
        0.7853280142880976,
        0.20616457983851433,
        0.30307188746519387,
    ],
}


@pytest.mark.parametrize("seed", sorted(JS_MULBERRY32))
def test_mulberry32_matches_javascript(seed: int) -> None:
    draw = seeded(seed)
    assert [draw() for _ in range(5)] == JS_MULBERRY32[seed]


def test_mulberry32_standard_check_values_for_seed_1() -> None:
    draw = seeded(1)
    assert draw() == 0.6270739405881613
    assert draw() == 0.002735721180215478
    assert draw() == 0.5274470399599522


def test_mulberry32_far_into_the_stream_and_negative_seeds() -> None:
    draw = seeded(7)
    for _ in range(999):
        draw()
    assert draw() == 0.5222152776550502  # node: the 1000th draw of mulberry32(7)
    # JS reduces the seed modulo 2**32: -1 is 4294967295.
    negative = seeded(-1)
    assert [negative() for _ in range(5)] == JS_MULBERRY32[4294967295]


def test_seed_must_be_an_integer() -> None:
    for bad in (1.0, True, "1"):
        with pytest.raises(ValueError, match="seed must be an integer"):
            seeded(bad)  # type: ignore[arg-type]


def c_uint32_draws(seed: int, count: int) -> list[float]:
    """mulberry32 again, independently: every step through ctypes.c_uint32, which wraps."""
    u32 = ctypes.c_uint32
    state = u32(seed)
    draws = []
    for _ in range(count):
        state = u32(state.value + 0x6D2B79F5)
        a = state.value
        t = u32(u32(a ^ (a >> 15)).value * u32(a | 1).value).value
        inner = u32(u32(t ^ (t >> 7)).value * u32(t | 61).value).value
        t = t ^ u32(t + inner).value
        draws.append(u32(t ^ (t >> 14)).value / 4294967296)
    return draws


def test_independent_reimplementation_agrees_on_a_long_stream() -> None:
    draw = seeded(987654321)
    assert [draw() for _ in range(2000)] == c_uint32_draws(987654321, 2000)


# --- simulate -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tasks", "p", "k", "seed"),
    [(10, 0.5, 3, 1), (37, 0.73, 5, 2024), (1, 0.2, 1, 0), (8, 0.9, 8, 7)],
)
def test_simulate_equals_recomputation_from_raw_draws(
    tasks: int, p: float, k: int, seed: int
) -> None:
    result = simulate(tasks, p, k, seed)
    draws = c_uint32_draws(seed, tasks * k)
    # Task-major: task 0 takes draws 0..k-1, task 1 the next k, and so on.
    expected_runs = [[d < p for d in draws[i * k : (i + 1) * k]] for i in range(tasks)]
    assert result.runs == expected_runs
    passes = sum(d < p for d in draws)
    all_pass = sum(all(run) for run in expected_runs)
    # Exact rationals rounded once, so equality, not approx.
    assert result.pass_at_1 == float(Fraction(passes, tasks * k))
    assert result.pass_hat_k == float(Fraction(all_pass, tasks))
    assert (result.errors, result.timeouts, result.k, result.run_deadline_s) == (0, 0, k, None)


def test_simulate_is_reproducible_and_depends_on_the_seed() -> None:
    assert simulate(50, 0.6, 4, 11) == simulate(50, 0.6, 4, 11)
    assert simulate(50, 0.6, 4, 11).runs != simulate(50, 0.6, 4, 12).runs


def test_simulate_extreme_probabilities() -> None:
    never, always = simulate(20, 0.0, 3, 5), simulate(20, 1.0, 3, 5)
    assert (never.pass_at_1, never.pass_hat_k) == (0.0, 0.0)
    assert (always.pass_at_1, always.pass_hat_k) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tasks": 0}, "tasks must be a positive integer, got 0"),
        ({"tasks": True}, "tasks must be a positive integer, got True"),
        ({"k": 0}, "k must be a positive integer, got 0"),
        ({"p": 1.5}, r"p must be a probability in \[0, 1\], got 1.5"),
        ({"p": -0.1}, r"p must be a probability in \[0, 1\], got -0.1"),
        ({"p": float("nan")}, "p must be a probability"),
        ({"seed": 2.0}, "seed must be an integer, got 2.0"),
    ],
)
def test_simulate_refuses_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"tasks": 3, "p": 0.5, "k": 2, "seed": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        simulate(**arguments)


# --- evaluate -----------------------------------------------------------------------------


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test so that abandoned runs stop waiting and their threads end."""
    event = threading.Event()
    yield event
    event.set()


def test_evaluate_runs_each_task_k_times_in_order() -> None:
    calls: list[int] = []

    def task(index: int, passes: bool) -> Callable[[], bool]:
        def run() -> bool:
            calls.append(index)
            return passes

        return run

    result = evaluate([task(0, True), task(1, False), task(2, True)], 3)
    assert calls == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert result.runs == [[True] * 3, [False] * 3, [True] * 3]
    assert result.pass_at_1 == 2 / 3 and result.pass_hat_k == 2 / 3


@pytest.mark.parametrize("timeout_s", [None, 5.0])
def test_a_raising_task_still_gets_k_runs_counted_failed(timeout_s: float | None) -> None:
    calls = {"flaky": 0, "after": 0}

    def flaky() -> bool:
        calls["flaky"] += 1
        if calls["flaky"] % 2:
            raise RuntimeError("boom")
        return True

    def after() -> bool:
        calls["after"] += 1
        return True

    result = evaluate([flaky, after], 4, timeout_s=timeout_s)
    # The run count stays k after a throw: the evaluation neither stops nor skips runs.
    assert calls == {"flaky": 4, "after": 4}
    assert result.runs == [[False, True, False, True], [True] * 4]
    assert (result.errors, result.timeouts) == (2, 0)
    assert result.pass_at_1 == 0.75 and result.pass_hat_k == 0.5


def test_a_task_past_its_deadline_fails_and_the_evaluation_goes_on(
    release: threading.Event,
) -> None:
    started = {"hang": 0, "quick": 0}

    def hang() -> bool:
        started["hang"] += 1
        release.wait(timeout=30)  # far beyond the deadline; released when the test ends
        return True

    def quick() -> bool:
        started["quick"] += 1
        return True

    begun = time.monotonic()
    result = evaluate([hang, quick], 2, timeout_s=0.2)  # 0.2 / (2 * 2) = 0.05 s per run
    elapsed = time.monotonic() - begun
    assert result.run_deadline_s == 0.05
    assert result.runs == [[False, False], [True, True]]
    assert (result.timeouts, result.errors) == (2, 0)
    assert started == {"hang": 2, "quick": 2}
    # Abandoned, not awaited: two 30-second runs did not hold the evaluation up.
    assert elapsed < 10


def test_per_run_deadline_is_the_timeout_share_with_a_floor() -> None:
    def ok() -> bool:
        return True

    assert FLOOR == 0.05
    assert evaluate([ok, ok], 5, timeout_s=10).run_deadline_s == 1.0
    assert evaluate([ok], 1, timeout_s=1e-6).run_deadline_s == FLOOR
    assert evaluate([ok], 1).run_deadline_s is None


def test_the_floor_lets_a_short_run_finish_despite_a_tiny_timeout() -> None:
    def short() -> bool:
        time.sleep(0.005)  # ten times under the floor, far over the 1 microsecond share
        return True

    result = evaluate([short, short], 2, timeout_s=4e-6)
    assert result.runs == [[True, True], [True, True]]
    assert result.timeouts == 0


def test_a_task_raising_timeout_error_is_an_error_not_a_timeout() -> None:
    def raises() -> bool:
        raise TimeoutError("the task's own timeout")

    result = evaluate([raises], 2, timeout_s=10)
    assert (result.errors, result.timeouts, result.runs) == (2, 0, [[False, False]])


@pytest.mark.filterwarnings("error")  # includes "coroutine ... was never awaited"
@pytest.mark.parametrize("timeout_s", [None, 5.0])
def test_non_boolean_results_are_errors(timeout_s: float | None) -> None:
    async def coroutine() -> bool:
        return True

    tasks: list[Callable[[], object]] = [lambda: 1, lambda: None, lambda: "yes", coroutine]
    result = evaluate(tasks, 1, timeout_s=timeout_s)
    assert result.runs == [[False]] * 4
    assert result.errors == 4


@pytest.mark.parametrize("timeout_s", [None, 5.0])
def test_keyboard_interrupt_is_not_swallowed(timeout_s: float | None) -> None:
    def interrupted() -> bool:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate([interrupted], 1, timeout_s=timeout_s)


@pytest.mark.parametrize(
    ("tasks", "k", "timeout_s", "message"),
    [
        ([bool], 0, None, "k must be a positive integer, got 0"),
        ([bool], -2, None, "k must be a positive integer, got -2"),
        ([bool], True, None, "k must be a positive integer, got True"),
        ([bool], 1.0, None, "k must be a positive integer, got 1.0"),
        ([], 1, None, "evaluate needs at least one task"),
        ([bool, 3], 1, None, "task 1 is not callable, got 3"),
        ([bool], 1, 0, "timeout_s must be a positive finite number of seconds, got 0"),
        ([bool], 1, -1.0, "timeout_s must be a positive finite number of seconds, got -1.0"),
        ([bool], 1, float("inf"), "timeout_s must be a positive finite number of seconds, got inf"),
        ([bool], 1, float("nan"), "timeout_s must be a positive finite number of seconds, got nan"),
        ([bool], 1, True, "timeout_s must be a positive finite number of seconds, got True"),
    ],
)
def test_evaluate_refuses_bad_arguments(tasks: Any, k: Any, timeout_s: Any, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        evaluate(tasks, k, timeout_s=timeout_s)
    assert str(raised.value) == message


def test_evaluation_is_a_frozen_record() -> None:
    result = evaluate([lambda: True], 1)
    assert isinstance(result, Evaluation)
    with pytest.raises(AttributeError):
        result.k = 2  # type: ignore[misc]


# --- the simulate command -----------------------------------------------------------------


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="examhall")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_simulate_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--tasks", "25", "--p", "0.7", "--k", "4", "--seed", "9", "--json"]
    assert run_cli(argv) == 0
    out = capsys.readouterr().out
    expected = simulate(25, 0.7, 4, 9)
    assert json.loads(out) == {
        "tasks": 25,
        "k": 4,
        "pass_at_1": expected.pass_at_1,
        "pass_hat_k": expected.pass_hat_k,
    }
    assert out == (
        f'{{"tasks": 25, "k": 4, "pass_at_1": {expected.pass_at_1!r}, '
        f'"pass_hat_k": {expected.pass_hat_k!r}}}\n'
    )


def test_simulate_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["simulate", "--tasks", "10", "--p", "0.5", "--k", "3", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    expected = simulate(10, 0.5, 3, 1)
    assert f"pass@1  {expected.pass_at_1:.4f}" in out
    assert f"pass^3  {expected.pass_hat_k:.4f}" in out


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--p", "1.5"),
        ("--p", "-0.01"),
        ("--p", "nan"),
        ("--p", "half"),
        ("--tasks", "0"),
        ("--tasks", "-3"),
        ("--k", "0"),
        ("--k", "2.5"),
        ("--seed", "-1"),
        ("--seed", "4294967296"),
    ],
)
def test_simulate_bad_flag_is_an_argparse_error_naming_it(
    capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    argv = {"--tasks": "5", "--p": "0.5", "--k": "2", "--seed": "1", flag: value}
    with pytest.raises(SystemExit) as exit_info:
        run_cli(["simulate", *(part for item in argv.items() for part in item)])
    assert exit_info.value.code == 2
    assert f"argument {flag}: " in capsys.readouterr().err

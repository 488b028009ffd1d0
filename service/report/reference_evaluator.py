"""The reference evaluator examhall began from (a JS script), reproduced on purpose.

The reference draws from the JS mulberry32 generator. It is reproduced here bit for bit, so
that `examhall simulate` (`service.report.simulator`) gives the very numbers the reference
gives for a seed: `seeded` is mulberry32 in 32-bit unsigned arithmetic, and `evaluate` runs
tasks k times and consumes draws in the reference's order (task by task, each task's k runs
in turn). Pass rates come from `service.report.estimates`, which rounds once from the exact
rational mean, so the floats do not depend on summation order either.

It is not how the service runs trials (the scheduler does, in containers); only the
simulator uses it.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import Literal

from service.report import estimates

_MASK32 = 0xFFFFFFFF
_TWO_32 = 4294967296.0  # 2**32

FLOOR = 0.05
"""Smallest per-run deadline, in seconds.

The per-run deadline is timeout_s / (tasks * k). With many runs and a small timeout that
share could fall to microseconds, below the cost of starting a thread and one OS scheduling
quantum (a few ms), and every run would "time out" for reasons that have nothing to do with
the task. 50 ms is far above that noise yet short enough that a hung run cannot stall a plan.
The price: when the floor applies, the whole evaluation may take up to FLOOR * tasks * k,
longer than timeout_s.
"""

Task = Callable[[], object]
"""One run of a task: returns True (passed) or False (failed). Anything else is an error."""

_RunOutcome = Literal["passed", "failed", "error", "timeout"]


def _imul(a: int, b: int) -> int:
    """JS Math.imul: the low 32 bits of the product (kept unsigned; only the bits matter)."""
    return (a * b) & _MASK32


def seeded(seed: int) -> Callable[[], float]:
    """mulberry32: a generator of floats in [0, 1), identical to the JS original.

    The seed is taken modulo 2**32 as JS does (so -1 and 4294967295 give the same stream).
    Every intermediate is masked to 32 bits; `>>` on a non-negative masked int is JS `>>>`.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    state = seed & _MASK32

    def draw() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & _MASK32
        t = _imul(state ^ (state >> 15), state | 1)
        t ^= (t + _imul(t ^ (t >> 7), t | 61)) & _MASK32
        return ((t ^ (t >> 14)) & _MASK32) / _TWO_32

    return draw


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The outcome of running every task k times."""

    runs: list[list[bool]]
    """Per task, in task order: k outcomes in run order (a failed, errored or timed-out run is
    False). Always exactly k entries, whatever happened."""
    k: int
    pass_at_1: float
    pass_hat_k: float
    errors: int
    """Runs that raised an exception or returned something other than a bool."""
    timeouts: int
    """Runs abandoned at the per-run deadline."""
    run_deadline_s: float | None
    """The per-run deadline that applied (None: no timeout was given)."""


def check_positive_int(name: str, value: object) -> int:
    # bool is an int subclass; True as a count is a bug, not a 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _judge(result: object) -> _RunOutcome:
    if result is True:
        return "passed"
    if result is False:
        return "failed"
    if inspect.iscoroutine(result):
        # evaluate() is synchronous; close it so Python does not warn "never awaited".
        result.close()
    return "error"


def _run_inline(task: Task) -> _RunOutcome:
    try:
        result = task()
    except Exception:
        return "error"
    return _judge(result)


def _run_with_deadline(task: Task, deadline_s: float) -> _RunOutcome:
    """Run `task` in a fresh daemon thread; past the deadline, abandon it.

    Python cannot kill a thread. A ThreadPoolExecutor would keep the hung worker (and block
    every later run queued behind it, then block interpreter exit, which joins pool
    threads). A daemon thread per run is simply left behind: its late result goes nowhere.
    """
    future: Future[object] = Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = task()
        except BaseException as exc:  # handed to the caller, which decides below
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=target, name="examhall-evaluate-run", daemon=True).start()
    # wait() rather than future.result(timeout=...): since 3.11 the futures TimeoutError is
    # the builtin one, so a task that itself raised TimeoutError would look like an overrun.
    done, _ = wait([future], timeout=deadline_s)
    if not done:
        return "timeout"
    exc = future.exception()
    if exc is None:
        return _judge(future.result())
    if isinstance(exc, Exception):
        return "error"
    raise exc  # KeyboardInterrupt, SystemExit: as if the task had run inline


def evaluate(tasks: Sequence[Task], k: int, timeout_s: float | None = None) -> Evaluation:
    """Run each task k times, in task order, and score the runs.

    A run that raises, returns a non-bool or overruns its deadline is a failed run; the
    evaluation always goes on, and every task gets exactly k runs. With `timeout_s`, each run
    gets max(FLOOR, timeout_s / (len(tasks) * k)) seconds in a worker thread; without it,
    runs execute inline on the calling thread (nothing to enforce, no thread to pay for).
    """
    k = check_positive_int("k", k)
    task_list = list(tasks)
    if not task_list:
        raise ValueError("evaluate needs at least one task")
    for index, task in enumerate(task_list):
        if not callable(task):
            raise ValueError(f"task {index} is not callable, got {task!r}")
    deadline_s: float | None = None
    if timeout_s is not None:
        if (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, int | float)
            or not math.isfinite(timeout_s)
            or timeout_s <= 0
        ):
            raise ValueError(
                f"timeout_s must be a positive finite number of seconds, got {timeout_s!r}"
            )
        deadline_s = max(FLOOR, timeout_s / (len(task_list) * k))

    runs: list[list[bool]] = []
    errors = timeouts = 0
    for task in task_list:
        outcomes: list[bool] = []
        for _ in range(k):
            outcome = (
                _run_inline(task) if deadline_s is None else _run_with_deadline(task, deadline_s)
            )
            errors += outcome == "error"
            timeouts += outcome == "timeout"
            outcomes.append(outcome == "passed")
        runs.append(outcomes)

    cases = {str(index): outcomes for index, outcomes in enumerate(runs)}
    pass_at_1 = estimates.pass_at_1(cases)
    pass_hat_k = estimates.pass_hat_k(cases, k)
    # Every task has exactly k >= 1 outcomes, so both are defined.
    assert pass_at_1 is not None and pass_hat_k is not None
    return Evaluation(
        runs=runs,
        k=k,
        pass_at_1=pass_at_1,
        pass_hat_k=pass_hat_k,
        errors=errors,
        timeouts=timeouts,
        run_deadline_s=deadline_s,
    )

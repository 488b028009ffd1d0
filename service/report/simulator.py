"""Planning repetitions: pass@1 and pass^k of simulated tasks, to see how many runs (k) a
design needs before it runs any (`examhall simulate`)."""

from __future__ import annotations

from service.report.reference_evaluator import Evaluation, check_positive_int, evaluate, seeded


def simulate(tasks: int, p: float, k: int, seed: int) -> Evaluation:
    """`tasks` tasks that each pass a run with probability p, drawn from seeded(seed).

    One generator for the whole design; task 1's k runs take the first k draws, task 2's the
    next k, and so on. A run passes when its draw < p, so p=0 never passes and p=1 always
    does (draws are < 1).
    """
    tasks = check_positive_int("tasks", tasks)
    k = check_positive_int("k", k)
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
        raise ValueError(f"p must be a probability in [0, 1], got {p!r}")
    draw = seeded(seed)

    def run() -> bool:
        return draw() < p

    # The same closure for every task: what matters is that all of them share `draw` and
    # that evaluate() calls them in order, inline (no timeout, so no threads reordering).
    return evaluate([run] * tasks, k)

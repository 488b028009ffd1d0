"""CLI commands over the statistics layer: `simulate` and `stats`.

`service.cli` registers them with `add_commands(sub)`. Each command returns its exit code:
0 on success, 2 on bad input (argparse itself exits 2 on bad flags).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from service.report import estimates, simulator

_SEED_MAX = 0xFFFFFFFF


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be a positive integer")
    return value


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} is not a probability in [0, 1]")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    # mulberry32 takes its seed modulo 2**32; outside this range two different seeds would
    # silently give the same stream, so the CLI refuses them instead.
    if not 0 <= value <= _SEED_MAX:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, {_SEED_MAX}]")
    return value


def cmd_simulate(args: argparse.Namespace) -> int:
    result = simulator.simulate(args.tasks, args.p, args.k, args.seed)
    if args.json:
        print(
            json.dumps(
                {
                    "tasks": args.tasks,
                    "k": args.k,
                    "pass_at_1": result.pass_at_1,
                    "pass_hat_k": result.pass_hat_k,
                }
            )
        )
        return 0
    rows = [
        ("tasks", str(args.tasks)),
        ("k", str(args.k)),
        ("p", repr(args.p)),
        ("seed", str(args.seed)),
        ("pass@1", f"{result.pass_at_1:.4f}"),
        (f"pass^{args.k}", f"{result.pass_hat_k:.4f}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


class _Malformed(Exception):
    pass


def _parse_row(line: str) -> tuple[str, bool]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(row, dict):
        raise _Malformed(f"expected an object, got {type(row).__name__}")
    if "case" not in row:
        raise _Malformed('missing "case"')
    if "passed" not in row:
        raise _Malformed('missing "passed"')
    case, passed = row["case"], row["passed"]
    # Integers are accepted as ids (and keyed as text); bools, floats and objects are not ids.
    if isinstance(case, bool) or not isinstance(case, str | int) or case == "":
        raise _Malformed(f'"case" must be a non-empty string or an integer, got {case!r}')
    if not isinstance(passed, bool):
        raise _Malformed(f'"passed" must be true or false, got {json.dumps(passed)}')
    return str(case), passed


def read_outcomes(path: Path) -> dict[str, list[bool]]:
    """Case outcomes from JSON lines {"case": ..., "passed": true|false}; blank lines skipped.

    Raises ValueError("FILE:LINE: ...") on the first malformed line.
    """
    cases: dict[str, list[bool]] = {}
    # Bytes first, so that bad UTF-8 is reported with its line number too.
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
            if not line.strip():
                continue
            case, passed = _parse_row(line)
        except UnicodeDecodeError:
            raise ValueError(f"{path}:{number}: not UTF-8") from None
        except _Malformed as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
        cases.setdefault(case, []).append(passed)
    return cases


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _print_stats_table(summary: dict[str, Any]) -> None:
    k = summary["k"]
    print(f"cases {summary['cases']}  trials {summary['trials']}  k {k}  seed {summary['seed']}")
    header = ("metric", "value", "95% CI", "clustered SE", "cases", "note")
    rows = [header]
    for key, label in (
        ("pass_at_1", "pass@1"),
        ("pass_hat_k", f"pass^{k}"),
        ("pass_at_k", f"pass@{k}"),
    ):
        metric = summary[key]
        ci = metric["ci95"]
        rows.append(
            (
                label,
                _number(metric["value"]),
                "-" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]",
                _number(metric["stderr_clustered"]),
                str(metric["cases_used"]),
                metric["reason"] or "",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())


def cmd_stats(args: argparse.Namespace) -> int:
    try:
        cases = read_outcomes(Path(args.file))
    except OSError as exc:
        print(f"examhall: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    summary = estimates.summarize(cases, args.k, seed=args.seed)
    if args.json:
        # allow_nan=False: the layer promises nulls with reasons, never NaN; fail loudly if not.
        print(json.dumps(summary, allow_nan=False))
    else:
        _print_stats_table(summary)
    return 0


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `simulate` and `stats` on the top-level parser's subparsers."""
    simulate = subparsers.add_parser(
        "simulate",
        help="pass@1 and pass^k of simulated tasks (mulberry32, reproducible by seed)",
        description="Each of N tasks runs k times; a run passes when its seeded draw < p.",
    )
    simulate.add_argument("--tasks", type=_positive_int, required=True, help="number of tasks")
    simulate.add_argument("--p", type=_probability, required=True, help="pass probability")
    simulate.add_argument("--k", type=_positive_int, required=True, help="runs per task")
    simulate.add_argument("--seed", type=_seed, required=True, help=f"0..{_SEED_MAX}")
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.set_defaults(func=cmd_simulate)  # service.cli dispatches on args.func

    stats = subparsers.add_parser(
        "stats",
        help="pass@1, pass^k, pass@k with intervals from a JSON-lines file of trial outcomes",
        description='Reads lines {"case": ID, "passed": true|false}; the case is the unit.',
    )
    stats.add_argument("file", help="JSON lines, one scored trial a line")
    stats.add_argument("--k", type=_positive_int, required=True)
    stats.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(func=cmd_stats)

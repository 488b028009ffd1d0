"""Commands that talk to a running control plane over HTTP: submit, cancel, report, export."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from examhall import ApiError, ArchiveError, Client
from sandbox.protocol import ModelRef
from service.cli import check_tasks, task_sets
from service.cli.connection import add_connection, connect, failure
from service.cli.progress import watch
from service.domain.status import JobStatus
from service.report.model import report_json

SUITE_HELP = (
    "a suite file (.py, uploaded), a directory of Harbor tasks (packed and uploaded), a task "
    "set pushed with `examhall suites push` (NAME@VERSION, or NAME for its newest), or the "
    "name of a suite the server ships"
)


def suite_field(suite: str) -> str | dict[str, str]:
    """The job body's `suite` for a file or a shipped name; a directory is uploaded first
    (cmd_submit), so it is not handled here."""
    path = Path(suite)
    if path.is_dir():
        raise ValueError(f"Suite {suite} is a directory: upload it with Client.upload.")
    if path.suffix == ".py" or path.exists():
        try:
            return {"name": path.stem, "source": path.read_text()}
        except OSError as exc:
            raise ValueError(f"Cannot read suite file {suite}: {exc.strerror}.") from None
    return suite


def job_body(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /v1/jobs body: --body's JSON object, with the flags on top."""
    body: dict[str, Any] = {}
    if args.body:
        try:
            loaded = json.loads(Path(args.body).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"Cannot read --body {args.body}: {exc}") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"--body {args.body} must hold a JSON object (a job body).")
        body.update(loaded)
    if not Path(args.suite).is_dir():  # a directory is uploaded, and named by id, later
        body["suite"] = suite_field(args.suite)
    if args.model:
        model = ModelRef.parse(args.model)
        body["model"] = {"provider": model.provider, "id": model.id}
    if args.cases:
        body["cases"] = [c for c in args.cases.split(",") if c]
    for flag in ("rounds", "seed", "concurrency"):
        if getattr(args, flag) is not None:
            body[flag] = getattr(args, flag)
    if args.timeout is not None:
        body.setdefault("limits", {})["timeout_s"] = args.timeout
    if args.agent:
        body["variants"] = {args.agent: {"agent": args.agent}}
    return body


def follow_and_report(client: Client, job_id: str) -> int:
    """Progress bar from the job's stream, then the text report. Exit 1 when a comparison's
    headline is withheld, 3 when the job was cancelled, 4 when it could not run (a task
    environment that did not build)."""
    job = watch(client, job_id)
    if job.error:
        print(f"examhall: job {job_id} did not run: {job.error}", file=sys.stderr)
        return 4
    print(client.report_text(job_id), end="")
    if job.status == JobStatus.CANCELLED:
        return 3
    withheld = [c for c in client.report(job_id).comparisons if not c.headline]
    return 1 if withheld else 0


def cmd_submit(args: argparse.Namespace) -> int:
    try:
        body = job_body(args)
    except ValueError as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    client = connect(args)
    job_id = None
    try:
        if Path(args.suite).is_dir():
            suite = client.upload(args.suite)
            body["suite"] = suite.id
            print(f"Uploaded {args.suite} as suite {body['suite']}.", file=sys.stderr)
            for refused in suite.refused:
                print(f"Left out task {refused.task}, refused:", file=sys.stderr)
                for problem in refused.problems:
                    print(f"  {problem}", file=sys.stderr)
        job = client.submit(body)
        job_id = job.id
        print(f"Submitted {job_id}: {job.planned_trials} trials.", file=sys.stderr)
        if args.detach:
            print(job_id)
            return 0
        return follow_and_report(client, job_id)
    except (ApiError, ArchiveError, httpx.TransportError) as exc:
        print(failure(args, exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if job_id:
            print(
                f"\nStopped following {job_id}; it goes on running. "
                f"Cancel it with `examhall cancel {job_id}`.",
                file=sys.stderr,
            )
        return 130
    finally:
        client.close()


def cmd_cancel(args: argparse.Namespace) -> int:
    client = connect(args)
    try:
        job = client.cancel(args.job)
    except (ApiError, httpx.TransportError) as exc:
        print(failure(args, exc), file=sys.stderr)
        return 2
    finally:
        client.close()
    print(f"{args.job}: {job.status}; kept {job.counts.finished} finished trial(s).")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Print a job's report; exit 1 when any comparison's headline is withheld."""
    client = connect(args)
    try:
        report = client.report(args.job)
        shown = json.dumps(report_json(report), indent=2) if args.json else None
        print(shown or client.report_text(args.job), end="")
    except (ApiError, httpx.TransportError) as exc:
        print(failure(args, exc), file=sys.stderr)
        return 2
    finally:
        client.close()
    if args.json:
        print()
    withheld = [c for c in report.comparisons if c.headline is None]
    return 1 if withheld else 0


def cmd_export(args: argparse.Namespace) -> int:
    client = connect(args)
    try:
        path = client.export(args.job, args.format, path=args.output)
    except (ApiError, httpx.TransportError) as exc:
        print(failure(args, exc), file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"examhall: cannot write {exc.filename or args.output}: {exc.strerror}; name a "
            "writable file or directory with -o.",
            file=sys.stderr,
        )
        return 2
    finally:
        client.close()
    print(path)
    return 0


def add_remote_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    submit = sub.add_parser("submit", help="submit a job, follow its progress and print its report")
    submit.add_argument("suite", help=SUITE_HELP)
    submit.add_argument("--model", help="PROVIDER/MODEL (default: the server's)")
    submit.add_argument("--rounds", type=int, help="runs of each case (k)")
    submit.add_argument("--cases", help="comma-separated case ids (default: all)")
    submit.add_argument("--seed", type=int)
    submit.add_argument("--timeout", type=float, help="per-trial timeout, seconds")
    submit.add_argument(
        "--concurrency",
        type=int,
        help="at most this many of the job's trials at once (at most the team's cap)",
    )
    submit.add_argument(
        "--agent",
        choices=("oracle", "nop"),
        help="run a task suite with a built-in agent instead of a model",
    )
    submit.add_argument(
        "--body", help="a JSON file with more of the job body (variants, docs, limits, ...)"
    )
    submit.add_argument("--detach", action="store_true", help="print the job id and return at once")
    add_connection(submit)
    submit.set_defaults(func=cmd_submit)

    cancel = sub.add_parser("cancel", help="cancel a job (finished trials are kept)")
    cancel.add_argument("job")
    add_connection(cancel)
    cancel.set_defaults(func=cmd_cancel)

    report = sub.add_parser(
        "report", help="print a job's report (exit 1 when a comparison's headline is withheld)"
    )
    report.add_argument("job")
    report.add_argument("--json", action="store_true")
    add_connection(report)
    report.set_defaults(func=cmd_report)

    export = sub.add_parser(
        "export", help="write a job's results in another tool's format (Inspect's eval log)"
    )
    export.add_argument("job")
    export.add_argument("--format", choices=("inspect",), default="inspect")
    export.add_argument(
        "-o",
        "--output",
        required=True,
        help="the file to write, or a directory to write it in under Inspect's name for it",
    )
    add_connection(export)
    export.set_defaults(func=cmd_export)

    check_tasks.add_command(sub, add_connection)
    task_sets.add_commands(sub, add_connection)

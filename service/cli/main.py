"""The `examhall` command line."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import docker
import docker.errors
import httpx

from examhall import ApiError
from sandbox.protocol import Limits, ModelRef
from sandbox.providers.client import Budget
from service.backends.base import FoundSandbox, SandboxError
from service.backends.docker import DockerBackend, DockerSettings
from service.backends.registry import create_backend
from service.cli import listen
from service.cli.admin import add_admin_commands
from service.cli.box import add_box_commands
from service.cli.local import local_control_plane
from service.cli.progress import watch
from service.cli.remote import add_remote_commands
from service.domain.agents import AGENTS
from service.domain.job_spec import JobLimits, ModelSpec, VariantSpec
from service.images import sandbox_image
from service.images.agent_images import ensure_agent_image
from service.launch.launcher import Launcher
from service.launch.trial import TrialRecord, launch_trial
from service.owners import owner_gone
from service.providers import ProviderRegistry
from service.report.commands import add_commands as add_report_commands
from service.scheduler.listing import list_cases
from service.scheduler.run_spec import run_spec
from service.settings import ConfigError, database_url, front_settings, get_settings, max_containers
from service.suites import SuiteError
from service.suites.python import load_suite


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _client() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
        return client
    except docker.errors.DockerException as exc:
        raise SystemExit(
            f"examhall: cannot reach the Docker engine ({exc}); start it or set DOCKER_HOST."
        ) from None


def _launcher(quiet: bool = False) -> Launcher:
    """A launcher on the box's backend (EXAMHALL_BACKEND), as the control plane has."""
    progress = (lambda _line: None) if quiet else _progress
    try:
        return Launcher(create_backend(get_settings().backend, progress))
    except (SandboxError, ValueError) as exc:
        raise SystemExit(f"examhall: {exc}") from None


def _positive(kind: type[float] | type[int]) -> Any:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be positive and finite")
        return value

    return parse


def cmd_image_build(args: argparse.Namespace) -> int:
    client = _client()
    ref = sandbox_image.ensure_sandbox_image(
        client, base=args.base, force=args.force, progress=_progress
    )
    if args.agent:
        agent = AGENTS[args.agent]
        ref = ensure_agent_image(client, ref, agent.name, agent.requirement, progress=_progress)
    print(ref)
    return 0


def _list_deadline() -> float:
    """EXAMHALL_LIST_TIMEOUT_S, as the control plane reads it (a bad value is a SuiteError)."""
    try:
        return front_settings().list_timeout_s
    except ValueError as exc:
        raise SuiteError(str(exc)) from None


def cmd_cases(args: argparse.Namespace) -> int:
    try:
        cases = list_cases(
            _launcher(quiet=True), load_suite(args.suite), deadline_s=_list_deadline()
        )
    except SuiteError as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    for case in cases:
        print(case.id)
    return 0


def record_json(record: TrialRecord) -> dict[str, Any]:
    result = dataclasses.asdict(record.result)
    return {
        "trial_id": record.trial_id,
        **result,
        "steps": record.steps,
        "events": [dataclasses.asdict(e) for e in record.events],
        "artifacts": {name: {"size": len(data)} for name, data in record.artifacts.items()},
        "wall_s": round(record.wall_s, 3),
        "cost_usd": record.cost_usd,
    }


CANARY_NAME = "EXAMHALL_CANARY_KEY"


def new_canary() -> str:
    return f"exh-canary-{uuid.uuid4().hex}"


def canary_leaks(record: TrialRecord, canary: str) -> list[str]:
    """Every place outside the worker's memory where the canary shows up."""
    places = [
        f"event {i}"
        for i, e in enumerate(record.events)
        if canary in json.dumps(dataclasses.asdict(e))
    ]
    places += [f"artifact {n}" for n, data in record.artifacts.items() if canary.encode() in data]
    if canary in json.dumps(dataclasses.asdict(record.result)):
        places.append("result")
    if record.sandbox is not None and canary in record.sandbox.stderr_tail:
        places.append("worker log")
    return places


def _summary(record: TrialRecord) -> str:
    r = record.result
    score = "-" if r.score is None else f"{r.score:.2f}"
    line = f"{r.outcome:<7} score={score} tools={r.tool_calls} {record.wall_s:.1f}s"
    if r.error_kind:
        line += f"  {r.error_kind}: {r.error_message}"
    return line


def cmd_run_trial(args: argparse.Namespace) -> int:
    try:
        bundle = load_suite(args.suite)
        model = ModelRef.parse(args.model)
        providers = ProviderRegistry.load()
    except (SuiteError, ValueError) as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    launcher = _launcher(quiet=args.json)
    try:
        cases = list_cases(launcher, bundle, deadline_s=_list_deadline())
        infos = {info.id: info for info in cases}
    except SuiteError as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    if args.case not in infos:
        known = ", ".join(infos)
        print(f"examhall: case {args.case!r} is not in suite {bundle.name}; its cases: {known}.",
              file=sys.stderr)  # fmt: skip
        return 2
    scripts = {args.case: infos[args.case].scripts}
    if (problem := providers.model_problem(model.provider, model.id, scripts)) is not None:
        print(f"examhall: {problem[1]}", file=sys.stderr)
        return 2
    # The same harness a job's variant would be, launched the way the scheduler launches it.
    try:
        harness = VariantSpec(
            model=ModelSpec(provider=model.provider, id=model.id),
            tools=args.tools.split(",") if args.tools else None,
            limits=JobLimits(timeout_s=args.timeout, max_turns=args.max_turns),
        )
    except ValueError as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    spec = run_spec(
        trial_id=f"trial-{uuid.uuid4().hex[:12]}",
        suite=bundle,
        case_id=args.case,
        variant=args.variant,
        harness=harness,
        round_=args.round,
        seed=args.seed,
        providers=providers,
    )
    canary = new_canary() if args.canary else None
    if canary is not None:
        spec = dataclasses.replace(spec, credentials={CANARY_NAME: canary})
    with httpx.Client(timeout=httpx.Timeout(120.0, connect=10.0)) as http:
        record = launch_trial(
            launcher,
            spec,
            job_id="cli",
            deadline_s=args.timeout,
            budget=Budget(),
            providers=providers,
            http=http,
        )
    output = record_json(record)
    if canary is not None:
        output["canary_leaked"] = canary_leaks(record, canary)
    if args.json:
        print(json.dumps(output, indent=2))
    else:
        print(f"{args.case}: {_summary(record)}")
        if canary is not None:
            print(f"canary leaked into: {output['canary_leaked'] or 'nothing'}")
    leaked = bool(output.get("canary_leaked"))
    return 0 if record.result.outcome == "passed" and not leaked else 1


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.app import create_app

    # Every setting is checked, and the port bound, before the app's start-up migrates the
    # store, recovers trials and starts the scheduler: a mistake fails in a second, with
    # the reason, and changes nothing.
    max_containers()
    database_url()
    app = create_app()
    sock = listen.bind(args.host, args.port)
    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="info"))
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
    url = f"http://{host}:{sock.getsockname()[1]}"
    print(
        f"examhall: serving at {url} (the API under /v1, the web UI at /ui, the API's docs at "
        "/docs) once started; Ctrl-C stops it.",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        # uvicorn shut down cleanly on the signal, then raised it again for whoever called.
        print("examhall: stopped.", file=sys.stderr)
        return 0
    finally:
        sock.close()
    # 3, as uvicorn.run exits, when the app's start-up failed (its log says why).
    return 0 if server.started else 3


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job end to end: a control plane on SQLite, the smoke suite over HTTP."""
    try:
        model = ModelRef.parse(args.model)
    except ValueError as exc:
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    with local_control_plane() as client:
        body = {
            "suite": "smoke",
            "model": {"provider": model.provider, "id": model.id},
            "rounds": args.rounds,
            "seed": args.seed,
        }
        try:
            job = client.submit(body)
        except ApiError as exc:
            print(f"examhall: {exc}", file=sys.stderr)
            return 2
        _progress(f"Submitted {job.id}: {job.planned_trials} trials ({args.model}).")
        watch(client, job.id)
        print(client.report_text(job.id), end="")
    return 0


def cmd_reap(args: argparse.Namespace) -> int:
    client = _client()
    launcher = Launcher(DockerBackend(DockerSettings(image="unused", pool_size=0), client))

    def doomed(found: FoundSandbox) -> bool:
        return bool(args.all) or owner_gone(found.owner)

    removed = launcher.reap(doomed)
    print(f"Removed {len(removed)} examhall container(s).")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="examhall", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    image = sub.add_parser("image", help="the sandbox image").add_subparsers(
        dest="image_command", required=True
    )
    build = image.add_parser("build", help="build the sandbox image (skipped when up to date)")
    build.add_argument("--base", help=f"base image (default {sandbox_image.DEFAULT_BASE})")
    build.add_argument("--force", action="store_true", help="rebuild even when up to date")
    build.add_argument(
        "--agent",
        choices=sorted(AGENTS),
        help="also build the variant with this third-party agent CLI installed",
    )
    build.set_defaults(func=cmd_image_build)

    add_box_commands(sub)

    cases = sub.add_parser("cases", help="list a suite's case ids, one a line")
    cases.add_argument("suite", help="a suite file or a shipped suite name")
    cases.set_defaults(func=cmd_cases)

    run = sub.add_parser("run-trial", help="run one trial in a fresh container")
    run.add_argument("--suite", required=True)
    run.add_argument("--case", required=True)
    run.add_argument("--model", required=True, help="PROVIDER/MODEL, e.g. faux/solution")
    run.add_argument("--timeout", type=_positive(float), default=600.0, help="seconds")
    run.add_argument("--max-turns", type=_positive(int), default=Limits.max_turns)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--round", type=_positive(int), default=1)
    run.add_argument("--variant", default="default")
    run.add_argument("--tools", help="comma-separated tool names (default: the case's)")
    run.add_argument("--json", action="store_true", help="print the whole result as JSON")
    run.add_argument(
        "--canary",
        action="store_true",
        help="pass a generated canary as a credential and report where it leaked",
    )
    run.set_defaults(func=cmd_run_trial)

    serve = sub.add_parser("serve", help="run the control plane (HTTP API and scheduler)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.set_defaults(func=cmd_serve)

    demo = sub.add_parser(
        "demo", help="start a control plane, run the smoke suite as a job over HTTP, report"
    )
    demo.add_argument("--model", default="simulated/coin?p=0.8")
    demo.add_argument("--rounds", type=_positive(int), default=5)
    demo.add_argument("--seed", type=int, default=7)
    demo.set_defaults(func=cmd_demo)

    add_report_commands(sub)

    add_remote_commands(sub)
    add_admin_commands(sub)

    reap = sub.add_parser(
        "reap", help="remove examhall containers whose control plane on this host has died"
    )
    reap.add_argument(
        "--all", action="store_true", help="every examhall container, running trials included"
    )
    reap.set_defaults(func=cmd_reap)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except ConfigError as exc:
        # A setting the operator has to fix: the message says which and how.
        print(f"examhall: {exc}", file=sys.stderr)
        return 2
    return result

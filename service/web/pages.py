"""The pages, as pure functions from what the API would return to an HTML document."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from service.api.schemas import EventView, JobView, TrialView
from service.web.charts import pass_rate_chart
from service.web.grid import GridTrial, grid_table
from service.web.markup import esc, interval, layout, meta_list, number, pct, table, td
from service.web.transcript import transcript

# While work is outstanding the page reloads itself this often (seconds).
REFRESH_S = 5


def _when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _badge(state: str | None) -> str:
    state = state or "none"
    return f'<span class="badge {esc(state)}">{esc(state)}</span>'


def model_text(spec: dict[str, Any]) -> str:
    """The job's model, or each variant's when they differ."""
    arms: dict[str, str] = {}
    for name, harness in (spec.get("variants") or {}).items():
        model = harness.get("model") if isinstance(harness, dict) else None
        if isinstance(model, dict):
            arms[str(name)] = f"{model.get('provider')}/{model.get('id')}"
    if not arms:
        return "?"
    if len(set(arms.values())) == 1:
        return next(iter(arms.values()))
    return ", ".join(f"{name}: {model}" for name, model in arms.items())


def variant_order(spec: dict[str, Any]) -> list[str]:
    """Baseline first for comparisons (the report's arms), else as the job named them."""
    arms = [str(a) for a in spec.get("arms") or []]
    return arms or [str(v) for v in spec.get("variants") or {}]


# ----- login and errors ---------------------------------------------------------------


def login_page(error: str | None = None, next_url: str = "/ui/jobs") -> str:
    message = f'<p class="error-text" role="alert">{esc(error)}</p>' if error else ""
    body = (
        "<h1>Sign in</h1>"
        f"{message}"
        '<form class="login" method="post" action="/ui/login">'
        '<label for="token">API token</label>'
        '<input type="password" id="token" name="token" autocomplete="current-password" '
        "required autofocus>"
        f'<input type="hidden" name="next" value="{esc(next_url)}">'
        '<button type="submit">Sign in</button>'
        '<p class="muted">A team\'s token from <code>examhall admin create-token TEAM</code>, '
        "or the box's admin token.</p></form>"
    )
    return layout("Sign in", body)


def refused_page(message: str) -> str:
    body = f'<h1>Refused</h1><p>{esc(message)}</p><p><a href="/ui/jobs">All jobs</a></p>'
    return layout("Refused", body)


def not_found_page(message: str, who: str) -> str:
    body = f'<h1>Not found</h1><p>{esc(message)}</p><p><a href="/ui/jobs">All jobs</a></p>'
    return layout("Not found", body, who=who)


# ----- the jobs list ------------------------------------------------------------------


def jobs_page(jobs: Sequence[JobView], who: str) -> str:
    rows = []
    for job in jobs:
        counts = job.counts
        rows.append(
            [
                f'<td><a href="/ui/jobs/{esc(job.id)}">{esc(job.id)}</a></td>',
                td(job.suite),
                f"<td>{_badge(job.status)}</td>",
                td(job.team or "admin"),
                td(model_text(job.spec)),
                td(f"{counts.finished}/{job.planned_trials}", "num"),
                td(counts.passed, "num"),
                td(counts.failed, "num"),
                td(counts.error, "num"),
                td(_when(job.created_at)),
            ]
        )
    if rows:
        listing = table(
            [
                "job",
                "suite",
                "status",
                "team",
                "model",
                "finished",
                "passed",
                "failed",
                "error",
                "submitted (UTC)",
            ],
            rows,
            "jobs",
        )
    else:
        listing = '<p class="muted">No jobs yet. Submit one with <code>POST /v1/jobs</code>.</p>'
    busy = any(job.status in ("queued", "running") for job in jobs)
    return layout("Jobs", f"<h1>Jobs</h1>{listing}", who=who, refresh_s=REFRESH_S if busy else None)


# ----- a job --------------------------------------------------------------------------


def _metric_cell(metric: dict[str, Any]) -> str:
    if metric["value"] is None:
        return f'<td class="na">n/a <span class="muted">({esc(metric["reason"])})</span></td>'
    text = f"<strong>{esc(pct(metric['value']))}</strong>"
    if metric["ci95"] is not None:
        text += f" {esc(interval(metric['ci95']))}"
    if metric["stderr_clustered"] is not None:
        text += f' <span class="muted">SE {100 * metric["stderr_clustered"]:.1f} pp</span>'
    elif metric["reason"]:
        text += f' <span class="muted">({esc(metric["reason"])})</span>'
    return f'<td class="metric">{text}</td>'


def _variants_table(variants: list[dict[str, Any]], k: int) -> str:
    rows = []
    for v in variants:
        out = v["outcomes"]
        kinds = ", ".join(f"{n} {kind}" for kind, n in out["error_kinds"].items())
        outcome_text = f"{out['passed']} passed, {out['failed']} failed, {out['error']} error"
        if kinds:
            outcome_text += f" ({kinds})"
        if out["unfinished"]:
            outcome_text += f", {out['unfinished']} unfinished"
        rows.append(
            [
                f'<th scope="row" class="variant">{esc(v["name"])}</th>',
                td(v["scored_trials"], "num"),
                _metric_cell(v["pass_at_1"]),
                _metric_cell(v["pass_hat_k"]),
                _metric_cell(v["pass_at_k"]),
                td(outcome_text),
            ]
        )
    return table(
        ["variant", "scored", "pass@1 [95% CI]", f"pass^{k}", f"pass@{k}", "outcomes"],
        rows,
        "variants",
    )


def _headline(comparison: dict[str, Any]) -> str:
    head = comparison["headline"]
    base, cand = comparison["baseline"], comparison["candidate"]
    if head is None:
        return f'<p class="withheld notice">Lift withheld: {esc(comparison["withheld_reason"])}</p>'
    ci = head["lift_ci95_pp"]
    ci_text = (
        f"[95% CI {ci[0]:+.1f} to {ci[1]:+.1f} pp]"
        if ci is not None
        else f"(no interval: {head['lift_ci95_reason']})"
    )
    items = [
        ("lift", f'<strong class="lift">{head["lift_pp"]:+.1f} pp</strong> {esc(ci_text)}'),
        (
            "pass rate",
            esc(
                f"{cand} {pct(head['candidate_pass_rate'])}, "
                f"{base} {pct(head['baseline_pass_rate'])} over {head['cases']} cases"
            ),
        ),
        ("wins / ties / losses", esc(f"{head['wins']} / {head['ties']} / {head['losses']}")),
        (
            "McNemar mid-p",
            esc(f"{head['mcnemar_midp']:.3g}")
            + (
                f' <span class="muted">{esc(head["mcnemar_note"])}</span>'
                if head["mcnemar_note"]
                else ""
            ),
        ),
        (
            "MDE (80% power)",
            esc(
                f"{head['mde_pp']:.1f} pp"
                if head["mde_pp"] is not None
                else f"n/a ({head['mde_reason']})"
            ),
        ),
    ]
    hat = head["pass_hat_k"]
    items.append(
        (
            f"pass^{head['k']}",
            esc(
                f"n/a ({head['pass_hat_k_reason']})"
                if head["pass_hat_k_reason"]
                else f"{cand} {pct(hat['candidate'])}, {base} {pct(hat['baseline'])}"
            ),
        )
    )
    return meta_list(items)


def _deltas(comparison: dict[str, Any]) -> str:
    rows = []
    for name, delta in comparison["deltas"].items():
        if delta["mean_delta"] is None:
            rows.append([td(name), td("unavailable"), td(""), td(""), td(delta["coverage"])])
        else:
            rows.append(
                [
                    td(name),
                    td(number(delta["mean_delta"], signed=True), "num"),
                    td(number(delta["candidate_mean"]), "num"),
                    td(number(delta["baseline_mean"]), "num"),
                    td(delta["coverage"]),
                ]
            )
    base, cand = comparison["baseline"], comparison["candidate"]
    return table(["paired delta", f"{cand} - {base}", cand, base, "coverage"], rows, "deltas")


def _comparison(comparison: dict[str, Any]) -> str:
    base, cand = comparison["baseline"], comparison["candidate"]
    flags = "".join(f'<span class="flag">{esc(f)}</span>' for f in comparison["flags"])
    flaky = comparison["flaky_cases"]
    flaky_text = "; ".join(
        f"{arm}: {', '.join(flaky[role])}"
        for arm, role in ((cand, "candidate"), (base, "baseline"))
        if flaky[role]
    )
    parts = [
        f'<section class="comparison" data-baseline="{esc(base)}" data-candidate="{esc(cand)}">',
        f"<h3>{esc(cand)} vs {esc(base)} (baseline)</h3>",
        f'<p>Pairs <span class="pairs">{comparison["pairs_eligible"]}/'
        f"{comparison['pairs_total']}</span> eligible</p>",
        _headline(comparison),
        f'<p class="flags">Flags: {flags or "none"}'
        + (f' <span class="muted">(flaky cases {esc(flaky_text)})</span>' if flaky_text else "")
        + "</p>",
    ]
    blocked = comparison["blocked"]
    if blocked:
        parts.append(
            "<h3>Blocked pairs</h3>"
            + table(
                ["case", "round", "reasons"],
                (
                    [td(b["case"]), td(b["round"], "num"), td("; ".join(b["reasons"]))]
                    for b in blocked
                ),
                "blocked",
            )
        )
    else:
        parts.append('<p class="blocked-none muted">No blocked pairs.</p>')
    parts += [_deltas(comparison), "</section>"]
    return "".join(parts)


def _job_header(job: JobView, report: dict[str, Any]) -> str:
    record = report["record"]
    counts = job.counts
    items = [
        ("status", _badge(job.status)),
        ("suite", f'{esc(job.suite)} <span class="muted">{esc(job.suite_sha256[:12])}</span>'),
        ("team", esc(job.team or "admin")),
        ("model", esc(model_text(job.spec))),
        ("models returned", esc(", ".join(record["models_returned"]) or "none yet")),
        ("rounds (k)", esc(report["k"])),
        ("cases", esc(len(record["cases"]))),
        (
            "trials",
            esc(
                f"{counts.finished}/{job.planned_trials} finished, {counts.running} "
                f"running, {counts.queued} queued; {counts.passed} passed, "
                f"{counts.failed} failed, {counts.error} error; "
                f"{counts.attempts} attempts"
            ),
        ),
        ("seed", esc(record["seed"])),
        ("submitted", esc(_when(job.created_at)) + " UTC"),
        ("finished", esc(_when(job.finished_at) or "—")),
        ("image", esc(record["image"])),
    ]
    if record["docs"] or record["docs_sha256"]:
        items.append(
            ("docs", esc(f"{record['docs'] or 'uploaded'} {(record['docs_sha256'] or '')[:12]}"))
        )
    return meta_list(items)


def _cancel_form(job: JobView) -> str:
    if job.status not in ("queued", "running"):
        return ""
    return (
        f'<form method="post" action="/ui/jobs/{esc(job.id)}/cancel" class="cancel">'
        '<button type="submit">Cancel job</button></form>'
    )


def job_page(job: JobView, report: dict[str, Any], trials: Sequence[GridTrial], who: str) -> str:
    k = report["k"]
    sections = [
        f'<h1>Job <span class="job-id">{esc(job.id)}</span></h1>',
        _job_header(job, report),
        _cancel_form(job),
    ]
    notes = report["notes"]
    if notes:
        sections.append(
            '<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>"
        )
    sections.append("<h2>Pass rates</h2>")
    if report["variants"]:
        sections += [pass_rate_chart(report["variants"], k), _variants_table(report["variants"], k)]
    else:
        sections.append('<p class="no-trials muted">No trial has run yet.</p>')
    if report["comparisons"]:
        sections.append("<h2>Comparisons</h2>")
        sections += [_comparison(c) for c in report["comparisons"]]
    sections += [
        "<h2>Trials</h2>",
        '<p class="muted">Each cell is a planned trial\'s latest attempt; open it for the '
        "transcript.</p>",
        grid_table(job.spec.get("cases") or [], variant_order(job.spec), k, trials),
    ]
    busy = job.status in ("queued", "running")
    return layout(
        f"Job {job.id}", "".join(sections), who=who, refresh_s=REFRESH_S if busy else None
    )


# ----- a trial ------------------------------------------------------------------------


def _numbers(values: dict[str, Any] | None) -> str:
    shown = {
        name: number(value) if isinstance(value, float) else value
        for name, value in (values or {}).items()
        if value is not None
    }
    if not shown:
        return "—"
    return esc(", ".join(f"{name} {value}" for name, value in shown.items()))


def artifact_url(trial_id: str, name: str) -> str:
    return f"/v1/trials/{quote(trial_id, safe='')}/artifacts/{quote(name, safe='')}"


def _judges(judges: list[Any] | None) -> str:
    if not judges:
        return '<p class="muted">No judge scores.</p>'
    rows = []
    for judge in judges:
        if isinstance(judge, dict):
            rows.append(
                [
                    td(judge.get("name", "?")),
                    td(judge.get("score", ""), "num"),
                    td(judge.get("detail", "")),
                ]
            )
        else:
            rows.append([td(judge), td(""), td("")])
    return table(["judge", "score", "detail"], rows, "judges")


def trial_page(
    trial: TrialView,
    job: JobView,
    events: Sequence[EventView],
    who: str,
    *,
    shown_limit: int | None = None,
) -> str:
    state = trial.outcome if trial.status == "finished" and trial.outcome else trial.status
    items = [
        (
            "job",
            f'<a href="/ui/jobs/{esc(job.id)}">{esc(job.id)}</a> '
            f'<span class="muted">{esc(job.suite)}</span>',
        ),
        ("case", f'<span class="case-id">{esc(trial.case_id)}</span>'),
        ("variant", esc(trial.variant)),
        ("round", esc(trial.round)),
        ("attempt", esc(trial.attempt)),
        ("outcome", _badge(state)),
        ("score", esc("—" if trial.score is None else trial.score)),
    ]
    if trial.error_kind or trial.error_message:
        items.append(
            (
                "error",
                f'<span class="error-text">{esc(trial.error_kind or "")}</span> '
                f"{esc(trial.error_message or '')}",
            )
        )
    if trial.failed_step:
        items.append(("failed step", esc(trial.failed_step)))
    items += [
        ("model", esc(f"{trial.model_requested or '?'} (returned {trial.model_returned or '—'})")),
        ("tool calls", esc("—" if trial.tool_calls is None else trial.tool_calls)),
        ("usage", _numbers(trial.usage)),
        ("timings (s)", _numbers(trial.timings)),
        ("wall time", esc("—" if trial.wall_s is None else f"{trial.wall_s:.2f} s")),
        (
            "started / finished",
            esc(f"{_when(trial.started_at) or '—'} / {_when(trial.finished_at) or '—'} UTC"),
        ),
        ("limits hit", esc(", ".join(trial.limits_hit or []) or "none")),
        ("system prompt", esc(trial.system_prompt_sha256 or "—")),
    ]
    if trial.artifacts:
        links = "".join(
            f'<li><a class="artifact" href="{esc(artifact_url(trial.id, name))}" '
            f'download="{esc(name)}">{esc(name)}</a></li>'
            for name in trial.artifacts
        )
        artifacts = f'<ul class="artifacts">{links}</ul>'
    else:
        artifacts = '<p class="muted">No artifacts.</p>'
    more = ""
    if shown_limit is not None and len(events) >= shown_limit:
        more = (
            f'<p class="notice">Showing the first {shown_limit} events; the whole transcript '
            "is in session.jsonl.</p>"
        )
    body = (
        f'<h1>Trial <span class="trial-id">{esc(trial.id)}</span></h1>'
        + meta_list(items)
        + "<h2>Judges</h2>"
        + _judges(trial.judges)
        + "<h2>Artifacts</h2>"
        + artifacts
        + "<h2>Transcript</h2>"
        + more
        + transcript(events)
    )
    busy = trial.status in ("queued", "running")
    return layout(f"Trial {trial.id}", body, who=who, refresh_s=REFRESH_S if busy else None)

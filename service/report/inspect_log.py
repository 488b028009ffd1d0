"""A job as an Inspect eval log: Inspect's `.json` log format (version 2), built from the
stored rows as plain dicts, so the service never imports inspect_ai (tests read the result
with `inspect_ai.log.read_eval_log`; docs/guides/export-inspect.md gives the mapping).

One sample per planned trial, its latest finished attempt; the attempts before it (infra
errors, retried) are the sample's `error_retries`. Rounds are epochs. The job's spec is the
eval's task (its arguments) and plan (a step per variant)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from service.domain.job_spec import JobSpec, VariantSpec
from service.domain.outcomes import verdict
from service.domain.status import JobStatus, Outcome
from service.domain.task_sets import version_of
from service.store.models import Job, Trial
from service.store.trials import LoggedEvent

LOG_VERSION = 2
# The sample's overall score: C or I as the report counts the trial (a scored trial only).
OUTCOME_SCORER = "outcome"
# The role Inspect names the model of model-graded scoring by.
GRADER_ROLE = "grader"
_STOP_REASONS = {"stop": "stop", "tool_use": "tool_calls", "length": "max_tokens"}
# Parts of the stored spec that are not the task's arguments: the plan (variants, arms), and
# the docs bundle's text (its name and sha256 stay).
_NOT_TASK_ARGS = frozenset({"variants", "arms", "docs"})


def present(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields that are not None. Inspect writes its logs without them, and its reader of
    a log's header takes a null (an `error`, `results`) for a value to validate."""
    return {key: value for key, value in fields.items() if value is not None}


def iso(moment: datetime | None) -> str | None:
    """A stored (naive, UTC) time as Inspect's UTC ISO string."""
    if moment is None:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()


def log_file_name(job: Job) -> str:
    """The name Inspect gives a log, `{created}_{task}_{id}.json`, with its characters
    cleaned as Inspect cleans them: `inspect view` lists only files named so."""

    def clean(part: str) -> str:
        for character in "_/:+":
            part = part.replace(character, "-")
        return part

    created = iso(job.created_at.replace(microsecond=0)) or ""
    # Inspect reads what follows a '-' in the id part as a suffix: the job's id goes without.
    return f"{clean(created)}_{clean(job.suite_name)}_{job.id.replace('-', '')}.json"


def sample_id(trial: Trial, spec: JobSpec) -> str:
    """The case's id; a comparison's samples name their variant too, as Inspect keys a
    sample by (id, epoch) and each variant runs every case."""
    return trial.case_id if len(spec.variants) == 1 else f"{trial.variant}:{trial.case_id}"


def add_usage(totals: dict[str, dict[str, Any]], key: str, usage: dict[str, Any] | None) -> None:
    """Add one ModelUsage (Inspect's, as `model_usage` gives it) to `totals` under `key`."""
    if usage is None:
        return
    kept = totals.setdefault(key, {})
    for name, value in usage.items():
        kept[name] = kept.get(name, 0) + value


def model_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """examhall's usage (its input tokens count the cached ones too) as Inspect's
    ModelUsage (whose input tokens exclude them); None when nothing was used."""
    if not usage:
        return None
    numbers = {k: usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "requests")}
    read, write = usage.get("cache_read_tokens") or 0, usage.get("cache_write_tokens") or 0
    if not any(numbers.values()) and usage.get("cost_usd") is None:
        return None
    return present(
        {
            "input_tokens": max(0, numbers["input_tokens"] - read - write),
            "output_tokens": numbers["output_tokens"],
            "total_tokens": numbers["input_tokens"] + numbers["output_tokens"],
            "input_tokens_cache_write": write or None,
            "input_tokens_cache_read": read or None,
            "total_cost": usage.get("cost_usd"),
        }
    )


def messages_of(trial: Trial, events: Sequence[LoggedEvent]) -> list[dict[str, Any]]:
    """The transcript's messages as Inspect's chat messages: the user's and the model's
    (with its tool calls), and each tool's result (or error)."""
    messages: list[dict[str, Any]] = []
    for event in events:
        payload, message_id = event.payload, f"{trial.id}-{event.seq}"
        if event.type == "message" and payload.get("role") == "user":
            messages.append(
                present(
                    {
                        "id": message_id,
                        "role": "user",
                        "content": payload.get("content") or "",
                        "source": "input",
                    }
                )
            )
        elif event.type == "message" and payload.get("role") == "assistant":
            calls = [
                {
                    "id": call.get("id", ""),
                    "function": call.get("name", ""),
                    "arguments": call.get("arguments") or {},
                    "type": "function",
                }
                for call in payload.get("tool_calls") or []
            ]
            messages.append(
                present(
                    {
                        "id": message_id,
                        "role": "assistant",
                        "content": payload.get("content") or "",
                        "source": "generate",
                        "tool_calls": calls or None,
                        "model": payload.get("model") or None,
                        "metadata": _stop_metadata(payload),
                    }
                )
            )
        elif event.type == "tool_result":
            error = payload.get("error")
            messages.append(
                present(
                    {
                        "id": message_id,
                        "role": "tool",
                        "content": payload.get("content") or "",
                        "tool_call_id": payload.get("tool_call_id"),
                        "function": payload.get("name"),
                        "error": {"type": "unknown", "message": error} if error else None,
                    }
                )
            )
    return messages


def _stop_metadata(payload: dict[str, Any]) -> dict[str, Any] | None:
    kept = {k: payload[k] for k in ("stop_reason", "usage") if payload.get(k) is not None}
    return kept or None


def events_of(trial: Trial, events: Sequence[LoggedEvent]) -> list[dict[str, Any]]:
    """The transcript's worker steps as Inspect's info events and its tool calls as tool
    events (with their results). The store keeps no time per event: each is stamped with
    the trial's start."""
    stamp = iso(trial.started_at) or iso(trial.finished_at) or iso(datetime.now(UTC))
    results = {e.payload.get("tool_call_id"): e.payload for e in events if e.type == "tool_result"}
    found: list[dict[str, Any]] = []
    for event in events:
        base = {"uuid": f"{trial.id}-{event.seq}", "timestamp": stamp, "working_start": 0.0}
        payload = event.payload
        if event.type == "lifecycle":
            found.append(
                {
                    **base,
                    "event": "info",
                    "source": payload.get("step") or "worker",
                    "data": payload.get("detail") or "",
                }
            )
        elif event.type == "tool_call":
            result = results.get(payload.get("id"), {})
            error = result.get("error")
            found.append(
                present(
                    {
                        **base,
                        "event": "tool",
                        "type": "function",
                        "id": payload.get("id", ""),
                        "function": payload.get("name", ""),
                        "arguments": payload.get("arguments") or {},
                        "result": result.get("content") or "",
                        "error": {"type": "unknown", "message": error} if error else None,
                    }
                )
            )
    return found


def output_of(trial: Trial, messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Inspect's ModelOutput: the model's last message and the trial's final answer."""
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    choices = []
    if last is not None:
        stop = str((last.get("metadata") or {}).get("stop_reason"))
        choices.append({"message": last, "stop_reason": _STOP_REASONS.get(stop, "unknown")})
    return present(
        {
            "model": trial.model_returned or trial.model_requested or "",
            "choices": choices,
            "completion": trial.final_text or "",
            "usage": model_usage(trial.usage),
        }
    )


def scores_of(trial: Trial) -> dict[str, dict[str, Any]] | None:
    """A score per judge (its value, its detail as the explanation), and the trial's
    outcome as the report counts it: C (passed) or I (failed), none when it cannot score
    the task (an error of ours)."""
    scores: dict[str, dict[str, Any]] = {}
    for judge in trial.judges or []:
        rubric, value = judge.get("rubric_sha256"), judge.get("score")
        if not isinstance(value, int | float):
            continue  # a NaN score, which the store keeps as null, scores nothing
        scores[judge["name"]] = present(
            {
                "value": value,
                "explanation": judge.get("detail") or None,
                "metadata": {"rubric_sha256": rubric} if rubric else None,
            }
        )
    counted = verdict(trial.status, trial.outcome, trial.error_kind)
    if counted is not None:
        scores[OUTCOME_SCORER] = present(
            {
                "value": "C" if counted else "I",
                "answer": trial.final_text,
                "explanation": trial.outcome
                if trial.outcome != Outcome.ERROR
                else f"{trial.outcome}: {trial.error_kind}",
            }
        )
    return scores or None


def _error(trial: Trial) -> dict[str, Any] | None:
    if trial.outcome != Outcome.ERROR:
        return None
    return {
        "message": ": ".join(part for part in (trial.error_kind, trial.error_message) if part),
        "traceback": f"failed step: {trial.failed_step}" if trial.failed_step else "",
        "traceback_ansi": "",
    }


def sample(
    trial: Trial,
    events: Sequence[LoggedEvent],
    spec: JobSpec,
    retried: Sequence[Trial] = (),
) -> dict[str, Any]:
    """One finished trial as an Inspect sample; `retried` are its earlier attempts."""
    messages = messages_of(trial, events)
    prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
    variant = spec.variant(trial.variant)
    usage: dict[str, dict[str, Any]] = {}
    roles: dict[str, dict[str, Any]] = {}
    agent_model = trial.model_requested or f"{variant.model.provider}/{variant.model.id}"
    add_usage(usage, agent_model, model_usage(trial.usage))
    judge_usage = model_usage((trial.usage or {}).get("judge"))
    if spec.judge_model is not None:
        judge_model = f"{spec.judge_model.provider}/{spec.judge_model.id}"
        add_usage(usage, judge_model, judge_usage)
        add_usage(roles, GRADER_ROLE, judge_usage)
    limits = variant.limits
    return present(
        {
            "id": sample_id(trial, spec),
            "epoch": trial.round,
            "input": prompt,
            "target": "",
            "messages": messages,
            "output": output_of(trial, messages),
            "scores": scores_of(trial),
            "metadata": _sample_metadata(trial),
            "events": events_of(trial, events),
            "model_usage": usage,
            "role_usage": roles,
            "started_at": iso(trial.started_at),
            "completed_at": iso(trial.finished_at),
            "total_time": trial.wall_s,
            "working_time": (trial.timings or {}).get("run_agent"),
            "uuid": trial.id,
            "error": _error(trial),
            "error_retries": [error for t in retried if (error := _error(t))] or None,
            "limit": (
                {"type": "time", "limit": limits.timeout_s, "reason": trial.error_message}
                if trial.error_kind == "timeout"
                else None
            ),
            "time_limit": int(limits.timeout_s),
            "token_limit": limits.max_tokens,
        }
    )


def _sample_metadata(trial: Trial) -> dict[str, Any]:
    return {
        "trial_id": trial.id,
        "case_id": trial.case_id,
        "variant": trial.variant,
        "round": trial.round,
        "attempt": trial.attempt,
        "outcome": trial.outcome,
        "score": trial.score,
        "error_kind": trial.error_kind,
        "error_message": trial.error_message,
        "failed_step": trial.failed_step,
        "model_requested": trial.model_requested,
        "model_returned": trial.model_returned,
        "tool_calls": trial.tool_calls,
        "limits_hit": trial.limits_hit,
        "timings": trial.timings,
        "usage": trial.usage,
        "system_prompt_sha256": trial.system_prompt_sha256,
        "image": trial.image,
        "image_digest": trial.image_digest,
        "node": trial.node,
    }


def status_of(job: Job) -> str:
    """Inspect's eval status: a job still building, queued or running is `started`, as a
    log Inspect writes while its eval runs."""
    if job.status == JobStatus.FINISHED:
        return "error" if job.error else "success"
    if job.status == JobStatus.CANCELLED:
        return "cancelled"
    return "started"


def eval_spec(job: Job, spec: JobSpec) -> dict[str, Any]:
    """The eval: the suite as its task and dataset, the stored spec as the task's
    arguments, the limits as Inspect's config."""
    task_args = {k: v for k, v in job.spec.items() if k not in _NOT_TASK_ARGS}
    limits = spec.limits
    return present(
        {
            "eval_id": job.id,
            "run_id": job.id,
            "created": iso(job.created_at),
            "task": job.suite_name,
            "task_id": job.suite_sha256,
            # A pushed task set's version (service/domain/task_sets.py), else Inspect's default.
            "task_version": version_of(job.suite_name) or 0,
            "task_args": task_args,
            "task_args_passed": task_args,
            "dataset": {
                "name": job.suite_name,
                "location": f"sha256:{job.suite_sha256}",
                "samples": len(spec.cases),
                "sample_ids": list(spec.cases),
                "shuffled": False,
            },
            "model": spec.model_text(),
            "model_roles": (
                {GRADER_ROLE: {"model": f"{spec.judge_model.provider}/{spec.judge_model.id}"}}
                if spec.judge_model
                else None
            ),
            "config": present(
                {
                    "epochs": spec.rounds,
                    "time_limit": int(limits.timeout_s),
                    "turn_limit": limits.max_turns,
                    "token_limit": limits.max_tokens,
                    "cost_limit": limits.max_cost_usd,
                    "max_samples": spec.concurrency,
                    "retry_on_error": spec.max_infra_retries,
                    "fail_on_error": False,
                }
            ),
            "packages": {"examhall": job.service_version},
            "metadata": {
                "examhall_job": job.id,
                "image": job.image,
                "image_digest": job.image_digest,
                "seed": job.seed,
                "planned_trials": job.planned,
            },
        }
    )


def plan_step(name: str, variant: VariantSpec) -> dict[str, Any]:
    """A variant as a step of the plan: its harness (model, tools, rules, limits, agent)."""
    if isinstance(variant.agent, str):
        solver = variant.agent
    elif variant.agent is not None:
        solver = "installed_agent"
    else:
        solver = "external_command" if variant.command else "examhall_agent"
    params = {"variant": name, **variant.model_dump(mode="json", exclude_none=True)}
    return {"solver": solver, "params": params, "params_passed": params}


def eval_plan(spec: JobSpec) -> dict[str, Any]:
    return {
        "name": "examhall",
        "steps": [plan_step(name, spec.variant(name)) for name in spec.arms or spec.variants],
        "config": {},
    }


def results_of(job: Job, samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per scorer, the mean of its values over the samples it scored (the outcome's: the
    pass rate over the scored trials, as `accuracy`)."""
    values: dict[str, list[float]] = {}
    for one in samples:
        for name, score in one.get("scores", {}).items():
            value = score["value"]
            number = (1.0 if value == "C" else 0.0) if isinstance(value, str) else value
            if isinstance(number, int | float):
                values.setdefault(name, []).append(float(number))
    scores = []
    for name, found in values.items():
        metric = "accuracy" if name == OUTCOME_SCORER else "mean"
        scores.append(
            {
                "name": name,
                "scorer": name,
                "scored_samples": len(found),
                "unscored_samples": len(samples) - len(found),
                "metrics": {metric: {"name": metric, "value": sum(found) / len(found)}},
            }
        )
    # The outcome first: Inspect's headline is the first score's first metric.
    scores.sort(key=lambda s: s["name"] != OUTCOME_SCORER)
    return {
        "total_samples": job.planned,
        "completed_samples": sum(1 for s in samples if "error" not in s),
        "scores": scores,
    }


def eval_log(job: Job, samples: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The whole log, from the job's row and its samples (`sample`)."""
    spec = JobSpec.model_validate(job.spec)
    kept = list(samples)
    usage: dict[str, dict[str, Any]] = {}
    roles: dict[str, dict[str, Any]] = {}
    for one in kept:
        for totals, part in ((usage, one["model_usage"]), (roles, one["role_usage"])):
            for key, each in part.items():
                add_usage(totals, key, each)
    starts = [s["started_at"] for s in kept if "started_at" in s]
    ended = job.status in (JobStatus.FINISHED, JobStatus.CANCELLED)
    status = status_of(job)
    return present(
        {
            "version": LOG_VERSION,
            "status": status,
            "eval": eval_spec(job, spec),
            "plan": eval_plan(spec),
            "results": results_of(job, kept),
            "stats": {
                "started_at": min(starts) if starts else iso(job.created_at),
                "completed_at": (iso(job.finished_at) or "") if ended else "",
                "model_usage": usage,
                "role_usage": roles,
            },
            "error": (
                {"message": job.error or "", "traceback": "", "traceback_ansi": ""}
                if status == "error"
                else None
            ),
            "samples": kept,
        }
    )

"""The judge model's side of a trial: its gateway, and the rule that only a judge-model
failure the control plane saw itself leaves a trial unscored.

The worker's model-graded judges send `judge_call`s over the channel, in relay and direct
mode alike; this gateway answers them with the job's `judge_model` (a provider of the
providers file through the same retry loop as the agent's, or the simulated grader, in this
process), under the job's judge budget, and records every call: the prompt, the answer, its
verdict, usage and cost, as the trial's `judge_model.jsonl` artifact and lifecycle events.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from sandbox.conversation import AssistantTurn, ModelRequest, ProviderError
from sandbox.graded import JudgeCallMessage, parse_verdict
from sandbox.protocol import Event, LifecycleEvent, ModelRef, TrialResult
from sandbox.providers.client import Budget, Spending
from sandbox.relay import ModelCallMessage, ModelReplyMessage, ReplyError
from sandbox.simulated import parse_grader
from service.gateway import TrialGateway
from service.launch.worker_channel import OnModelCall
from service.providers import ProviderRegistry

ARTIFACT = "judge_model.jsonl"


@dataclass
class JudgeGateway:
    model: ModelRef
    send: Callable[[ModelRequest], AssistantTurn]
    spent: Spending
    on_event: Callable[[Event], None] | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    # The judge model's failures as this process saw them: only these make judge_error.
    failures: list[str] = field(default_factory=list)

    def __call__(self, call: JudgeCallMessage) -> ModelReplyMessage:
        prompt = {
            "system": call.request.system,
            "messages": [dataclasses.asdict(m) for m in call.request.messages],
        }
        refusal = self.spent.refusal(call.request)
        if refusal is not None:
            return self._failed(call, prompt, "limit_exceeded", f"judge budget: {refusal}")
        try:
            turn = self.send(call.request)
        except ProviderError as exc:
            return self._failed(call, prompt, "provider_error", str(exc))
        cost = self.spent.record(turn)
        verdict = parse_verdict(turn.text)
        self.calls.append(
            {
                "id": call.id,
                "model": str(self.model),
                "model_returned": turn.model,
                "prompt": prompt,
                "answer": turn.text,
                "verdict": None if verdict is None else ("PASS" if verdict else "FAIL"),
                "usage": dataclasses.asdict(turn.usage),
                "cost_usd": cost,
            }
        )
        self._event(
            "judge_generation",
            f"{self.model}: verdict {self.calls[-1]['verdict'] or 'none'}, "
            f"{turn.usage.input_tokens} in, {turn.usage.output_tokens} out, "
            f"cost {'unpriced' if cost is None else f'${cost:.6f}'}",
        )
        return ModelReplyMessage(id=call.id, turn=turn)

    def _failed(
        self, call: JudgeCallMessage, prompt: dict[str, Any], kind: Any, message: str
    ) -> ModelReplyMessage:
        self.failures.append(message)
        self.calls.append(
            {"id": call.id, "model": str(self.model), "prompt": prompt, "error": message}
        )
        self._event("judge_failed", f"{self.model}: {message}")
        return ModelReplyMessage(id=call.id, error=ReplyError(kind, message))

    def _event(self, step: str, detail: str) -> None:
        if self.on_event is not None:
            self.on_event(LifecycleEvent(step=step, detail=detail))

    def artifact(self) -> bytes:
        return b"".join(json.dumps(c, ensure_ascii=False).encode() + b"\n" for c in self.calls)

    def usage(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.spent.usage), "cost_usd": self.spent.cost_usd}


def judge_gateway(
    model: ModelRef,
    *,
    budget: Budget,
    providers: ProviderRegistry,
    http: httpx.Client,
    on_event: Callable[[Event], None] | None = None,
) -> JudgeGateway:
    """The gateway of a trial's judge model: the simulated grader here, or a provider of the
    providers file with the box's key (checked at submission)."""
    if model.provider == "simulated":
        grader = parse_grader(model.id)
        return JudgeGateway(model, grader.complete, Spending(budget, None, str(model)), on_event)
    entry = providers.get(model.provider)
    if entry is None:
        raise ValueError(f"The judge model's provider {model.provider!r} is not configured.")
    relay = TrialGateway(entry, model.id, budget=budget, http=http)
    return JudgeGateway(model, relay.send, relay.spent, on_event)


def route_calls(
    agent: Callable[[ModelCallMessage], ModelReplyMessage] | None, judge: JudgeGateway | None
) -> OnModelCall:
    """One answerer for the channel: the agent's calls to its gateway, judge calls to the
    judge model's."""

    def answer(call: ModelCallMessage | JudgeCallMessage) -> ModelReplyMessage:
        if isinstance(call, JudgeCallMessage):
            if judge is None:
                return ModelReplyMessage(
                    id=call.id, error=ReplyError("provider_error", "This job names no judge_model.")
                )
            return judge(call)
        if agent is None:
            return ModelReplyMessage(
                id=call.id, error=ReplyError("provider_error", "This run has no model gateway.")
            )
        return agent(call)

    return answer


def settle_judging(result: TrialResult, judge: JudgeGateway | None) -> TrialResult:
    """The rule of the judge model's failures: one this gateway saw leaves the trial unscored
    (judge_error, retried), whatever the worker made of it; a judge_error it did not see was
    claimed inside the sandbox, where the agent's work and the suite's code run, and so is a
    failed run, never an unscored one."""
    failures = judge.failures if judge is not None else []
    judged = result.outcome in ("passed", "failed") or result.failed_step == "judge"
    if failures and judged:
        return dataclasses.replace(
            result,
            outcome="error",
            score=None,
            error_kind="judge_error",
            error_message=f"The judge model failed: {failures[0]}",
            failed_step="judge",
        )
    if result.error_kind == "judge_error" and not failures:
        return dataclasses.replace(
            result,
            error_kind="agent_error",
            error_message=(
                f"{result.error_message} The control plane saw no judge-model failure, so the "
                "trial is a failed run, not an unscored one."
            ),
        )
    return result

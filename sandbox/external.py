"""External agents: a CLI agent installed in the image runs instead of the built-in loop.

It gets the trial's model through the in-sandbox OpenAI-compatible endpoint (a dummy key,
a 127.0.0.1 base URL), runs as the sandbox user in /workspace with the scrubbed
environment, and its stdout and stderr become artifacts. The case's judges then score the
workspace as for any trial.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence

from sandbox.agent import AgentFailure, AgentState
from sandbox.conversation import AssistantTurn, ModelRequest
from sandbox.endpoint import Endpoint
from sandbox.model_choice import Model
from sandbox.protocol import Event, LifecycleEvent, MessageEvent

TASK = "{task}"
# Where an installed agent's command is exposed (service/environments/agents.py): on the
# agent's PATH only, never on the verifier's, so a test that runs `pytest` cannot start an
# agent's command of that name as root.
AGENT_BIN = "/opt/examhall-agents/bin"
OUTPUT_LIMIT = 4 * 1024 * 1024


def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: dict[str, str],
    timeout_s: float,
    missing: str,
    late: str,
) -> subprocess.CompletedProcess[bytes]:
    """An agent's command, run as the worker's user: no stdin, a session of its own, its
    output captured. AgentFailure `missing` when it cannot start, `late` (a timeout) when
    it runs past `timeout_s`."""
    try:
        return subprocess.run(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
            start_new_session=True,
            check=False,
        )
    except FileNotFoundError:
        raise AgentFailure("agent_error", missing) from None
    except subprocess.TimeoutExpired:
        raise AgentFailure("timeout", late) from None


def run_external(
    command: Sequence[str],
    model: Model,
    *,
    prompts: Sequence[str],
    env: dict[str, str],
    cwd: str,
    timeout_s: float,
    emit: Callable[[Event], None],
    state: AgentState,
    artifact: Callable[[str, bytes], None],
) -> None:
    """Run the agent command once per prompt; `{task}` in an argument is the prompt."""

    def complete(request: ModelRequest) -> AssistantTurn:
        turn = model.complete(request)
        state.record(turn, emit)
        state.turns += 1
        state.tool_calls += len(turn.tool_calls)
        state.final_text = turn.text or state.final_text
        return turn

    endpoint = Endpoint(complete, model.name).start()
    agent_env = {
        **env,
        "PATH": f"{AGENT_BIN}:{env['PATH']}" if env.get("PATH") else AGENT_BIN,
        "OPENAI_BASE_URL": endpoint.base_url,
        "OPENAI_API_BASE": endpoint.base_url,
        "OPENAI_API_KEY": endpoint.key,
        "ANTHROPIC_BASE_URL": endpoint.base_url.removesuffix("/v1"),
        "ANTHROPIC_API_KEY": endpoint.key,
    }
    try:
        for step, prompt in enumerate(prompts, start=1):
            argv = [part.replace(TASK, prompt) for part in command]
            emit(MessageEvent(role="user", content=prompt))
            emit(LifecycleEvent(step="external_agent", detail=" ".join(command)))
            done = run_command(
                argv,
                cwd=cwd,
                env=agent_env,
                timeout_s=timeout_s,
                missing=f"The external agent {command[0]!r} is not installed.",
                late=f"The external agent ran past {timeout_s:g} s.",
            )
            suffix = "" if len(prompts) == 1 else f".{step}"
            artifact(f"agent.stdout{suffix}", done.stdout[-OUTPUT_LIMIT:])
            artifact(f"agent.stderr{suffix}", done.stderr[-OUTPUT_LIMIT:])
            if done.returncode != 0:
                raise AgentFailure(
                    "agent_error", f"The external agent exited with code {done.returncode}."
                )
    finally:
        endpoint.stop()
    if state.assistant_messages == 0:
        raise AgentFailure("agent_error", "The external agent never called the model.")

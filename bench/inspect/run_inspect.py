"""Runs trivial.py through Inspect's Python API and prints its timing as one JSON line.

    DOCKER_CONFIG=... python3 bench/inspect/run_inspect.py EPOCHS CONCURRENCY LOG_DIR

Inspect refuses Docker Engines older than 24.0.6; the benchmark machine's is 20.10, and
every compose command the sandbox sends works there, so that one check is skipped (the
Compose version check still runs). The model is `mockllm/model` with an answer that
carries its usage: without one, mockllm counts tokens with tiktoken, which downloads its
encoding on first use, and this machine has no network.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.util._sandbox.docker import prereqs

ANSWER = "I wrote the file."


def _answer(messages: list[object], *_args: object) -> ModelOutput:
    output = ModelOutput.from_content(model="mockllm", content=ANSWER)
    # The faux models' estimate in examhall: a token per four characters.
    prompt = sum(len(str(getattr(m, "text", ""))) for m in messages)
    output.usage = ModelUsage(
        input_tokens=-(-prompt // 4),
        output_tokens=-(-len(ANSWER) // 4),
        total_tokens=-(-prompt // 4) - (-len(ANSWER) // 4),
    )
    return output


async def _engine_is_fine(*_args: object, **_kwargs: object) -> None:
    return None


def main() -> int:
    epochs, concurrency, log_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    prereqs.validate_docker_engine = _engine_is_fine
    started = time.perf_counter()
    sys.path.insert(0, str(Path(__file__).parent))
    from trivial import trivial

    (log,) = inspect_eval(
        trivial(),
        model=get_model("mockllm/model", custom_outputs=_answer),
        epochs=epochs,
        max_samples=concurrency,
        max_sandboxes=concurrency,
        log_dir=log_dir,
        display="none",
        fail_on_error=False,
    )
    wall = time.perf_counter() - started
    stats = log.stats
    samples = log.samples or []
    print(
        json.dumps(
            {
                "status": log.status,
                "error": str(log.error.message) if log.error else None,
                "started_at": stats.started_at,
                "completed_at": stats.completed_at,
                "samples": len(samples),
                "correct": sum(
                    1 for s in samples if s.scores and next(iter(s.scores.values())).value == "C"
                ),
                "wall_s": wall,
            }
        )
    )
    return 0 if log.status == "success" else 1


if __name__ == "__main__":
    raise SystemExit(main())

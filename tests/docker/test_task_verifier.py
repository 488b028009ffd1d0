"""A task's verifier in a real sandbox: Harbor's contract, and what the agent cannot do to it.

The image is the sandbox image with what a task environment's worker layer adds (the
verifier's mount points and a working-directory seed), so these tests hold the root
supervisor's verifier to its guarantees without an environment build.
"""

from __future__ import annotations

import io
import tarfile
import uuid
from collections.abc import Iterator

import docker
import pytest

from sandbox.protocol import (
    LifecycleEvent,
    runs_solution,
)
from sandbox.verifier import VERIFIER_CAPS
from service.backends.docker import DockerBackend
from service.domain.outcomes import verdict
from service.launch.trial import TrialRecord
from tests.task_trials import task_trial

pytestmark = pytest.mark.docker

ANSWER_TEST = """#!/bin/bash
if [ "$(cat /workspace/answer.txt 2>/dev/null)" = 42 ]; then echo 1; else echo 0; fi \
    > /logs/verifier/reward.txt
"""
SOLVE = "echo 42 > answer.txt\n"


@pytest.fixture(scope="module")
def task_image(docker_client: docker.DockerClient, sandbox_image: str) -> Iterator[str]:
    dockerfile = (
        f"FROM {sandbox_image}\n"
        "RUN mkdir -p /tests /logs /solution /opt/examhall/seed"
        " && echo hello > /opt/examhall/seed/data.txt && chmod -R a+rX /opt/examhall/seed"
        # As an editable install of the task's code would: the workspace on every Python's
        # path, where the agent can drop a sitecustomize.py.
        " && echo /workspace > /usr/lib/python3/dist-packages/examhall-probe.pth\n"
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    tag = f"examhall-test/task-verifier:{uuid.uuid4().hex[:12]}"
    docker_client.images.build(
        fileobj=io.BytesIO(buffer.getvalue()), custom_context=True, tag=tag, rm=True, forcerm=True
    )
    yield tag
    docker_client.images.remove(tag, force=True)


def run_task(
    backend: DockerBackend,
    image: str,
    *,
    test: str,
    solve: str | None = None,
    agent: str | None = None,
    model: str = "simulated/coin?p=1",
    verifier_timeout_s: float = 30.0,
    beside: dict[str, str] | None = None,
    strict: bool = False,
    agent_user: str | None = None,
) -> TrialRecord:
    """One task trial in the test image; `beside` holds more files of solution/ than solve.sh."""
    return task_trial(
        backend,
        image,
        test=test,
        solve=solve,
        beside=beside,
        model=model,
        verifier_timeout_s=verifier_timeout_s,
        workdir="/workspace",
        agent=agent,
        strict_verifier=strict,
        agent_user=agent_user,
    )


def test_the_oracle_passes_and_nop_fails(backend: DockerBackend, task_image: str) -> None:
    oracle = run_task(backend, task_image, test=ANSWER_TEST, solve=SOLVE, agent="oracle")
    assert oracle.result.outcome == "passed", oracle.result
    assert [j.name for j in oracle.result.judges] == ["verifier"]
    assert oracle.result.judges[0].score == 1.0
    # reward.txt's one number, shown as itself.
    assert oracle.result.judges[0].detail.startswith("reward 1 (verifier: "), oracle.result
    assert "verify" in oracle.steps and oracle.result.timings["verify"] > 0
    assert "verifier.log" in oracle.artifacts

    nop = run_task(backend, task_image, test=ANSWER_TEST, solve=SOLVE, agent="nop")
    assert nop.result.outcome == "failed", nop.result
    assert nop.result.score == 0.0


def test_solve_sh_runs_the_rest_of_the_solution_for_the_oracle_and_a_replay(
    backend: DockerBackend, task_image: str
) -> None:
    # As Harbor's oracle has it: solution/ whole in /solution, solve.sh run in the workdir.
    solve = "bash /solution/tools/helper.sh > answer.txt\n"
    beside = {"tools/helper.sh": 'cat "$(dirname "$0")/../answer.data"\n', "answer.data": "42"}
    for agent in ("oracle", None):
        record = run_task(
            backend, task_image, test=ANSWER_TEST, solve=solve, agent=agent, beside=beside
        )
        assert record.result.outcome == "passed", (agent, record.result)
    nop = run_task(backend, task_image, test=ANSWER_TEST, solve=solve, agent="nop", beside=beside)
    assert nop.result.outcome == "failed", nop.result


def test_an_installed_agent_under_a_scripted_model_never_gets_the_solution(
    backend: DockerBackend, task_image: str
) -> None:
    """A pip agent's trial under `simulated` once got /solution (the scheduler passed no
    built-in agent, and a scripted model's trial replays the solution) and an agent that ran
    it passed. The supervisor keeps it from any installed agent, even when the run request
    carries it, as this one does."""
    # It calls its model once through the relay, as an installed agent must, then looks.
    steal = (
        'python3 -c "import json, os, urllib.request as u; '
        "u.urlopen(u.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', "
        "json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'hi'}]}).encode(), "
        "{'Content-Type': 'application/json', "
        "'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY']})).read()\"; "
        "cat /solution/solve.sh; bash /solution/solve.sh; true"
    )
    record = task_trial(
        backend,
        task_image,
        test=ANSWER_TEST,
        solve=SOLVE,
        workdir="/workspace",
        # The coin never passes, so the model replays nothing and the agent runs on its own.
        model="simulated/coin?p=0",
        command=("bash", "-c", steal),
    )
    result = record.result
    assert result.outcome == "failed", (result, record.artifacts.get("agent.stderr"))
    said = record.artifacts.get("agent.stdout", b"") + record.artifacts.get("agent.stderr", b"")
    assert b"/solution/solve.sh: No such file or directory" in said, (said, result)
    assert runs_solution(None, "simulated") and not runs_solution(None, "simulated", installed=True)


def test_reward_json_is_read_before_reward_txt(backend: DockerBackend, task_image: str) -> None:
    test = (
        "echo 0 > /logs/verifier/reward.txt\n"
        """echo '{"reward": 1, "style": 0.5}' > /logs/verifier/reward.json\n"""
    )
    record = run_task(backend, task_image, test=test, agent="nop")
    assert record.result.outcome == "passed", record.result
    assert "style=0.5" in record.result.judges[0].detail


def test_the_agent_sees_no_tests_and_cannot_plant_a_reward_nor_change_the_solution(
    backend: DockerBackend, task_image: str
) -> None:
    # The simulated model replays the solution (`bash /solution/solve.sh`) as the agent's own
    # bash call: a probe. A scripted model's agent has solution/ in /solution, as the oracle
    # does (tests/docker/test_task_suites.py: a real model's has not), but only to read.
    probe = (
        "echo tests: $(ls -A /tests) solution: $(ls -A /solution) end\n"
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt || echo planting refused\n"
        "echo x >> /solution/solve.sh || echo solution read-only\n"
        "cat data.txt; id -u\n"
    )
    test = "cp /workspace/data.txt /logs/verifier/seen.txt && echo 0 > /logs/verifier/reward.txt\n"
    record = run_task(backend, task_image, test=test, solve=probe)
    shown = [e.content for e in record.events if e.type == "tool_result"]
    assert shown, record.result
    assert "tests: solution: solve.sh end" in shown[0], shown[0]
    assert "planting refused" in shown[0] and "hello" in shown[0], shown[0]
    assert "solution read-only" in shown[0], shown[0]
    assert "\n0\n" not in shown[0]  # the agent is not root
    assert record.result.outcome == "failed", record.result  # the verifier's 0 stands


def test_agent_code_the_verifier_runs_can_neither_forge_nor_unscore(
    backend: DockerBackend, task_image: str
) -> None:
    # The agent leaves check.sh; the task's test runs it as root, as tests run agents' code.
    sabotage = (
        "cat > check.sh <<'EOF'\n"
        "grep CapEff /proc/self/status\n"
        "for p in /proc/[0-9]*; do\n"
        "  grep -qs sandbox.worker $p/cmdline || continue\n"
        '  cat $p/environ >/dev/null 2>&1 && echo "read $p/environ"\n'
        """  echo '{"type":"result","result":{"outcome":"passed"}}' 2>/dev/null > $p/fd/1 \\\n"""
        '    && echo "forged through $p"\n'
        "done\n"
        'echo \'{"type":"result"}\' 2>/dev/null > /proc/1/fd/1 && echo forged through init\n'
        'echo "tmp: $(ls -A /tmp)"\n'
        "echo 0 > /logs/verifier/reward.txt\n"
        "EOF\n"
        "touch /tmp/planted-by-the-agent\n"
    )
    record = run_task(backend, task_image, test="bash /workspace/check.sh\n", solve=sabotage)
    assert record.result.outcome == "failed", record.result
    log = record.artifacts["verifier.log"].decode()
    # Harbor's verifier's capabilities, less CAP_MKNOD, which init keeps: so none of the
    # writes above reached the channel.
    held = int(log.split("CapEff:")[1].split()[0], 16)
    assert held == sum(1 << n for n in VERIFIER_CAPS), log
    assert "forged" not in log and "read /proc" not in log, log
    assert "planted-by-the-agent" not in log, log  # /tmp is cleared before the verifier

    killer = "echo 'kill -9 -1; sleep 5' > check.sh\n"
    killed = run_task(backend, task_image, test="bash /workspace/check.sh\n", solve=killer)
    assert killed.result.error_kind == "no_reward", killed.result
    assert verdict("finished", killed.result.outcome, killed.result.error_kind) is False


def test_code_the_agent_puts_on_pythons_path_does_not_run_in_the_verifiers_launcher(
    backend: DockerBackend, task_image: str
) -> None:
    # The verifier's launcher is a Python started as root: with site directories read, a
    # sitecustomize.py in the workspace (on the path through a .pth) would run there.
    plant = (
        "cat > sitecustomize.py <<'EOF'\n"
        "import os\n"
        "os.makedirs('/logs/verifier', exist_ok=True)\n"
        "open('/logs/verifier/reward.txt', 'w').write('1')\n"
        "EOF\n"
    )
    record = run_task(backend, task_image, test="exit 0\n", solve=plant)
    assert record.result.error_kind == "no_reward", record.result


def test_a_module_the_agent_plants_in_the_workdir_does_not_run_in_the_verifier(
    backend: DockerBackend, task_image: str
) -> None:
    # `python3 -m unittest` in the working directory would import the agent's unittest/
    # before the standard library's, as root: its reward.json (read first) would stand.
    plant = (
        "mkdir -p unittest && cat > unittest/__main__.py <<'EOF'\n"
        "import json\n"
        "json.dump({'reward': 1}, open('/logs/verifier/reward.json', 'w'))\n"
        "EOF\n"
        "touch unittest/__init__.py\n"
    )
    test = (
        "cat > /tests/test_answer.py <<'EOF'\n"
        "import pathlib, unittest\n"
        "class Answer(unittest.TestCase):\n"
        "    def test_answer(self):\n"
        "        self.assertEqual(pathlib.Path('answer.txt').read_text().strip(), '42')\n"
        "EOF\n"
        "if python3 -m unittest discover -s /tests; then r=1; else r=0; fi\n"
        "echo $r > /logs/verifier/reward.txt\n"
        "env | grep ^PYTHON\n"
    )
    record = run_task(backend, task_image, test=test, solve=plant)
    log = record.artifacts["verifier.log"].decode()
    assert record.result.outcome == "failed", (record.result, log)
    assert record.result.score == 0.0
    assert "PYTHONSAFEPATH=1" in log and "PYTHONNOUSERSITE=1" in log, log


def test_the_verifier_runs_as_harbors_with_the_agents_package_behind_the_standard_library(
    backend: DockerBackend, task_image: str
) -> None:
    # The agent's package, run with `python3 -m` from the working directory as Harbor's
    # tests run one, and a json/ of its own that must not stand in for the standard library's.
    solve = (
        "mkdir -p tally json && touch tally/__init__.py json/__init__.py\n"
        "echo 'import json, sys; print(json.dumps(len(open(sys.argv[1]).read().split())))'"
        " > tally/__main__.py\n"
        "echo \"open('/logs/verifier/reward.txt', 'w').write('1')\" > json/__init__.py\n"
        "printf '#!/bin/sh\\necho ran\\n' > tool && chmod +x tool\n"
    )
    test = (
        "set -u; ok=1\n"
        "printf 'a b c\\n' > /tmp/words.txt\n"
        '[ "$(python3 -m tally /tmp/words.txt)" = 3 ] || { echo "no module"; ok=0; }\n'
        # Root's, with a writable root file system, an executable /tmp and workspace.
        "echo '#!/bin/sh' > /usr/local/bin/hello && chmod +x /usr/local/bin/hello"
        ' && hello || { echo "root fs"; ok=0; }\n'
        'cp /workspace/tool /tmp/tool && /tmp/tool && /workspace/tool || { echo "exec"; ok=0; }\n'
        "useradd -M probe && [ \"$(su probe -s /bin/sh -c 'id -un')\" = probe ]"
        ' || { echo "identity"; ok=0; }\n'
        '[ "$HOME" = /root ] || { echo "home $HOME"; ok=0; }\n'
        "grep CapEff /proc/self/status\n"
        "echo $ok > /logs/verifier/reward.txt\n"
    )
    record = run_task(backend, task_image, test=test, solve=solve, agent="oracle")
    log = record.artifacts["verifier.log"].decode()
    assert record.result.outcome == "passed", (record.result, log)
    assert "verifier: test.sh exited 0" in record.result.judges[0].detail

    # The strict verifier, which a task may ask for: no capability (so no change of
    # identity), no user site directory, a home of its own in /tmp.
    strict = run_task(backend, task_image, test=test, solve=solve, agent="oracle", strict=True)
    log = strict.artifacts["verifier.log"].decode()
    assert strict.result.outcome == "failed", (strict.result, log)
    assert "CapEff:\t0000000000000000" in log and "identity" in log, log
    assert "home /tmp/examhall-verifier-home" in log, log
    assert "strict verifier: test.sh exited 0" in strict.result.judges[0].detail


def test_the_agent_holds_no_capability_in_any_set_and_runs_as_the_tasks_user(
    backend: DockerBackend, task_image: str
) -> None:
    # The task's container holds the verifier's capabilities; the agent holds none of them,
    # not even in its bounding set, and runs as the user the task names (made for it here).
    probe = (
        "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status; whoami; echo home=$HOME\n"
        "ls -ld /logs/agent | awk '{print \"logs \" $3}'; echo note > /logs/agent/note.txt\n"
    )
    test = (
        '[ "$(cat /logs/agent/note.txt)" = note ] && [ "$(stat -c %U /workspace/seen)" = root ]'
        " && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
    )
    record = run_task(
        backend, task_image, test=test, solve=probe + "touch seen\n", agent_user="builder"
    )
    shown = "\n".join(e.content for e in record.events if e.type == "tool_result")
    for name in ("CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert f"{name}:\t0000000000000000" in shown, shown
    assert "builder\nhome=/home/builder\nlogs builder" in shown, shown
    assert record.result.outcome == "passed", record.result

    # Root is never the agent's user, even when a request names it: the worker runs the
    # agent as the sandbox user, named for whoami, and says why.
    rooted = run_task(backend, task_image, test=test, solve=probe, agent_user="root")
    shown = "\n".join(e.content for e in rooted.events if e.type == "tool_result")
    assert "\nexamhall-agent\nhome=/tmp/home\n" in shown, shown
    notes = [
        e.detail for e in rooted.events if isinstance(e, LifecycleEvent) and e.step == "agent_user"
    ]
    assert notes and "never runs the agent as root" in notes[0], notes


@pytest.mark.parametrize(
    ("test", "timeout_s", "words"),
    [
        ("exit 0\n", 30.0, "wrote no /logs/verifier/reward.txt"),
        ("echo many > /logs/verifier/reward.txt\n", 30.0, "does not hold a number"),
        ("ln -s /proc/1/environ /logs/verifier/reward.txt\n", 30.0, "cannot be read"),
        ("sleep 60\n", 2.0, "ran past its 2 s timeout"),
    ],
)
def test_a_verifier_without_a_reward_fails_the_run(
    backend: DockerBackend, task_image: str, test: str, timeout_s: float, words: str
) -> None:
    record = run_task(backend, task_image, test=test, agent="nop", verifier_timeout_s=timeout_s)
    result = record.result
    assert (result.outcome, result.error_kind, result.failed_step) == (
        "error",
        "no_reward",
        "verify",
    ), result
    assert words in (result.error_message or ""), result.error_message
    assert verdict("finished", result.outcome, result.error_kind) is False

"""Task environments built on the real engine: a declarative spec and Dockerfiles, the cache,
failures that say where, the air-gapped FROM mapping, and the worker layered onto images it
must run on (no Python, a USER of the task's) or refuse (musl, VOLUME, LD_* ENV, no /bin/sh).

Every image is tagged in a repository of this test run's own and removed afterwards; each
source carries the run's id, so no test reuses another run's (or a box's) environment."""

from __future__ import annotations

import base64
import hashlib
import shutil
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from sandbox.external import AGENT_BIN
from sandbox.protocol import ModelRef, RunSpec
from service.backends.docker import DockerBackend, DockerSettings
from service.environments import (
    AgentEnvironment,
    BuiltEnvironment,
    DeclarativeEnvironment,
    EnvironmentBuilder,
    EnvironmentBuildError,
    EnvironmentSource,
    declarative_source,
    dockerfile_source,
    ensure_agent_layer,
)
from service.environments.agents import AGENTS_ROOT
from service.environments.worker_layer import RUNTIME_PYTHON
from service.images.capped import OWNER_LABEL
from service.images.docker_engine import DockerImageEngine
from service.launch.launcher import Launcher
from service.launch.trial import run_trial
from service.settings import Settings
from service.suites.python import load_suite

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:10]
REPOSITORY = f"examhall-test-{RUN}/env"
DEBIAN = "examhall/debian-base:bookworm"
UNPRIVILEGED = "65532:65532"

# In an image without Python: the worker's package imports through the bundled runtime, and
# sys.executable is a path a subprocess can exec, which gets no LD_LIBRARY_PATH.
_RUNTIME_PROBE = """
import os, subprocess, sys
import sandbox.worker
child = subprocess.run(
    [sys.executable, "-I", "-c", "import os, sys; print(sys.version_info[:2] >= (3, 11))"],
    capture_output=True, text=True, check=True,
)
shell = subprocess.run(["/bin/sh", "-c", "echo ${LD_LIBRARY_PATH:-unset}"],
                       capture_output=True, text=True, check=True)
system = os.path.exists("/usr/bin/python3")
print(sys.executable, child.stdout.strip(), shell.stdout.strip(), system)
"""


class Lines(list[str]):
    def __call__(self, line: str) -> None:
        self.append(line)


@pytest.fixture(scope="module")
def cleanup(docker_client: docker.DockerClient) -> Iterator[None]:
    yield
    for image in docker_client.images.list(name=REPOSITORY):
        for tag in image.tags:
            # Untagged parents (the task images) go with their last child.
            docker_client.images.remove(tag, force=True)


@pytest.fixture
def builder(
    docker_client: docker.DockerClient, sandbox_image: str, cleanup: None
) -> Callable[..., EnvironmentBuilder]:
    def make(**settings: object) -> EnvironmentBuilder:
        return EnvironmentBuilder(
            DockerImageEngine(docker_client),
            sandbox_image=sandbox_image,
            settings=Settings(debian_suite="bookworm", **settings),  # type: ignore[arg-type]
            repository=REPOSITORY,
        )

    return make


def dockerfile(name: str, text: str, **files: bytes) -> EnvironmentSource:
    # The run's label makes the content hash this run's own.
    return dockerfile_source(
        f"suite environments, task {name}",
        {"Dockerfile": f"{text}\nLABEL examhall.test-run={RUN}\n".encode(), **files},
    )


def run(client: docker.DockerClient, ref: str, *argv: str, user: str = UNPRIVILEGED) -> str:
    """`argv` in a container of `ref` locked down as a trial's is (read-only, no network)."""
    output = client.containers.run(
        ref,
        entrypoint=list(argv),
        user=user,
        read_only=True,
        tmpfs={"/workspace": "", "/tmp": ""},
        network_disabled=True,
        remove=True,
    )
    return bytes(output).decode()


def trial_passes(client: docker.DockerClient, env: BuiltEnvironment) -> None:
    """A real trial (the worker from start to judging, self-check included) in `env`."""
    backend = DockerBackend(DockerSettings(image=env.ref, scope=f"tests-env-{RUN}"), client)
    record = run_trial(
        Launcher(backend),
        RunSpec(
            trial_id=f"env-{uuid.uuid4().hex[:8]}",
            suite=load_suite("evals/smoke.py"),
            case_id="create-greeting",
            model=ModelRef.parse("faux/solution"),
        ),
        job_id="tests",
        deadline_s=120,
    )
    result = record.result
    assert (result.outcome, result.error_message) == ("passed", None), record.steps


def test_declarative_environment_builds_runs_and_is_cached(
    builder: Callable[..., EnvironmentBuilder], docker_client: docker.DockerClient
) -> None:
    spec = DeclarativeEnvironment(
        apt=["jq"],
        files={"data/input.json": '{"answer": 42}\n'},
        env={"EXAMHALL_TEST_RUN": RUN},
        workdir="/app",
    )
    source = declarative_source("suite environments, case jq", spec)
    envs = builder()
    assert envs.cached(source) is None
    progress = Lines()
    env = envs.build(source, progress)
    assert env.ref.startswith(f"{REPOSITORY}:") and env.workdir == "/app"
    assert any(line.startswith("Step ") for line in progress)

    # As the agent would run it: the sandbox user, a read-only root, no network.
    assert run(docker_client, env.ref, "jq", "--version").startswith("jq-1.")
    seeded = run(
        docker_client,
        env.ref,
        "/bin/sh",
        "-c",
        "readlink /workspace; [ -d /app ] && [ ! -L /app ] && ls -A /app;"
        " cat /opt/examhall/seed/data/input.json",
    )
    # The workdir is the workspace's mount point, empty in the image; its files are seeds.
    assert seeded == '/app\n{"answer": 42}\n'
    image = docker_client.images.get(env.ref)
    assert image.labels["examhall.workdir"] == "/app"
    assert image.attrs["Config"]["User"] == "0:0"
    trial_passes(docker_client, env)

    # The second time: the same image, and no builder call (no step was printed).
    again = Lines()
    assert envs.build(source, again) == env
    assert not any(line.startswith("Step ") for line in again), again
    assert envs.cached(source) == env
    assert docker_client.images.get(env.ref).id == env.digest


def test_a_failing_step_names_the_source_the_step_and_the_log(
    builder: Callable[..., EnvironmentBuilder], docker_client: docker.DockerClient
) -> None:
    source = dockerfile(
        "broken", f"FROM {DEBIAN}\nRUN echo about-to-fail-{RUN} && exit 3\nRUN echo never"
    )
    with pytest.raises(EnvironmentBuildError) as caught:
        builder().build(source, Lines())
    message = str(caught.value)
    assert "suite environments, task broken" in message
    assert f"Step 2/4 : RUN echo about-to-fail-{RUN} && exit 3" in message
    assert f"about-to-fail-{RUN}" in message.split("Last build output:")[1]
    assert "returned a non-zero code: 3" in message
    assert caught.value.step == f"Step 2/4 : RUN echo about-to-fail-{RUN} && exit 3"
    base = docker_client.images.get(DEBIAN).id
    assert f"{DEBIAN} is {base} ({DEBIAN})\nStep 1/4 : FROM {base}" in caught.value.log


def test_from_images_are_mapped_and_an_unknown_one_names_the_setting(
    builder: Callable[..., EnvironmentBuilder], docker_client: docker.DockerClient
) -> None:
    source = dockerfile(
        "mapped",
        "ARG BASE=registry.invalid/team/base:1\nFROM ${BASE} AS first\nRUN touch /mapped\n"
        "FROM debian:bookworm-slim\nCOPY --from=first /mapped /from-first",
    )
    envs = builder(image_map=f"registry.invalid/team/base:1={DEBIAN}")
    progress = Lines()
    env = envs.build(source, progress)
    assert "registry.invalid/team/base:1 is mapped to examhall/debian-base:bookworm." in progress
    assert any(
        "debian:bookworm-slim is not present and not mapped; using the bootstrapped" in line
        for line in progress
    )
    assert run(docker_client, env.ref, "ls", "/from-first") == "/from-first\n"

    unknown = dockerfile("unknown", "FROM registry.invalid/nothing:2\nRUN true")
    for attempt in (lambda: envs.build(unknown, Lines()), lambda: envs.cached(unknown)):
        with pytest.raises(EnvironmentBuildError) as caught:
            attempt()
        message = str(caught.value)
        assert "suite environments, task unknown" in message
        assert "registry.invalid/nothing:2 is not present" in message
        assert "EXAMHALL_IMAGE_MAP=registry.invalid/nothing:2=LOCAL_IMAGE" in message


def test_an_image_without_python_runs_the_worker_on_the_bundled_one(
    builder: Callable[..., EnvironmentBuilder], docker_client: docker.DockerClient
) -> None:
    source = dockerfile(
        "no-python",
        f"FROM {DEBIAN}\nRUN rm -rf /usr/bin/python3* /usr/lib/python3* /usr/lib/python3.11 "
        "&& ! command -v python3",
    )
    progress = Lines()
    env = builder().build(source, progress)
    assert "The image has no python3 >= 3.11 the worker can use; bundling one." in progress
    config = docker_client.images.get(env.ref).attrs["Config"]
    assert config["Entrypoint"] == [RUNTIME_PYTHON, "-P", "-S", "-m", "sandbox.worker"]
    output = run(docker_client, env.ref, RUNTIME_PYTHON, "-P", "-c", _RUNTIME_PROBE)
    assert output == f"{RUNTIME_PYTHON} True unset False\n"
    trial_passes(docker_client, env)


def test_a_task_user_does_not_change_who_starts_the_worker_and_the_workdir_is_seeded(
    builder: Callable[..., EnvironmentBuilder], docker_client: docker.DockerClient
) -> None:
    source = dockerfile(
        "user",
        f"FROM {DEBIAN}\nWORKDIR /srv/task\nRUN echo seeded > note.txt\nUSER root\nUSER 1234",
    )
    env = builder().build(source, Lines())
    assert env.workdir == "/srv/task"
    assert docker_client.images.get(env.ref).attrs["Config"]["User"] == "0:0"
    # Without a user override the container starts as the image says: root.
    assert run(docker_client, env.ref, "id", "-u", user="") == "0\n"
    listing = run(
        docker_client,
        env.ref,
        "/bin/sh",
        "-c",
        "readlink /workspace; cat /opt/examhall/seed/note.txt",
    )
    assert listing == "/srv/task\nseeded\n"
    # The worker's code is root's and nobody else can write it.
    writable = run(docker_client, env.ref, "find", "/opt/examhall", "-writable")
    assert writable == ""
    trial_passes(docker_client, env)


@pytest.mark.parametrize(
    ("name", "text", "refusal"),
    [
        (
            "musl",
            f"FROM {DEBIAN}\nRUN touch /lib/ld-musl-x86_64.so.1",
            "is musl-based (/lib/ld-musl-x86_64.so.1",
        ),
        ("volume", f"FROM {DEBIAN}\nVOLUME /data", "declares VOLUME /data"),
        ("onbuild", f"FROM {DEBIAN}\nONBUILD VOLUME /data", "has ONBUILD triggers (VOLUME /data"),
        ("preload", f"FROM {DEBIAN}\nENV LD_PRELOAD=/x.so", "sets LD_PRELOAD, which would reach"),
        ("no-shell", "FROM scratch\nCOPY Dockerfile /Dockerfile", "has no /bin/sh"),
    ],
)
def test_images_the_worker_cannot_run_on_are_refused(
    builder: Callable[..., EnvironmentBuilder], name: str, text: str, refusal: str
) -> None:
    with pytest.raises(EnvironmentBuildError) as caught:
        builder().build(dockerfile(name, text), Lines())
    message = str(caught.value)
    assert message.startswith(f"The environment of suite environments, task {name} is refused")
    assert refusal in message
    assert caught.value.step == "checking the image"


def test_a_build_out_of_time_is_abandoned_and_leaves_no_container(
    builder: Callable[..., EnvironmentBuilder], docker_client: docker.DockerClient
) -> None:
    marker = f"examhall-timeout-{RUN}"
    source = dockerfile("slow", f"FROM {DEBIAN}\nRUN sleep 300 && echo {marker}")
    source = EnvironmentSource(source.name, source.files, None, 5.0)

    def leftovers() -> list[str]:
        return [
            str(c.id)
            for c in docker_client.containers.list(all=True, ignore_removed=True)
            if marker in " ".join(c.attrs["Config"].get("Cmd") or [])
        ]

    running: list[str] = []

    def progress(line: str) -> None:
        # The step's container is there while it runs: the check below can see one.
        if "Running in" in line:
            running.extend(leftovers())

    started = time.monotonic()
    with pytest.raises(EnvironmentBuildError, match="ran out of its 5 s and was abandoned"):
        builder().build(source, progress)
    assert time.monotonic() - started < 60
    assert running

    deadline = time.monotonic() + 30
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert leftovers() == []


@pytest.fixture(scope="module")
def agent_cleanup(docker_client: docker.DockerClient) -> Iterator[None]:
    yield
    for image in docker_client.images.list(name=f"{REPOSITORY}-agent"):
        for tag in image.tags:
            docker_client.images.remove(tag, force=True)


def test_agents_install_above_an_environment_without_python(
    builder: Callable[..., EnvironmentBuilder],
    docker_client: docker.DockerClient,
    agent_cleanup: None,
) -> None:
    envs = builder()
    env = envs.build(
        dockerfile(
            "agents", f"FROM {DEBIAN}\nRUN rm -rf /usr/bin/python3* /usr/lib/python3* && true"
        ),
        Lines(),
    )
    pip_agent = AgentEnvironment(pip=["cowsay==6.1"], command=["cowsay", "-t", "{task}"])
    layered = ensure_agent_layer(envs, env, pip_agent, Lines())
    assert layered.workdir == env.workdir and layered.ref != env.ref
    said = run(docker_client, layered.ref, f"{AGENT_BIN}/cowsay", "-t", "moo")
    assert "moo" in said
    # The agent's packages are the agent's: the worker's interpreter does not see them.
    worker_sees = run(
        docker_client,
        layered.ref,
        RUNTIME_PYTHON,
        "-c",
        "import importlib.util; print(importlib.util.find_spec('cowsay'))",
    )
    assert worker_sees == "None\n"
    again = Lines()
    assert ensure_agent_layer(envs, env, pip_agent, again) == layered
    assert not any(line.startswith("Step ") for line in again)

    llm = ensure_agent_layer(envs, env, AgentEnvironment(catalogue="llm"), Lines())
    # On the agent's PATH (AGENT_BIN first), and on no other: not the verifier's.
    script = (
        f"PATH={AGENT_BIN}:/usr/bin:/bin; command -v examhall-llm-agent; "
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; "
        "command -v examhall-llm-agent || echo not on the standard PATH"
    )
    said = run(docker_client, llm.ref, "/bin/sh", "-c", script)
    assert said == f"{AGENT_BIN}/examhall-llm-agent\nnot on the standard PATH\n", said


# The pip agents below come from a directory of wheels made here (pip's --find-links, no
# index): a wheel is a zip with a dist-info. pip's own wheel is the host Python's bundled one.
def make_wheel(
    into: Path,
    name: str,
    *,
    scripts: dict[str, str] | None = None,
    requires: tuple[str, ...] = (),
    files: dict[str, str] | None = None,
    version: str = "1.0",
) -> Path:
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    members = {
        f"{module}/__init__.py": "",
        **(files or {}),
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: examhall-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    if scripts:
        members[f"{info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{script} = {target}\n" for script, target in scripts.items()
        )
    record = []
    for member, text in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{member},sha256={digest.decode()},{len(text.encode())}")
    members[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = into / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in members.items():
            # A fixed date: the same files make the same bytes.
            wheel.writestr(zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0)), text)
    return path


def bundled_pip() -> Path:
    import ensurepip

    found = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    if not found:
        pytest.fail("the host Python bundles no pip wheel (ensurepip/_bundled); install one")
    return found[-1]


PROBE = {
    "examhall_probe_agent/__init__.py": (
        "import sys\ndef main():\n    print('probe-agent says', *sys.argv[1:])\n"
    ),
}


@pytest.fixture
def wheelhouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A --find-links directory the host's pip download reads instead of any index."""
    house = tmp_path / "wheelhouse"
    house.mkdir()
    shutil.copy(bundled_pip(), house)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(house))
    return house


@pytest.fixture(scope="module")
def pip_env(builder_module: EnvironmentBuilder) -> BuiltEnvironment:
    # The image has a pip of its own, which a dependency's `pip` must not be refused over.
    return builder_module.build(
        dockerfile("pip-agents", f"FROM {DEBIAN}\nRUN ln -s /bin/true /usr/local/bin/pip"),
        Lines(),
    )


@pytest.fixture(scope="module")
def builder_module(
    docker_client: docker.DockerClient, sandbox_image: str, cleanup: None, agent_cleanup: None
) -> EnvironmentBuilder:
    return EnvironmentBuilder(
        DockerImageEngine(docker_client),
        sandbox_image=sandbox_image,
        settings=Settings(debian_suite="bookworm"),
        repository=REPOSITORY,
    )


def agent_images(client: docker.DockerClient) -> set[str]:
    return {str(image.id) for image in client.images.list(name=f"{REPOSITORY}-agent")}


def install_containers(client: docker.DockerClient) -> list[str]:
    """This run's install containers still there (every one is removed, refused or not)."""
    return [
        str(c.name)
        for c in client.containers.list(all=True, filters={"name": "examhall-agent-install-"})
        if str(c.attrs["Config"]["Image"]).startswith(REPOSITORY)
    ]


PROBE_AGENT = AgentEnvironment(pip=["examhall-probe-agent==1.0"], command=["probe-agent", "{task}"])


def test_a_dependency_shipping_pip_is_no_conflict_and_only_the_agents_command_is_exposed(
    builder_module: EnvironmentBuilder,
    pip_env: BuiltEnvironment,
    wheelhouse: Path,
    docker_client: docker.DockerClient,
) -> None:
    make_wheel(
        wheelhouse,
        "examhall-probe-agent",
        scripts={"probe-agent": "examhall_probe_agent:main"},
        requires=("examhall-probe-dep==1.0",),
        files=PROBE,
    )
    make_wheel(wheelhouse, "examhall-probe-dep", scripts={"pip": "examhall_probe_dep:main"})
    layered = ensure_agent_layer(builder_module, pip_env, PROBE_AGENT, Lines())
    # Its install container's build owner stays behind: a trial container of the layer
    # would carry it, and a build reaper would take the trial for a gone plane's build.
    assert not docker_client.images.get(layered.ref).labels.get(OWNER_LABEL)
    # The agent's PATH (sandbox/external.py puts AGENT_BIN first) finds its command...
    said = run(
        docker_client,
        layered.ref,
        "/bin/sh",
        "-c",
        f"PATH={AGENT_BIN}:/usr/local/bin:/usr/bin:/bin; probe-agent moo; command -v pip;"
        f" ls {AGENT_BIN}; ls {AGENTS_ROOT}/*/bin",
    )
    lines = said.splitlines()
    assert lines[0] == "probe-agent says moo", said
    # ...and the image's pip, not the dependency's, which stays in the agent's prefix.
    assert lines[1] == "/usr/local/bin/pip", said
    assert lines[2] == "probe-agent", said
    assert {"pip", "probe-agent"} <= set(lines[3:]), said
    # Neither the image's Python nor the worker's sees the agent's packages.
    worker = docker_client.images.get(layered.ref).attrs["Config"]["Entrypoint"][0]
    for python in ("/usr/bin/python3", worker):
        seen = run(
            docker_client,
            layered.ref,
            python,
            "-c",
            "import importlib.util; print(importlib.util.find_spec('examhall_probe_agent'))",
        )
        assert seen == "None\n", (python, seen)
    assert install_containers(docker_client) == []

    # In a trial, the worker finds the command on the agent's PATH (sandbox/external.py).
    backend = DockerBackend(
        DockerSettings(image=layered.ref, scope=f"tests-env-{RUN}"), docker_client
    )
    record = run_trial(
        Launcher(backend),
        RunSpec(
            trial_id=f"env-{uuid.uuid4().hex[:8]}",
            suite=load_suite("evals/smoke.py"),
            case_id="create-greeting",
            model=ModelRef.parse("faux/solution"),
            command=("probe-agent", "{task}"),
        ),
        job_id="tests",
        deadline_s=120,
    )
    assert b"probe-agent says" in record.artifacts.get("agent.stdout", b""), record.result


def test_a_console_script_that_is_a_path_is_refused_naming_its_wheel(
    builder_module: EnvironmentBuilder,
    pip_env: BuiltEnvironment,
    wheelhouse: Path,
    docker_client: docker.DockerClient,
) -> None:
    make_wheel(
        wheelhouse,
        "examhall-probe-agent",
        scripts={"probe-agent": "examhall_probe_agent:main"},
        requires=("examhall-probe-dep==1.0",),
        files=PROBE,
    )
    make_wheel(
        wheelhouse,
        "examhall-probe-dep",
        scripts={"../lib/python3.11/dist-packages/usercustomize.py": "examhall_probe_dep:x"},
    )
    before = agent_images(docker_client)
    with pytest.raises(EnvironmentBuildError) as refused:
        ensure_agent_layer(builder_module, pip_env, PROBE_AGENT, Lines())
    message = str(refused.value)
    assert "examhall_probe_dep-1.0-py3-none-any.whl" in message, message
    assert "../lib/python3.11/dist-packages/usercustomize.py" in message, message
    assert "not a plain file name" in message and "Nothing was installed" in message, message
    assert agent_images(docker_client) == before
    assert install_containers(docker_client) == []


def test_a_layer_that_changes_files_outside_its_prefix_is_refused(
    builder_module: EnvironmentBuilder,
    pip_env: BuiltEnvironment,
    wheelhouse: Path,
    docker_client: docker.DockerClient,
) -> None:
    # pip itself comes from the index: one that writes where every root Python looks (and
    # then does what the install script checks) must still leave no image behind.
    for old in wheelhouse.glob("pip-*.whl"):
        old.unlink()
    make_wheel(
        wheelhouse,
        "pip",
        version="99.0",
        files={
            "pip/__main__.py": (
                "import os, sys\n"
                "open('/usr/lib/python3/dist-packages/usercustomize.py', 'w').write('')\n"
                "target = sys.argv[sys.argv.index('--target') + 1]\n"
                "os.makedirs(os.path.join(target, 'bin'))\n"
                "script = os.path.join(target, 'bin', 'probe-agent')\n"
                "open(script, 'w').write('#!/bin/sh\\n')\n"
                "os.chmod(script, 0o755)\n"
            )
        },
    )
    make_wheel(
        wheelhouse,
        "examhall-probe-agent",
        scripts={"probe-agent": "examhall_probe_agent:main"},
        files=PROBE,
    )
    agent = AgentEnvironment(pip=["examhall-probe-agent==1.0"], command=["probe-agent", "{task}"])
    before = agent_images(docker_client)
    with pytest.raises(EnvironmentBuildError) as refused:
        ensure_agent_layer(builder_module, pip_env, agent, Lines())
    message = str(refused.value)
    assert "changed files outside its directory" in message, message
    assert "added /usr/lib/python3/dist-packages/usercustomize.py" in message, message
    assert "no image was made" in message
    assert agent_images(docker_client) == before
    assert install_containers(docker_client) == []


def test_the_layers_cache_key_covers_the_wheels_bytes(
    builder_module: EnvironmentBuilder,
    pip_env: BuiltEnvironment,
    wheelhouse: Path,
    docker_client: docker.DockerClient,
) -> None:
    def probe(says: str) -> BuiltEnvironment:
        make_wheel(
            wheelhouse,
            "examhall-probe-agent",
            scripts={"probe-agent": "examhall_probe_agent:main"},
            files={"examhall_probe_agent/__init__.py": f"def main():\n    print({says!r})\n"},
        )
        return ensure_agent_layer(builder_module, pip_env, PROBE_AGENT, Lines())

    first = probe("first")
    again = probe("first")
    second = probe("second")  # the same name and version, other bytes
    assert again == first
    assert second.ref != first.ref and second.content_hash != first.content_hash
    path = f"PATH={AGENT_BIN}:/usr/bin:/bin"
    assert run(docker_client, second.ref, "/bin/sh", "-c", f"{path} probe-agent") == "second\n"
    assert run(docker_client, first.ref, "/bin/sh", "-c", f"{path} probe-agent") == "first\n"


def test_a_pip_agent_runs_on_the_bundled_python_of_an_image_without_one(
    builder_module: EnvironmentBuilder, wheelhouse: Path, docker_client: docker.DockerClient
) -> None:
    env = builder_module.build(
        dockerfile(
            "agents-no-python",
            f"FROM {DEBIAN}\nRUN rm -rf /usr/bin/python3* /usr/lib/python3* && true",
        ),
        Lines(),
    )
    make_wheel(
        wheelhouse,
        "examhall-probe-agent",
        scripts={"probe-agent": "examhall_probe_agent:main"},
        files=PROBE,
    )
    layered = ensure_agent_layer(builder_module, env, PROBE_AGENT, Lines())
    said = run(docker_client, layered.ref, f"{AGENT_BIN}/probe-agent", "moo")
    assert said == "probe-agent says moo\n"
    seen = run(
        docker_client,
        layered.ref,
        RUNTIME_PYTHON,
        "-c",
        "import importlib.util; print(importlib.util.find_spec('examhall_probe_agent'))",
    )
    assert seen == "None\n"

"""Agents installed over the API: a layer above a task environment with an agent CLI in it,
from examhall's catalogue (the `llm` CLI) or from pinned pip requirements with a command.

The wheels are downloaded on the host for the environment's worker Python (the image's own,
or the bundled one), so the build needs no index inside it; the packages go to a target
directory of their own under /opt/examhall-agents, apart from the task's Python. A pip
agent's console scripts get launchers on PATH (/usr/local/bin) that run them with that
Python in isolated mode, so nothing of the agent reaches the task's processes through the
environment; a name the task image already has is refused rather than shadowed.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import docker

from service.backends.docker.agent_images import recipe_dir
from service.backends.docker.debian_base import ImageBuildError, Progress
from service.backends.docker.images import HASH_LABEL, BuildContext, fields_digest
from service.backends.docker.wheels import download_wheels, image_glibc, python_version
from service.domain.agents import AGENTS, AgentEnvironment
from service.environments.build import BuildError, BuildLimits, BuildLog, run_build
from service.environments.builder import BuiltEnvironment, EnvironmentBuilder
from service.environments.errors import EnvironmentBuildError
from service.environments.worker_layer import WORKDIR_LABEL

AGENT_LABEL = "examhall.agent"
_PIP_RECIPE_VERSION = "1"
_AGENTS_DIR = "/opt/examhall-agents"

# Run as root in the layer's build: install, then give each console script a launcher.
_PIP_INSTALL = r"""set -eu
python="$1"; prefix="$2"; shift 2
"$python" "$(ls /tmp/examhall-agent-wheels/pip-*.whl)/pip" install --no-index \
  --find-links /tmp/examhall-agent-wheels --no-cache-dir --root-user-action=ignore \
  --disable-pip-version-check --target "$prefix/lib" "$@"
rm -rf /tmp/examhall-agent-wheels
mkdir -p "$prefix/bin"
"$python" -I /tmp/examhall-launchers.py "$python" "$prefix"
rm -f /tmp/examhall-launchers.py /tmp/examhall-agent-install.sh
chmod -R a+rX,go-w "$prefix"
"""

# Reads the installed distributions' console_scripts and writes one launcher each.
_LAUNCHERS = r"""import configparser, glob, os, shutil, sys
python, prefix = sys.argv[1], sys.argv[2]
lib = os.path.join(prefix, "lib")
for path in sorted(glob.glob(os.path.join(lib, "*.dist-info", "entry_points.txt"))):
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(path)
    if not parser.has_section("console_scripts"):
        continue
    for name, target in parser.items("console_scripts"):
        module, _, func = target.partition(":")
        func = func.split("[")[0].strip()
        found = shutil.which(name)  # on the image's PATH: the build runs with it
        if found:
            sys.exit(f"examhall: the agent's command {name} would shadow the image's {found}")
        launcher = os.path.join(prefix, "bin", name)
        with open(launcher, "w") as out:
            out.write(f"#!{python} -I\nimport sys\nsys.path[:0] = [{lib!r}]\n"
                      f"from {module.strip()} import {func.split('.')[0]}\n"
                      f"sys.argv[0] = {name!r}\nsys.exit({func}())\n")
        os.chmod(launcher, 0o755)
        os.symlink(launcher, os.path.join("/usr/local/bin", name))
"""


def ensure_agent_layer(
    builder: EnvironmentBuilder,
    env: BuiltEnvironment,
    agent: AgentEnvironment,
    progress: Progress,
) -> BuiltEnvironment:
    """`env` with `agent` installed above it, built unless it is already."""
    client = builder.client
    python = _worker_python(client, env.ref)
    if agent.catalogue is not None:
        recipe = recipe_dir(AGENTS[agent.catalogue])
        files = {p.name: p.read_bytes() for p in sorted(recipe.iterdir()) if p.is_file()}
        requirements = [AGENTS[agent.catalogue].requirement]
    else:
        files = {
            "Dockerfile": _pip_dockerfile(env.digest, python, agent).encode(),
            "examhall-agent-install.sh": _PIP_INSTALL.encode(),
            "examhall-launchers.py": _LAUNCHERS.encode(),
        }
        requirements = list(agent.pip)
    digest = fields_digest(
        [
            ("environment", env.content_hash.encode()),
            ("agent", agent.model_dump_json().encode()),
            ("pip-recipe", _PIP_RECIPE_VERSION.encode()),
            *((f"file:{name}", data) for name, data in sorted(files.items())),
        ]
    )
    ref = f"{builder.repository}-agent:{digest[:12]}"
    try:
        image = client.images.get(ref)
        if image.labels.get(HASH_LABEL) == digest:
            progress(f"Agent layer {ref} is built already.")
            return BuiltEnvironment(ref, str(image.id), digest, env.workdir)
    except docker.errors.ImageNotFound:
        pass
    settings = builder.settings
    log = BuildLog()
    started = time.monotonic()
    name = agent.catalogue or " ".join(agent.pip)
    try:
        with tempfile.TemporaryDirectory(prefix="examhall-agent-wheels-") as scratch:
            version = python_version(client, env.ref, python)
            glibc = image_glibc(client, env.ref, python)
            download_wheels(requirements, version, Path(scratch), progress, glibc=glibc)
            wheel_dir = "wheels" if agent.catalogue else "examhall-agent-wheels"
            for path in sorted(Path(scratch).iterdir()):
                files[f"{wheel_dir}/{path.name}"] = path.read_bytes()
        context = BuildContext(files.pop("Dockerfile"), tuple(sorted(files.items())))
        labels = {HASH_LABEL: digest, AGENT_LABEL: name[:200]}
        if env.workdir:
            labels[WORKDIR_LABEL] = env.workdir
        progress(f"Installing the agent {name} above {env.ref}...")
        image_id = run_build(
            client,
            context.tarball(),
            tag=ref,
            labels=labels,
            buildargs={"SANDBOX": env.digest, "PYTHON": python},
            limits=BuildLimits(settings.build_memory, settings.build_cpu_shares, "none"),
            timeout_s=settings.build_timeout_s,
            progress=progress,
            log=log,
        )
    except BuildError as exc:
        raise EnvironmentBuildError(
            f"Installing the agent {name} above {env.ref} failed at {exc.log.step!r}: "
            f"{exc.message}\nLast build output:\n{exc.log.tail()}",
            log=exc.log.text(),
            step=exc.log.step,
        ) from exc
    except ImageBuildError as exc:
        raise EnvironmentBuildError(f"Installing the agent {name} failed: {exc}") from exc
    progress(f"Built {ref} in {time.monotonic() - started:.1f} s.")
    return BuiltEnvironment(ref, image_id, digest, env.workdir)


def _worker_python(client: docker.DockerClient, ref: str) -> str:
    """The interpreter the environment's worker runs on, which the agent shares."""
    entrypoint = client.images.get(ref).attrs["Config"].get("Entrypoint") or []
    if not entrypoint or not str(entrypoint[0]).startswith("/"):
        raise EnvironmentBuildError(
            f"{ref} is not an examhall environment (its entrypoint is {entrypoint}); "
            f"build it with the EnvironmentBuilder first"
        )
    return str(entrypoint[0])


def _pip_dockerfile(base: str, python: str, agent: AgentEnvironment) -> str:
    prefix = f"{_AGENTS_DIR}/pip-{fields_digest([('pip', ' '.join(agent.pip).encode())])[:12]}"
    install = ["/bin/sh", "/tmp/examhall-agent-install.sh", python, prefix, *agent.pip]
    return (
        f"FROM {base}\n"
        "USER 0:0\n"
        "COPY examhall-agent-wheels /tmp/examhall-agent-wheels\n"
        "COPY examhall-agent-install.sh examhall-launchers.py /tmp/\n"
        f"RUN {json.dumps(install)}\n"
        "USER 0:0\n"
    )

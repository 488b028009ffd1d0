"""Agents installed over the API: a layer above a task environment with an agent CLI in it,
from examhall's catalogue (the `llm` CLI) or from pinned pip requirements with a command.

The wheels are downloaded on the host for the environment's worker Python (the image's own,
or the bundled one), so the build needs no index inside it, and the layer's cache key covers
every wheel's sha256. Each wheel is read before anything is installed: a member path or a
script name that is not a plain file name (`../lib/python3.11/dist-packages/usercustomize.py`
would have every root Python load the agent's code) refuses the agent, naming the wheel.

A pip agent is installed by pip, run as root in a container of the environment with no
network and no capability, into a root-owned prefix of its own, /opt/examhall-agents/<hash>:
its packages in lib, every console script pip wrote in bin. What the container changed (the
engine's diff of it) must lie in that prefix, else the layer is refused and no image is
made; only then is it committed, with one file added by examhall: a launcher for the agent's
declared command in /opt/examhall-agents/bin, which runs pip's script with the worker's
Python in isolated mode and the prefix's lib on its path. That directory is on the agent's
PATH alone (sandbox/external.py), never on the verifier's, and no other Python sees the
agent's packages. Its dependencies' commands stay in the prefix, so one the image has too
(`pip`) shadows nothing.
"""

from __future__ import annotations

import configparser
import hashlib
import io
import json
import re
import stat
import tarfile
import tempfile
import time
import uuid
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from sandbox.external import AGENT_BIN
from service.domain.agents import AGENTS, AgentEnvironment
from service.environments.builder import BuiltEnvironment, EnvironmentBuilder
from service.environments.errors import EnvironmentBuildError
from service.environments.worker_layer import WORKDIR_LABEL
from service.images.agent_images import recipe_dir
from service.images.capped import OWNER_LABEL, Caps
from service.images.capped_build import BuildError, BuildLog
from service.images.debian_base import ImageBuildError, Progress
from service.images.engine import EngineError, EngineTimeout, ScratchContainer
from service.images.sandbox_image import HASH_LABEL, BuildContext, fields_digest
from service.images.wheels import download_wheels

AGENT_LABEL = "examhall.agent"
# 3: the layer no longer carries its install container's build owner.
_PIP_RECIPE_VERSION = "3"
AGENTS_ROOT = "/opt/examhall-agents"
# Apart from /opt/examhall, the worker's import root (sandbox/verifier.py puts it on the
# path of the Python that launches the verifier as root).
_ANCESTORS = ("/opt", AGENTS_ROOT)
# The directories on the agent's PATH after AGENT_BIN (sandbox/credentials.py): the agent's
# command must not hide one of the image's there.
_AGENT_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
# What a script (or a wheel's file) may be named: a plain file name, nothing a path can be
# built from, no option, no space.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+@-]{0,199}\Z")
_DIFF_KINDS = {0: "changed", 1: "added", 2: "deleted"}

# Run as root in the install container. Everything up to pip is examhall's; what runs after
# pip may no longer be (pip came from the index), which is why the container's diff, not this
# script, decides. Temporary files go to the prefix, so that nothing else changes. --target,
# not a virtual environment: the bundled Python (service/environments/bundle_python.py)
# names a fixed argv[0], so a venv's pyvenv.cfg would never be found.
_PIP_INSTALL = r"""set -eu
python="$1"; prefix="$2"; command="$3"; shift 3
for dir in __AGENT_PATH__; do
  if [ -e "$dir/$command" ] || [ -L "$dir/$command" ]; then
    echo "examhall: the agent's command $command would shadow the image's $dir/$command;" \
      "declare another of its commands" >&2
    exit 3
  fi
done
mkdir -p "$prefix/.tmp"
export TMPDIR="$prefix/.tmp" HOME="$prefix/.tmp"
wheels="$prefix/.wheels"
"$python" -I "$(ls "$wheels"/pip-*.whl)/pip" install --no-index --find-links "$wheels" \
  --no-cache-dir --no-compile --root-user-action=ignore --disable-pip-version-check \
  --no-warn-script-location --target "$prefix/lib" "$@"
rm -rf "$wheels" "$prefix/.tmp"
if [ -d "$prefix/lib/bin" ]; then mv "$prefix/lib/bin" "$prefix/bin"; fi
test -f "$prefix/bin/$command" || {
  echo "examhall: pip installed no command $command in $prefix/bin" >&2; exit 4; }
chmod -R a+rX,go-w,ug-s "$prefix"
""".replace("__AGENT_PATH__", " ".join(_AGENT_PATH))


def ensure_agent_layer(
    builder: EnvironmentBuilder,
    env: BuiltEnvironment,
    agent: AgentEnvironment,
    progress: Progress,
) -> BuiltEnvironment:
    """`env` with `agent` installed above it, built unless it is already."""
    engine = builder.engine
    base = engine.image(env.ref)
    if base is None:
        raise EnvironmentBuildError(f"The environment {env.ref} is gone; submit the job again.")
    python = _worker_python(env.ref, base.config)
    name = agent.catalogue or " ".join(agent.pip)
    if agent.catalogue is not None:
        recipe = recipe_dir(AGENTS[agent.catalogue].name)
        files = {p.name: p.read_bytes() for p in sorted(recipe.iterdir()) if p.is_file()}
        requirements = [AGENTS[agent.catalogue].requirement]
    else:
        files = {"install.sh": _PIP_INSTALL.encode()}
        requirements = list(agent.pip)
    # Downloaded before the cache is looked up: the key covers the wheels' bytes, so a
    # release replaced on the index (or an index that serves other bytes) is a new layer.
    try:
        with tempfile.TemporaryDirectory(prefix="examhall-agent-wheels-") as scratch:
            found = engine.image_python(env.ref, python, caps=_caps(builder))
            download_wheels(requirements, found.version, Path(scratch), progress, glibc=found.glibc)
            wheels = {path.name: path.read_bytes() for path in sorted(Path(scratch).iterdir())}
    except (ImageBuildError, EngineError) as exc:
        raise EnvironmentBuildError(f"Installing the agent {name} failed: {exc}") from exc
    scripts = check_wheels(wheels)
    digest = fields_digest(
        [
            ("environment", env.content_hash.encode()),
            # Without env, the key an agent had before env existed: no layer is rebuilt.
            ("agent", agent.model_dump_json(exclude={"env"} if not agent.env else None).encode()),
            ("pip-recipe", _PIP_RECIPE_VERSION.encode()),
            *((f"file:{name}", data) for name, data in sorted(files.items())),
            *(
                (f"wheel:{wheel}", hashlib.sha256(data).hexdigest().encode())
                for wheel, data in sorted(wheels.items())
            ),
        ]
    )
    ref = f"{builder.repository}-agent:{digest[:12]}"
    image = engine.image(ref)
    if image is not None and image.labels.get(HASH_LABEL) == digest:
        progress(f"Agent layer {ref} is built already.")
        return BuiltEnvironment(ref, image.id, digest, env.workdir)
    labels = {HASH_LABEL: digest, AGENT_LABEL: name[:200]}
    if env.workdir:
        labels[WORKDIR_LABEL] = env.workdir
    started = time.monotonic()
    progress(f"Installing the agent {name} above {env.ref}...")
    if agent.catalogue is not None:
        image_id = _build_catalogue(builder, env, python, files, wheels, ref, labels, progress)
    else:
        command = agent.argv()[0]
        if not _PLAIN_NAME.match(command) or command not in scripts:
            raise EnvironmentBuildError(
                f"The agent {name}'s command {command!r} is none of the console scripts its "
                f"wheels install ({', '.join(sorted(scripts)) or 'none'}); make the first "
                f"word of command one of them."
            )
        prefix = f"{AGENTS_ROOT}/{digest[:16]}"
        image_id = _install_pip_agent(
            builder, env, base.config, python, prefix, command, requirements, wheels, ref,
            labels, agent.env,
        )  # fmt: skip
    progress(f"Built {ref} in {time.monotonic() - started:.1f} s.")
    return BuiltEnvironment(ref, image_id, digest, env.workdir, built_now=True)


def check_wheels(wheels: Mapping[str, bytes]) -> dict[str, str]:
    """The scripts the wheels would install, each to the wheel that has it, after checking
    that every name pip would make a path of is a plain file name: a member path must stay
    in the wheel, a console or GUI script's name and a .data/scripts file's must be plain.
    EnvironmentBuildError names the wheel and the name otherwise, before anything runs."""
    scripts: dict[str, str] = {}
    for wheel, data in sorted(wheels.items()):
        if not _PLAIN_NAME.match(wheel):
            raise _refused(wheel, f"its file name {wheel!r} is not a plain file name")
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            raise _refused(wheel, "it is not a zip archive") from None
        with archive:
            for member in archive.namelist():
                parts = PurePosixPath(member).parts
                if member.startswith("/") or "\\" in member or "\0" in member or ".." in parts:
                    raise _refused(wheel, f"its member {member!r} is not a relative path in it")
                if len(parts) >= 3 and parts[0].endswith(".data") and parts[1] == "scripts":
                    script = "/".join(parts[2:])
                    # Checked, not offered as the command: the launcher runs Python.
                    _check_script(wheel, script, "data script")
            for member in archive.namelist():
                parts = PurePosixPath(member).parts
                if len(parts) != 2 or parts[1] != "entry_points.txt":
                    continue
                if not parts[0].endswith(".dist-info"):
                    continue
                parser = configparser.ConfigParser(interpolation=None)
                parser.optionxform = str  # type: ignore[assignment,method-assign]
                try:
                    parser.read_string(archive.read(member).decode("utf-8"))
                except (configparser.Error, UnicodeDecodeError) as exc:
                    raise _refused(wheel, f"its {member} cannot be read ({exc})") from None
                for section in ("console_scripts", "gui_scripts"):
                    if parser.has_section(section):
                        for script, _ in parser.items(section):
                            _check_script(wheel, script, section.replace("_", " ")[:-1])
                            scripts[script] = wheel
    return scripts


def _check_script(wheel: str, script: str, kind: str) -> None:
    if not _PLAIN_NAME.match(script):
        raise _refused(
            wheel,
            f"its {kind} {script!r} is not a plain file name (letters, digits and _.+@- "
            f"only, not starting with . or -), so pip would write it outside the agent's "
            f"directory",
        )


def _refused(wheel: str, why: str) -> EnvironmentBuildError:
    return EnvironmentBuildError(
        f"The agent's wheel {wheel} is refused: {why}. Nothing was installed; use a release "
        f"of that package without it, or another agent."
    )


def _build_catalogue(
    builder: EnvironmentBuilder,
    env: BuiltEnvironment,
    python: str,
    files: dict[str, bytes],
    wheels: Mapping[str, bytes],
    ref: str,
    labels: dict[str, str],
    progress: Progress,
) -> str:
    """A catalogue agent's layer, from its recipe (examhall's own Dockerfile)."""
    files = {**files, **{f"wheels/{wheel}": data for wheel, data in wheels.items()}}
    context = BuildContext(files.pop("Dockerfile"), tuple(sorted(files.items())))
    settings = builder.settings
    try:
        return builder.engine.build(
            context.tarball(),
            tag=ref,
            labels=labels,
            buildargs={"SANDBOX": env.digest, "PYTHON": python},
            limits=builder.limits("none"),
            timeout_s=settings.build_timeout_s,
            progress=progress,
            log=BuildLog(),
        )
    except BuildError as exc:
        raise EnvironmentBuildError(
            f"Installing the agent {labels[AGENT_LABEL]} above {env.ref} failed at "
            f"{exc.log.step!r}: {exc.message}\nLast build output:\n{exc.log.tail()}",
            log=exc.log.text(),
            step=exc.log.step,
        ) from exc
    except (ImageBuildError, EngineError) as exc:
        raise EnvironmentBuildError(
            f"Installing the agent {labels[AGENT_LABEL]} failed: {exc}"
        ) from exc


def _install_pip_agent(
    builder: EnvironmentBuilder,
    env: BuiltEnvironment,
    base: Mapping[str, Any],
    python: str,
    prefix: str,
    command: str,
    requirements: list[str],
    wheels: Mapping[str, bytes],
    ref: str,
    labels: dict[str, str],
    agent_env: Mapping[str, str],
) -> str:
    """Install the wheels in a container of `env`, check what it changed, and commit it."""
    engine = builder.engine
    settings = builder.settings
    name = labels[AGENT_LABEL]
    try:
        with engine.scratch(
            env.ref,
            # Passed whole, never written in the image; the commit puts the entrypoint back.
            ["/bin/sh", "-c", _PIP_INSTALL, "install", python, prefix, command, *requirements],
            caps=_caps(builder),
            name=f"examhall-agent-install-{prefix.rsplit('/', 1)[1]}-{uuid.uuid4().hex[:8]}",
            labels={OWNER_LABEL: builder.owner} if builder.owner else {},
        ) as container:
            return _install_and_commit(
                container, base, env, python, prefix, command, wheels, ref, labels,
                agent_env, settings.build_timeout_s,
            )  # fmt: skip
    except EngineTimeout:
        raise EnvironmentBuildError(
            f"Installing the agent {name} ran past {settings.build_timeout_s:g} s and was "
            f"abandoned; raise EXAMHALL_BUILD_TIMEOUT_S or install fewer packages."
        ) from None
    except EngineError as exc:
        raise EnvironmentBuildError(
            f"Installing the agent {name} above {env.ref} failed: the Docker engine failed "
            f"({exc}); check the engine and retry."
        ) from exc


def _install_and_commit(
    container: ScratchContainer,
    base: Mapping[str, Any],
    env: BuiltEnvironment,
    python: str,
    prefix: str,
    command: str,
    wheels: Mapping[str, bytes],
    ref: str,
    labels: dict[str, str],
    agent_env: Mapping[str, str],
    timeout_s: float,
) -> str:
    name = labels[AGENT_LABEL]
    container.put_archive("/", _wheels_tar(prefix, wheels))
    code, log = container.run(timeout_s)
    if code != 0:
        tail = "\n".join(f"    {line}" for line in log.splitlines()[-20:])
        raise EnvironmentBuildError(
            f"Installing the agent {name} above {env.ref} failed (exit {code}):\n{tail}",
            log=log,
        )
    outside = changes_outside(container.changes(), prefix)
    outside += _loose_ancestors(container)
    if outside:
        shown = "\n".join(f"    {line}" for line in outside[:20])
        raise EnvironmentBuildError(
            f"Installing the agent {name} above {env.ref} changed files outside its "
            f"directory {prefix}, so the layer is refused (no image was made):\n{shown}"
            f"\nAn agent's packages may write only their own directory; use a release "
            f"without whatever writes these.",
            log=log,
        )
    container.put_archive("/", _command_launcher(python, prefix, command, agent_env))
    changes = [
        f"ENTRYPOINT {json.dumps(base.get('Entrypoint') or [])}",
        f"CMD {json.dumps(base.get('Cmd') or [])}",
        f"USER {base.get('User') or '0:0'}",
        *(f"LABEL {json.dumps(k)}={json.dumps(v)}" for k, v in labels.items()),
        # A commit keeps the container's labels and cannot drop one: emptied, the install's
        # owner does not reach every trial container of the layer, which a reaper of the
        # build containers of gone planes (capped.reap_capped) would otherwise remove
        # mid-run once the plane that built the layer exits.
        f'LABEL {json.dumps(OWNER_LABEL)}=""',
    ]
    return container.commit(ref, changes)


def changes_outside(diff: list[tuple[str, int]], prefix: str) -> list[str]:
    """What of a container's changes lies outside `prefix`: the prefix's parents may be
    added or changed (they hold it), nothing else may be touched."""
    outside = []
    for path, kind in diff:
        if path == prefix or path.startswith(f"{prefix}/"):
            continue
        if path in _ANCESTORS and kind in (0, 1):
            continue
        outside.append(f"{_DIFF_KINDS.get(kind, kind)} {path}")
    return outside


def _loose_ancestors(container: ScratchContainer) -> list[str]:
    """The prefix's parents that are not plain directories closed to others: one the sandbox
    user could write would let it move /opt/examhall, the worker's code, aside."""
    found = []
    for path in _ANCESTORS:
        mode, why = container.path_mode(path)
        if mode is None:
            found.append(f"unreadable {path} ({why})")
        elif not stat.S_ISDIR(mode) or mode & 0o022:
            found.append(
                f"changed {path} (mode {mode & 0o7777:o}, not a directory only root writes)"
            )
    return found


def _wheels_tar(prefix: str, wheels: Mapping[str, bytes]) -> bytes:
    """The prefix with the wheels to install in it, root's, for put_archive."""
    root = prefix.lstrip("/")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory, mode in ((AGENTS_ROOT.lstrip("/"), 0o755), (root, 0o755)):
            tar.addfile(_entry(directory, tarfile.DIRTYPE, mode))
        tar.addfile(_entry(f"{root}/.wheels", tarfile.DIRTYPE, 0o700))
        for wheel, data in sorted(wheels.items()):
            info = _entry(f"{root}/.wheels/{wheel}", tarfile.REGTYPE, 0o644)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _command_launcher(
    python: str, prefix: str, command: str, agent_env: Mapping[str, str] | None = None
) -> bytes:
    """AGENT_BIN with the one launcher, the agent's command, for put_archive: pip's script for
    it, run by the worker's Python in isolated mode with the agent's packages on its path
    (so no variable carries them to the processes the agent starts). The agent's declared
    env (service/domain/agents.py checked it) is set here, before the agent's code runs, so
    the command needs no wrapper such as `env`, which is no console script of its wheels."""
    lines = [
        f"#!{python} -I",
        f"# examhall: the agent's command {command}, pip's script in {prefix}/bin.",
        "import runpy, sys",
    ]
    if agent_env:
        lines.append(f"import os; os.environ.update({dict(sorted(agent_env.items()))!r})")
    lines += [
        f"sys.path[:0] = [{prefix + '/lib'!r}]",
        f"sys.argv[0] = {AGENT_BIN + '/' + command!r}",
        f"runpy.run_path({prefix + '/bin/' + command!r}, run_name='__main__')",
    ]
    data = ("\n".join(lines) + "\n").encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.addfile(_entry(AGENT_BIN.lstrip("/"), tarfile.DIRTYPE, 0o755))
        info = _entry(f"{AGENT_BIN.lstrip('/')}/{command}", tarfile.REGTYPE, 0o755)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _entry(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid, info.gid = kind, mode, 0, 0
    info.mtime = int(time.time())
    return info


def _caps(builder: EnvironmentBuilder) -> Caps:
    """What installing an agent may use: a build's caps, its whole timeout."""
    settings = builder.settings
    return Caps(
        settings.build_memory,
        settings.build_pids,
        settings.build_cpu_shares,
        settings.build_timeout_s,
        owner=builder.owner,
    )


def _worker_python(ref: str, config: Mapping[str, Any]) -> str:
    """The interpreter the environment's worker runs on (from its image's `config`), which
    the agent shares."""
    entrypoint = config.get("Entrypoint") or []
    if not entrypoint or not str(entrypoint[0]).startswith("/"):
        raise EnvironmentBuildError(
            f"{ref} is not an examhall environment (its entrypoint is {entrypoint}); "
            f"build it with the EnvironmentBuilder first"
        )
    return str(entrypoint[0])

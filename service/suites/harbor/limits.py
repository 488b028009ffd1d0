"""What a Harbor task.toml asks for, mapped onto what one examhall sandbox gives.

Every examhall trial is one hardened container with no network (the relay is its only way
out), an unprivileged agent, and a verifier that runs `tests/test.sh` as root in that same
container after the agent has stopped. A task that needs more than that cannot be run
honestly, so it is refused when the suite is loaded, with the field, the reason and what to
change, instead of running with the feature silently missing.

Mapped:
- [agent].timeout_sec -> agent_timeout_s (None: the job's limits.timeout_s applies);
  [verifier].timeout_sec -> verifier_timeout_s; [environment].build_timeout_sec ->
  build_timeout_s. Each at most MAX_TIMEOUT_S, the job's own cap.
- cpus, memory_mb (or memory = "2G"), storage_mb (or storage) -> cpus, memory_bytes,
  storage_bytes, each within the caps below. storage_bytes sizes the workspace tmpfs; tmpfs
  pages count against the container's memory, so in practice a workspace holds at most
  memory_bytes of it.
- [environment].workdir -> workdir (the agent's workspace, see the environment contract).
- [environment].env, [verifier].env, [solution].env -> literal variables.
- [environment].network_mode, allow_internet and allowed_hosts -> network: what the task
  asks for, resolved as Harbor resolves it (an unset mode is Harbor's default, public). A
  sandbox never reaches a network itself: a task that asks for one runs offline, and the
  job's report says so for each such task (`JobSpec.networks`), so a task Harbor would run
  online and examhall ran offline is visible as such.
- [agent].user naming a user other than root (a name or a uid): the agent runs as that
  user, created in the container when the image lacks it (sandbox/task_user.py).
- [metadata.examhall].verifier = "strict": the strict verifier (no capability, nothing of
  the working directory on sys.path) instead of the one that runs as Harbor's.

Refused: os = "windows"; GPUs and TPUs; an allowed host that is not a host name; an
[agent] or [verifier] network_mode other than no-network; [agent].user root (examhall never
runs the agent as root); [verifier].user other than root (test.sh runs as root); a separate verifier
environment; verifier collect hooks; multi-step tasks; MCP servers; a skills directory; env
values that are ${VAR} host templates; a healthcheck.

Ignored, as harmless: [metadata], [task], source, artifacts (examhall keeps the trial's own
record), and keys Harbor itself does not know.
"""

from __future__ import annotations

import math
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from service.domain.job_spec import MAX_TIMEOUT_S
from service.suites.harbor.task_config import EnvironmentConfig, TaskConfig

MiB = 1024 * 1024
GiB = 1024 * MiB

# examhall's caps for one sandbox. The defaults of service/backends/base.py Resources
# (1 cpu, 1 GiB, a 256 MiB workspace) are what a Python-suite trial gets; a task may ask
# for more, up to these, and the engine must then have room for it.
MAX_CPUS = 64.0
MIN_CPUS = 0.01  # Docker's own minimum NanoCpus step.
MAX_MEMORY_BYTES = 64 * GiB
# Below this the worker itself (a Python interpreter) cannot start.
MIN_MEMORY_BYTES = 64 * MiB
MAX_STORAGE_BYTES = 64 * GiB
MIN_STORAGE_BYTES = 1 * MiB

# Where the sandbox keeps its own things: a workdir there would replace them.
RESERVED_DIRS = ("/tests", "/logs", "/solution", "/opt/examhall", "/proc", "/sys", "/dev")

# Harbor resolves a value that is exactly ${VAR} or ${VAR:-default} from the host it runs on
# (harbor.utils.env.resolve_env_vars); anything else is a literal.
HOST_TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Variables that would change how examhall's own processes (the worker, its Python) behave if
# they reached the container's environment.
WORKER_ENV_PREFIXES = ("LD_", "PYTHON", "EXAMHALL_")


@dataclass(frozen=True)
class TaskLimits:
    """A task's limits in examhall's units. None: examhall's default for that limit."""

    agent_timeout_s: float | None = None
    verifier_timeout_s: float = 600.0
    build_timeout_s: float = 600.0
    cpus: float | None = None
    memory_bytes: int | None = None
    # The workspace tmpfs's size.
    storage_bytes: int | None = None
    # The agent's workspace ([environment].workdir); None: the image's WORKDIR.
    workdir: str | None = None
    # Literal variables. [environment].env is, in Harbor, the container's environment: every
    # process of the task sees it (agent, verifier, solution). [verifier].env is added for
    # tests/test.sh, [solution].env for solution/solve.sh.
    environment_env: dict[str, str] = field(default_factory=dict)
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    # The network the task asks for: "no-network", "public", or "allowlist" of allowed_hosts.
    network: str = "no-network"
    allowed_hosts: tuple[str, ...] = ()
    # [agent].user, never root; None: examhall's sandbox user.
    agent_user: str | None = None
    strict_verifier: bool = False

    @property
    def wanted_network(self) -> str | None:
        """What the task asks for that an offline sandbox does not give, in one line."""
        if self.network == "public":
            return "public"
        if self.network == "allowlist":
            return "allowlist: " + ", ".join(self.allowed_hosts)
        return None


def _is_root(user: str | int) -> bool:
    """root, 0, or a user:group whose user is root or 0."""
    name = str(user).split(":", 1)[0].strip()
    return name in ("root", "0")


def _timeout(problems: list[str], name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0:
        problems.append(f"{name} = {value}: a timeout must be a positive number of seconds")
        return None
    if value > MAX_TIMEOUT_S:
        problems.append(
            f"{name} = {value:g}: examhall's cap is {MAX_TIMEOUT_S:g} s (24 hours); lower it"
        )
        return None
    return float(value)


def _bytes(
    problems: list[str], name: str, megabytes: int | None, low: int, high: int, what: str
) -> int | None:
    if megabytes is None:
        return None
    value = megabytes * MiB
    if value < low:
        problems.append(f"{name} = {megabytes}: {what} must be at least {low // MiB} MB")
        return None
    if value > high:
        problems.append(
            f"{name} = {megabytes}: examhall's cap for {what} is {high // MiB} MB "
            f"({high // GiB} GiB); lower it"
        )
        return None
    return value


def _env(problems: list[str], section: str, env: dict[str, str], *, worker: bool) -> None:
    for name, value in env.items():
        where = f"{section}.{name}"
        if not ENV_NAME.match(name):
            problems.append(
                f"{where}: {name!r} is not a variable name (letters, digits and '_', not "
                "starting with a digit); rename it"
            )
        elif worker and name.startswith(WORKER_ENV_PREFIXES):
            problems.append(
                f"{where}: {name} would reach examhall's worker process and change how it "
                f"runs (names starting with {', '.join(WORKER_ENV_PREFIXES)} are examhall's); "
                "set it in tests/test.sh or solution/solve.sh instead"
            )
        if HOST_TEMPLATE.fullmatch(value):
            problems.append(
                f"{where} = {value!r}: a ${{VAR}} template is read from the host's environment "
                "in Harbor, and a suite must not read the control plane's environment (its "
                "secrets live there); write the value itself, or drop the variable"
            )
        if "\x00" in value or "\x00" in name:
            problems.append(f"{where}: contains a NUL character, which no environment can hold")


_HOST = re.compile(
    r"^(?:\*\.)?(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$"
)


def _network(problems: list[str], environment: EnvironmentConfig) -> tuple[str, tuple[str, ...]]:
    """The network the task asks for (Harbor's resolution), and its allowed hosts."""
    hosts: list[str] = []
    for host in environment.allowed_hosts or ():
        name = str(host).strip().lower()
        if not _HOST.match(name):
            problems.append(
                f"[environment].allowed_hosts: {str(host)[:100]!r} is not a host name; give "
                "names such as pypi.org or *.example.com"
            )
        else:
            hosts.append(name)
    mode = environment.effective_network_mode
    if mode == "allowlist" and not hosts:
        return "no-network", ()  # an allowlist of nothing reaches nothing
    return mode, tuple(hosts) if mode == "allowlist" else ()


def _workdir(problems: list[str], value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if "\x00" in value or "\n" in value or not value.startswith("/"):
        problems.append(f"[environment].workdir = {value!r}: give an absolute path such as /app")
        return None
    if ".." in value.split("/"):
        problems.append(f"[environment].workdir = {value!r}: a path with '..' is ambiguous")
        return None
    path = posixpath.normpath(value)
    path = "/" if path == "//" else path
    for reserved in RESERVED_DIRS:
        if path == reserved or path.startswith(reserved + "/"):
            problems.append(
                f"[environment].workdir = {value!r}: {reserved} is the sandbox's own; "
                "choose another directory such as /app"
            )
            return None
    return path


def map_limits(config: TaskConfig) -> tuple[TaskLimits, list[str]]:
    """The task's limits, and one line per thing in its task.toml examhall cannot honour
    (each `FIELD: why; what to do`). The limits are only meaningful when the list is empty."""
    problems: list[str] = []
    environment = config.environment

    if environment.os != "linux":
        problems.append(
            f"[environment].os = {environment.os!r}: examhall runs Linux containers only"
        )
    if environment.gpus:
        problems.append(
            f"[environment].gpus = {environment.gpus}: examhall sandboxes have no GPUs; "
            "set gpus = 0 or remove it"
        )
    if environment.gpu_types:
        problems.append("[environment].gpu_types: examhall sandboxes have no GPUs; remove it")
    if environment.tpu is not None:
        problems.append("[environment.tpu]: examhall sandboxes have no TPUs; remove it")
    network, allowed_hosts = _network(problems, environment)
    for phase in ("agent", "verifier"):
        section: Any = getattr(config, phase)
        if section.network_mode not in (None, "no-network") or section.allowed_hosts:
            problems.append(
                f"[{phase}].network_mode: examhall's {phase} never reaches the internet; "
                'remove the override or set it to "no-network"'
            )
    if environment.mcp_servers:
        names = ", ".join(server.name for server in environment.mcp_servers)
        problems.append(
            f"[[environment.mcp_servers]] ({names}): examhall runs one container per trial "
            "and connects no MCP server to its agents; remove them"
        )
    if environment.skills_dir is not None:
        problems.append(
            f"[environment].skills_dir = {environment.skills_dir!r}: examhall's agents have no "
            "skills directory to install them into; say in instruction.md where the files "
            "are, and remove skills_dir"
        )
    if environment.healthcheck is not None:
        # examhall replaces the image's entrypoint with its worker, so no service of the
        # image is running for a readiness check to wait on.
        problems.append(
            "[environment.healthcheck]: examhall starts no service of the image (its "
            "entrypoint is replaced by examhall's worker), so there is nothing to wait for; "
            "start what the task needs from instruction.md's setup or the tests, and remove "
            "the healthcheck"
        )
    if environment.docker_image is not None and not environment.docker_image.strip():
        problems.append("[environment].docker_image: is empty; name an image or remove it")
    elif environment.docker_image is not None and any(
        ch.isspace() or not ch.isprintable() for ch in environment.docker_image
    ):
        # It becomes an environment's FROM line (service/suites/harbor/suite.py): a line break would
        # add instructions of its own. The reference's grammar and whose image it names are
        # checked where that FROM is resolved, as any Dockerfile's are.
        problems.append(
            f"[environment].docker_image = {environment.docker_image[:80]!r}: holds whitespace "
            "or a control character, which no image reference does; name one image such as "
            "debian:bookworm-slim"
        )

    if config.agent.user is not None and _is_root(config.agent.user):
        problems.append(
            f"[agent].user = {config.agent.user!r}: examhall never runs the agent as root; "
            "remove it (the agent runs as an unprivileged user) and do what needs root in "
            "environment/Dockerfile"
        )
    verifier = config.verifier
    if verifier.user is not None and not _is_root(verifier.user):
        problems.append(
            f"[verifier].user = {verifier.user!r}: examhall runs tests/test.sh as root (as "
            "Harbor does by default); remove it, or drop privileges inside test.sh"
        )
    if verifier.environment_mode == "separate" or verifier.environment is not None:
        problems.append(
            "[verifier].environment_mode: examhall runs the verifier in the agent's own "
            'container (Harbor\'s "shared" mode); a separate verifier environment is not '
            "supported, remove it"
        )
    if verifier.collect:
        problems.append(
            "[[verifier.collect]]: collect hooks run in compose services, and examhall runs "
            "one container per trial; do the collecting in tests/test.sh"
        )
    if config.steps:
        problems.append(
            f"[[steps]] ({len(config.steps)} steps): examhall runs single-step tasks only; "
            "split the steps into tasks of their own"
        )

    _env(problems, "[environment.env]", environment.env, worker=True)
    _env(problems, "[verifier.env]", verifier.env, worker=False)
    _env(problems, "[solution.env]", config.solution.env, worker=False)

    cpus = environment.cpus
    if cpus is not None and not MIN_CPUS <= cpus <= MAX_CPUS:
        problems.append(
            f"[environment].cpus = {cpus:g}: examhall gives a sandbox between {MIN_CPUS:g} and "
            f"{MAX_CPUS:g} cpus; choose a value in that range"
        )
        cpus = None
    limits = TaskLimits(
        agent_timeout_s=_timeout(problems, "[agent].timeout_sec", config.agent.timeout_sec),
        verifier_timeout_s=_timeout(problems, "[verifier].timeout_sec", verifier.timeout_sec)
        or 600.0,
        build_timeout_s=_timeout(
            problems, "[environment].build_timeout_sec", environment.build_timeout_sec
        )
        or 600.0,
        cpus=float(cpus) if cpus is not None else None,
        memory_bytes=_bytes(
            problems,
            "[environment].memory_mb",
            environment.memory_mb,
            MIN_MEMORY_BYTES,
            MAX_MEMORY_BYTES,
            "memory",
        ),
        storage_bytes=_bytes(
            problems,
            "[environment].storage_mb",
            environment.storage_mb,
            MIN_STORAGE_BYTES,
            MAX_STORAGE_BYTES,
            "storage",
        ),
        workdir=_workdir(problems, environment.workdir),
        environment_env=dict(environment.env),
        verifier_env=dict(verifier.env),
        solution_env=dict(config.solution.env),
        network=network,
        allowed_hosts=allowed_hosts,
        agent_user=_agent_user(problems, config.agent.user),
        strict_verifier=_strict_verifier(problems, config.metadata),
    )
    return limits, problems


_USER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")


def _agent_user(problems: list[str], user: str | int | None) -> str | None:
    """[agent].user as the supervisor takes it: a user name or a uid (a group after `:` is
    the user's own here); root was refused above."""
    if user is None or _is_root(user):
        return None
    name = str(user).split(":", 1)[0].strip()
    if not (name.isdigit() or _USER_NAME.match(name)):
        problems.append(
            f"[agent].user = {str(user)[:40]!r}: not a user name (a letter or _, then letters, "
            "digits, _ . -, at most 32) nor a uid; name the user the agent should run as"
        )
        return None
    return name


def _strict_verifier(problems: list[str], metadata: dict[str, Any]) -> bool:
    ours = metadata.get("examhall")
    if not isinstance(ours, dict) or "verifier" not in ours:
        return False
    if ours["verifier"] not in ("strict", "harbor"):
        problems.append(
            f'[metadata.examhall].verifier = {str(ours["verifier"])[:40]!r}: give "strict" '
            'for a verifier with no capability, or "harbor" (the default) for one as Harbor\'s'
        )
        return False
    return bool(ours["verifier"] == "strict")

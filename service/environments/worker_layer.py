"""examhall's worker layered onto a task's image, so the exam hall's guarantees hold in it.

The final image starts `python3 -P -S -m sandbox.worker` as root (whatever USER the task set),
with the sandbox package root-owned, compiled and unwritable at /opt/examhall/sandbox. When
the task image has no python3 >= 3.11 with the modules the worker imports, the sandbox
image's own Python is bundled in (bundle_python.py) and started through its own glibc
loader, so it runs whatever the image's libc. The task's working directory becomes the
agent's workspace: its content is the seed at /opt/examhall/seed, and the directory a
symlink to /workspace. Images the worker cannot run on, or whose configuration would reach
into the worker, are refused with a message that says why.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
import sys
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from service.environments.errors import EnvironmentProblem
from service.images.capped import CappedRunError, Caps
from service.images.engine import EngineError, ImageEngine
from service.images.sandbox_image import BuildContext, fields_digest, repo_root

# Bump when the layer's recipe changes in a way its files do not show; it is in every
# environment's content hash, so a bump rebuilds them all.
RECIPE_VERSION = "3"

WORKDIR_LABEL = "examhall.workdir"
PROBE_LABEL = "examhall.environment-probe"
RUNTIME_PYTHON = "/opt/examhall/python/bin/python3"
SEED_DIR = "/opt/examhall/seed"
WORKSPACE = "/workspace"
# Our own; the task image may set them, we set them again.
OUR_VARIABLES = frozenset({"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONPATH", "LANG"})
# What Python or the loader reads at the start of the worker: PYTHONxxx (no underscore) and
# the PYTHON_xxx ones CPython reads; the official python images' PYTHON_VERSION, _SHA256 and
# the like are not among them.
_WORKER_VARIABLE = re.compile(
    r"^(LD_\w*|PYTHON[A-Z0-9]+|PYTHON_(GIL|CPU_COUNT|COLORS|BASIC_REPL|HISTORY|PERF_JIT_SUPPORT"
    r"|PRESITE|JIT|FROZEN_MODULES|TLBC|DISABLE_REMOTE_DEBUG|THREAD_INHERIT_CONTEXT"
    r"|CONTEXT_AWARE_WARNINGS))$"
)


def reaches_worker(name: str) -> bool:
    """Whether an image's variable `name` would reach the worker's own process (its Python
    or its loader) rather than only the task's: the one list of them."""
    return bool(_WORKER_VARIABLE.match(name)) and name not in OUR_VARIABLES


# A working directory that would take the system (or examhall's own paths) with it when it is
# replaced by the workspace symlink.
_SYSTEM_DIRS = frozenset(
    {
        "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
        "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp",
        "/usr", "/var", "/tests", "/logs", "/solution",
    }
)  # fmt: skip
_IGNORED_WORKDIRS = frozenset({"", "/", WORKSPACE})

_HERE = Path(__file__).resolve().parent
_BUNDLE_SCRIPT = "bundle_python.py"
_SETUP_SCRIPT = "examhall-setup.sh"
_RUNTIME_STAGE = "examhall-python"

# Run in the final image as root, with the worker's interpreter and the working directory
# to seed ("" for none) as its arguments.
_SETUP = r"""set -eu
python="$1"
workdir="$2"
# The worker's code: compiled by the interpreter that runs it (nothing may write bytecode at
# run time), root-owned and unwritable by anyone else, so an agent cannot patch its harness.
"$python" -I -m compileall -q /opt/examhall/sandbox /opt/examhall/examhall
chown -R 0:0 /opt/examhall
chmod -R a+rX,go-w /opt/examhall
chmod go-w /opt
# Mount points of the trial's tmpfs: empty, root's.
for dir in /tests /logs /solution; do
  rm -rf "$dir"
  mkdir -m 0755 "$dir"
done
if [ ! -d /workspace ] || [ -L /workspace ]; then
  rm -rf /workspace
  mkdir -m 0755 /workspace
fi
if [ -n "$workdir" ]; then
  mkdir -p /opt/examhall/seed
  if [ -d "$workdir" ]; then
    cp -a "$workdir/." /opt/examhall/seed/
  fi
  # The working directory is the trial's workspace itself: its tmpfs is mounted there,
  # through /workspace, which links to it (the engine follows a link in the container's
  # root to place a mount), so the task's tools see its own path and no link.
  rm -rf "$workdir"
  mkdir -p -m 0755 "$workdir"
  rm -rf /workspace
  ln -s "$workdir" /workspace
  # Where the task's agent and verifier start (sandbox/workspace.py task_workdir).
  printf '%s\n' "$workdir" > /opt/examhall/workdir
  chown 0:0 /opt/examhall/seed
  # The worker copies it in as the sandbox user: a file it could not read would end every
  # trial as the sandbox's fault.
  chmod -R a+rX /opt/examhall/seed
fi
cd /
"$python" -P -c "import sandbox.worker"
rm -f /tmp/examhall-setup.sh
"""

# Run in the task image as root, with no network: the facts the layer's recipe depends on.
_PROBE = """for f in /lib/ld-musl-* /usr/lib/ld-musl-* /lib64/ld-musl-*; do
  if [ -e "$f" ]; then echo "musl=$f"; fi
done
p=$(command -v python3 2>/dev/null) || p=""
if [ -n "$p" ]; then
  echo "python=$p"
  if "$p" -I -c "import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)" 2>/dev/null \
     && "$p" -I -c "import $MODULES" 2>/dev/null; then
    echo "python-ok=1"
  fi
fi
exit 0
"""


@dataclass(frozen=True)
class TaskImage:
    image_id: str
    python: str | None  # the image's python3 if the worker can run on it
    workdir: str | None  # the directory to seed the workspace from


def recipe_fingerprint() -> bytes:
    """What the layer is made of besides the task image and the sandbox image."""
    return fields_digest(
        [
            ("version", RECIPE_VERSION.encode()),
            ("setup", _SETUP.encode()),
            ("probe", _PROBE.encode()),
            ("bundle", (_HERE / _BUNDLE_SCRIPT).read_bytes()),
            ("dockerfile", layer_dockerfile("TASK", "SANDBOX", None, None).encode()),
        ]
    ).encode()


def check_image(
    engine: ImageEngine,
    image_id: str,
    *,
    workdir: str | None,
    caps: Caps,
    cancel: threading.Event | None = None,
) -> TaskImage:
    """The facts of the built task image the layer needs, or the refusal it earns."""
    image = engine.image(image_id)
    if image is None:
        raise EnvironmentProblem(f"the built image {image_id} is gone; build it again")
    config = image.config
    arch, engine_arch = image.architecture, engine.architecture()
    if image.os != "linux" or (arch and engine_arch and arch != engine_arch):
        raise EnvironmentProblem(
            f"the image is for {image.os}/{arch}, and this engine runs "
            f"linux/{engine_arch}: examhall's worker cannot run on it; build it FROM an "
            f"image of linux/{engine_arch}"
        )
    if config.get("OnBuild"):
        raise EnvironmentProblem(
            f"the image has ONBUILD triggers ({'; '.join(config['OnBuild'])[:200]}), which "
            "would run in examhall's own layer after these checks; remove them"
        )
    volumes = sorted((config.get("Volumes") or {}).keys())
    if volumes:
        raise EnvironmentProblem(
            f"the image declares VOLUME {', '.join(volumes)}: a trial's container gets no "
            f"volume, so remove the VOLUME instruction (from the Dockerfile, or its base's)"
        )
    reaching = sorted(
        name
        for name in (entry.partition("=")[0] for entry in config.get("Env") or [])
        if reaches_worker(name)
    )
    if reaching:
        raise EnvironmentProblem(
            f"the image sets {', '.join(reaching)}, which would reach examhall's worker (its "
            f"Python or its loader); remove it from the image's ENV (an agent command can "
            f"set it for itself)"
        )
    facts = _probe(engine, image_id, caps, cancel)
    if facts.get("musl"):
        raise EnvironmentProblem(
            f"the image is musl-based ({facts['musl']}, as Alpine is): examhall's worker runs "
            f"on glibc images only (Debian, Ubuntu, python:*); build it FROM one of those"
        )
    python = facts.get("python") if facts.get("python-ok") else None
    return TaskImage(image_id, python, seed_workdir(workdir or config.get("WorkingDir")))


def seed_workdir(workdir: str | None) -> str | None:
    """The working directory to make the workspace, or None when there is none to seed."""
    if workdir is None or workdir.rstrip("/") in _IGNORED_WORKDIRS:
        return None
    normal = posixpath.normpath(workdir)
    if not normal.startswith("/") or normal.startswith("//"):
        raise EnvironmentProblem(f"the working directory {workdir!r} is not an absolute path")
    top = "/" + normal.split("/")[1]
    if (
        normal in _SYSTEM_DIRS
        or normal.startswith(WORKSPACE + "/")
        or normal.startswith("/opt/examhall")
        or top in ("/proc", "/sys", "/dev", "/tmp", "/tests", "/logs", "/solution")
    ):
        raise EnvironmentProblem(
            f"the working directory {normal} cannot become the agent's workspace (it is a "
            f"system directory or one of examhall's); use a directory of its own such as /app"
        )
    return normal


def layer_dockerfile(task_image: str, sandbox: str, python: str | None, workdir: str | None) -> str:
    """The worker layer's Dockerfile; `python` is the image's own, None for the bundled one."""
    runtime = python is None
    lines: list[str] = []
    if runtime:
        lines += [
            f"FROM {sandbox} AS {_RUNTIME_STAGE}",
            f"COPY {_BUNDLE_SCRIPT} /tmp/{_BUNDLE_SCRIPT}",
            f'RUN ["python3", "-I", "/tmp/{_BUNDLE_SCRIPT}", "/opt/examhall/python"]',
        ]
    interpreter = python or RUNTIME_PYTHON
    lines += [
        f"FROM {task_image}",
        # First, so that the steps below run as root; and nothing below changes it, so the
        # worker starts as root whatever USER the task's image set.
        "USER 0:0",
        f"COPY --from={sandbox} /opt/examhall/sandbox /opt/examhall/sandbox",
        # What suites import (service/images/sandbox_image.py's SUITE_API).
        f"COPY --from={sandbox} /opt/examhall/examhall /opt/examhall/examhall",
    ]
    if runtime:
        lines.append(f"COPY --from={_RUNTIME_STAGE} /opt/examhall/python /opt/examhall/python")
    lines += [
        "ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/opt/examhall LANG=C.UTF-8",
        f"COPY {_SETUP_SCRIPT} /tmp/{_SETUP_SCRIPT}",
        # Exec form: a SHELL instruction of the task's cannot change how these run.
        f"RUN {json.dumps(['/bin/sh', f'/tmp/{_SETUP_SCRIPT}', interpreter, workdir or ''])}",
        f"WORKDIR {WORKSPACE}",
        # -P: the working directory (the agent's to write) must never be on sys.path; -S:
        # nor may what the task's site-packages add to it (a .pth naming the workspace, as
        # an editable install of the task's code writes). The worker is stdlib-only.
        f"ENTRYPOINT {json.dumps([interpreter, '-P', '-S', '-m', 'sandbox.worker'])}",
        "CMD []",
        "HEALTHCHECK NONE",
        "STOPSIGNAL SIGTERM",
        "USER 0:0",
    ]
    return "\n".join(lines) + "\n"


def layer_context(task: TaskImage, sandbox: str) -> BuildContext:
    dockerfile = layer_dockerfile(task.image_id, sandbox, task.python, task.workdir)
    files: list[tuple[str, bytes]] = [(_SETUP_SCRIPT, _SETUP.encode())]
    if task.python is None:
        files.append((_BUNDLE_SCRIPT, (_HERE / _BUNDLE_SCRIPT).read_bytes()))
    return BuildContext(dockerfile.encode(), tuple(files))


# CPython 3.11's ast.parse is not thread-safe: two at once can fail with "AST constructor
# recursion depth mismatch" (a SystemError), and a job's environments are built side by side.
_parsing = threading.Lock()


def worker_modules() -> tuple[str, ...]:
    """The standard library's top-level modules the sandbox package imports: a Python that
    lacks one (a distribution's trimmed python3) cannot run the worker."""
    with _parsing:
        return _worker_modules()


@cache
def _worker_modules() -> tuple[str, ...]:
    found: set[str] = set()
    for path in sorted((repo_root() / "sandbox").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return tuple(sorted(found & sys.stdlib_module_names - {"__future__"}))


def _probe(
    engine: ImageEngine, image_id: str, caps: Caps, cancel: threading.Event | None
) -> dict[str, str]:
    script = _PROBE.replace("$MODULES", ", ".join(worker_modules()))
    try:
        ran = engine.run_capped(
            image_id, ["/bin/sh", "-c", script], caps, labels={PROBE_LABEL: "1"}, cancel=cancel
        )
    except CappedRunError as exc:
        raise EnvironmentProblem(f"probing the image failed: {exc}") from exc
    except EngineError as exc:
        if "/bin/sh" in str(exc) and "no such file" in str(exc).lower():
            raise EnvironmentProblem(
                "the image has no /bin/sh; examhall's worker and its tools need a shell, "
                "so build it FROM an image that has one (not scratch or distroless)"
            ) from exc
        raise
    output = ran.output
    if ran.status != 0:
        raise EnvironmentProblem(f"probing the image failed (exit {ran.status}): {output[-500:]}")
    facts: dict[str, str] = {}
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            facts.setdefault(key.strip(), value.strip())
    return facts

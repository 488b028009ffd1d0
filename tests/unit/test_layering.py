"""Which package may import which, read from the source (every `import x` and
`from x import y`, relative ones resolved, inside functions too). From the bottom up:

- sandbox runs inside the trial's container with only the standard library: it imports
  nothing of service and no third-party package;
- service.domain (the job, its outcomes, its plan) imports nothing above it: no store,
  report, backend, scheduler, launcher, environment builder, suite format, API, web or CLI;
- service.suites, the suite formats, is pure: files and bytes in, cases and tasks out; it
  reads no store, runs no sandbox and answers no HTTP (no store, report, backend, scheduler,
  launcher, gateway, API, web or CLI); service.suite_resolver reads suites through the
  store for the API and the scheduler, and nothing below them imports it;
- service.store never imports service.report, service.api or service.web;
- service.report never imports service.api or service.web;
- service.backends never imports service.domain, service.api or service.web;
- service.images (building on the engine) knows nothing of jobs, the store, the backends
  that run its images, the environments built with it, the API or the web; and it is the
  only door to the engine for what builds: service.environments and service.scheduler
  reach it through service.images.engine's ImageEngine, never a Docker client;
- service.api never imports service.web;
- service.app, the composition root, sits on top and is imported by the CLI alone;
- examhall, the library, is a client of the API: it reads the API's models but never
  imports the CLI, the composition root, the web UI or what runs jobs; of the control plane
  only service.cli imports it (the CLI's client commands are built on it);
- examhall.suite, what suites import inside the exam hall, imports only sandbox, and
  importing it loads nothing outside the standard library (examhall/__init__.py loads the
  client's names lazily).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package.replace(".", "/")).rglob("*.py"))


def imports(path: Path, source: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, module) for every module `path` (or `source`, as if it were there) imports.
    `from a import b` yields a and a.b (b may be a module); a relative import is resolved
    against `path`'s package."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    text = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                parent = ".".join([*base, node.module] if node.module else base)
            else:
                parent = node.module or ""
            yield node.lineno, parent
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{parent}.{alias.name}"


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def violations(packages: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for package in packages:
        for path in modules(package):
            for line, module in imports(path):
                if any(within(module, bad) for bad in forbidden):
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return sorted(set(found))


def test_the_walk_sees_every_kind_of_import() -> None:
    """The checker itself: import, from-import, relative (one and two levels), and an
    import inside a function."""
    source = (
        "import service.app\n"
        "from service import web\n"
        "from ..api import auth\n"
        "from . import models\n"
        "def later():\n"
        "    from .. import api\n"
    )
    seen = set(imports(ROOT / "service" / "store" / "probe.py", source))
    assert {
        (1, "service.app"),
        (2, "service.web"),
        (3, "service.api.auth"),
        (4, "service.store.models"),
        (6, "service.api"),
    } <= seen
    package_init = set(imports(ROOT / "service" / "store" / "__init__.py", "from .db import x\n"))
    assert (1, "service.store.db") in package_init


def test_the_sandbox_imports_only_the_standard_library_and_itself() -> None:
    found = []
    for path in modules("sandbox"):
        for line, module in imports(path):
            top = module.partition(".")[0]
            # The verifier's sitecustomize hands over to the image's own, by the name Python's
            # site module imports it by: no package of examhall's choosing.
            chained = (path.name, module) == ("sitecustomize.py", "sitecustomize")
            if top != "sandbox" and top not in sys.stdlib_module_names and not chained:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert found == [], "the sandbox runs stdlib-only in the trial's container"


ABOVE_THE_DOMAIN = (
    "service.store",
    "service.report",
    "service.backends",
    "service.scheduler",
    "service.launch",
    "service.environments",
    "service.review",
    "service.gateway",
    "service.suites",
    "service.suite_resolver",
    "service.api",
    "service.web",
    "service.cli",
    "service.app",
)


def test_the_domain_imports_nothing_above_it() -> None:
    found = violations(("service.domain",), ABOVE_THE_DOMAIN)
    assert found == [], "service.domain is the bottom of the control plane"


# The formats sit just above the domain: they describe environments (service.environments'
# sources), and everything else above the domain is above them too.
ABOVE_THE_FORMATS = tuple(
    package
    for package in ABOVE_THE_DOMAIN
    if package not in ("service.environments", "service.suites")
)


def test_the_suite_formats_are_pure() -> None:
    found = violations(("service.suites",), ABOVE_THE_FORMATS)
    assert found == [], "service.suites reads files; the store and sandboxes are above it"


def test_only_the_api_and_the_scheduler_resolve_suites_through_the_store() -> None:
    below = ("service.domain", "service.store", "service.suites", "service.environments")
    found = violations(below, ("service.suite_resolver",))
    assert found == [], "service.suite_resolver sits above the formats and the store"


def test_the_store_knows_nothing_of_reports_the_api_or_the_web() -> None:
    found = violations(("service.store",), ("service.report", "service.api", "service.web"))
    assert found == [], "service.store may not import service.report/.api/.web"


def test_the_report_knows_nothing_of_the_api_or_the_web() -> None:
    found = violations(("service.report",), ("service.api", "service.web", "service.app"))
    assert found == [], "service.report may not import service.api/.web"


def test_backends_know_nothing_of_the_domain_the_api_or_the_web() -> None:
    found = violations(
        ("service.backends",), ("service.domain", "service.api", "service.web", "service.app")
    )
    assert found == [], "a backend runs sandboxes; what a job means is not its business"


def test_image_building_knows_nothing_of_what_runs_its_images() -> None:
    found = violations(
        ("service.images",),
        (
            "service.domain",
            "service.store",
            "service.backends",
            "service.environments",
            "service.scheduler",
            "service.api",
            "service.web",
            "service.app",
        ),
    )
    assert found == [], "service.images builds; the backends and environments use it"


def test_environments_and_the_scheduler_build_without_a_docker_client() -> None:
    found = violations(
        ("service.environments", "service.scheduler"),
        ("docker", "requests", "service.images.docker_engine", "service.backends.docker"),
    )
    assert found == [], "they build through ImageEngine (service/images/engine.py)"


def test_the_api_knows_nothing_of_the_web() -> None:
    found = violations(("service.api",), ("service.web", "service.app"))
    assert found == [], "service.app mounts the web UI beside the API"


def service_packages_but_the_cli() -> tuple[str, ...]:
    return tuple(
        f"service.{path.name}"
        for path in (ROOT / "service").iterdir()
        if path.is_dir() and (path / "__init__.py").exists() and path.name != "cli"
    )


def test_only_the_cli_imports_the_composition_root() -> None:
    found = violations(service_packages_but_the_cli(), ("service.app",))
    assert found == [], "service.app assembles the layers; nothing below may reach it"


def test_a_new_arrow_up_the_layers_is_caught() -> None:
    """The rules above catch what they name: an import the domain may not make, placed in a
    module of the domain, is reported with its line."""
    probe = ROOT / "service" / "domain" / "probe.py"
    source = "from service.report.model import Report\n"
    seen = [module for _, module in imports(probe, source)]
    assert any(within(module, bad) for module in seen for bad in ABOVE_THE_DOMAIN)


def test_the_library_is_a_client_of_the_api() -> None:
    found = violations(
        ("examhall",),
        (
            "service.cli",
            "service.app",
            "service.web",
            "service.store",
            "service.scheduler",
            "service.launch",
            "service.backends",
            "service.images",
            "service.environments",
        ),
    )
    assert found == [], "examhall talks to a control plane over HTTP; it runs none of it"


def test_of_the_control_plane_only_the_cli_imports_the_library() -> None:
    found = violations(service_packages_but_the_cli(), ("examhall",))
    assert found == [], "the control plane does not call itself through its client"


def test_the_suite_api_imports_only_the_sandbox() -> None:
    found = [
        f"examhall/suite.py:{line} imports {module}"
        for line, module in imports(ROOT / "examhall" / "suite.py")
        if module.partition(".")[0] not in ("sandbox", "__future__")
    ]
    assert found == [], "suites import examhall.suite inside the exam hall, beside sandbox alone"


def test_importing_the_suite_api_loads_only_the_standard_library() -> None:
    """As in the exam hall: no site-packages (-S), only the repository on the path. The
    package's __init__ must not load the client (httpx, pydantic, service) on the way."""
    probe = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from examhall.suite import Case, judges, tool_called\n"
        "outside = sorted({m.partition('.')[0] for m in sys.modules}\n"
        "    - set(sys.stdlib_module_names) - {'sandbox', 'examhall', '__main__'})\n"
        "print(outside)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

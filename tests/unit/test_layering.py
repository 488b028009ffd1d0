"""Which package may import which, read from the source (every `import x` and
`from x import y`, relative ones resolved, inside functions too):

- sandbox runs inside the trial's container with only the standard library: it imports
  nothing of service and no third-party package;
- service.store and service.report never import service.api or service.web;
- service.domain never imports service.api.
"""

from __future__ import annotations

import ast
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
        "import service.api.app\n"
        "from service import web\n"
        "from ..api import auth\n"
        "from . import models\n"
        "def later():\n"
        "    from .. import api\n"
    )
    seen = set(imports(ROOT / "service" / "store" / "probe.py", source))
    assert {
        (1, "service.api.app"),
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
            if top != "sandbox" and top not in sys.stdlib_module_names:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert found == [], "the sandbox runs stdlib-only in the trial's container"


def test_the_store_and_the_report_know_nothing_of_the_api_or_the_web() -> None:
    found = violations(("service.store", "service.report"), ("service.api", "service.web"))
    assert found == [], "service.store and service.report may not import service.api/.web"


def test_the_domain_knows_nothing_of_the_api() -> None:
    found = violations(("service.domain",), ("service.api",))
    assert found == [], "service.domain may not import service.api"

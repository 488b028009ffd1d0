"""service.settings: one typed object for every EXAMHALL_* setting, the table of
them, and how a value is read (fresh from the environment, a bad one named)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from service.settings import (
    FRONT_FIELDS,
    ConfigError,
    Settings,
    env_name,
    front_settings,
    get_settings,
    max_containers,
)

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\|(?P<cells>.*)\|\s*$")
BACKTICKED = re.compile(r"`([^`]*)`")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from no EXAMHALL_* setting of the developer's."""
    import os

    for name in list(os.environ):
        if name.startswith("EXAMHALL_"):
            monkeypatch.delenv(name)


def readme_settings() -> dict[str, str]:
    """The settings table of docs/getting-started.md: variable -> its default cell."""
    lines = (ROOT / "docs" / "getting-started.md").read_text().splitlines()
    header = lines.index("| setting | default | meaning |")
    assert set(lines[header + 1].replace(" ", "")) <= set("|-"), lines[header + 1]
    rows: dict[str, str] = {}
    for line in lines[header + 2 :]:
        match = ROW.match(line)
        if match is None:
            break
        variable, default, meaning = (cell.strip() for cell in match["cells"].split(" | ", 2))
        names = BACKTICKED.findall(variable)
        assert len(names) == 1 and variable == f"`{names[0]}`", f"one variable a row: {line}"
        assert names[0] not in rows, f"{names[0]} is in the settings table twice"
        assert default and meaning, f"a row without a default or a meaning: {line}"
        rows[names[0]] = default
    return rows


def test_the_readme_table_names_exactly_the_settings() -> None:
    documented = set(readme_settings())
    fields = {env_name(name) for name in Settings.model_fields}
    assert documented - fields == set(), "in the settings table, not a field of Settings"
    assert fields - documented == set(), "a field of Settings the settings table leaves out"


def test_the_readme_table_shows_each_literal_default() -> None:
    """A setting whose default is a value shows it (backticked, as it would be set); one
    whose default is worked out (None, or a factory) says how in words."""
    for variable, cell in readme_settings().items():
        name = variable.removeprefix("EXAMHALL_").lower()
        field = Settings.model_fields[name]
        if field.default_factory is not None or field.default is None:
            continue
        shown = BACKTICKED.findall(cell)
        assert shown, f"{variable}: the settings table shows no default; it is {field.default!r}"
        # Read as the environment would give it, the shown default is the field's.
        assert getattr(Settings(**{name: shown[0]}), name) == field.default, variable


def test_every_field_says_what_it_is() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description, f"Settings.{name} has no description"


def test_settings_are_read_from_the_environment_at_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert get_settings().server == "http://127.0.0.1:8000"
    monkeypatch.setenv("EXAMHALL_SERVER", "http://box:8000")
    monkeypatch.setenv("EXAMHALL_MAX_CONTAINERS", "3")
    monkeypatch.setenv("EXAMHALL_COOKIE_SECURE", "true")
    settings = get_settings()
    assert (settings.server, settings.max_containers, settings.cookie_secure) == (
        "http://box:8000",
        3,
        True,
    )
    monkeypatch.delenv("EXAMHALL_MAX_CONTAINERS")
    assert get_settings().max_containers == Settings.model_fields["max_containers"].get_default(
        call_default_factory=True
    )


def test_empty_is_unset_and_blank_is_unset_where_a_setting_is_read_stripped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXAMHALL_DATABASE_URL", "")
    monkeypatch.setenv("EXAMHALL_MAX_CONTAINERS", "  ")
    monkeypatch.setenv("EXAMHALL_SANDBOX_BASE", " debian:trixie \n")
    monkeypatch.setenv("EXAMHALL_DEBIAN_SUITE", " ")
    settings = get_settings()
    assert settings.database_url == "sqlite:///examhall.db"
    assert "database_url" not in settings.model_fields_set
    assert settings.max_containers >= 1
    assert settings.sandbox_base == "debian:trixie"
    assert settings.debian_suite is None


def test_only_capitals_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("examhall_server", "http://lower:1")
    assert get_settings().server == "http://127.0.0.1:8000"


@pytest.mark.parametrize("value", ["0", "-3", "abc", "2.5"])
def test_a_bad_max_containers_names_the_variable_and_what_to_do(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("EXAMHALL_MAX_CONTAINERS", value)
    with pytest.raises(ConfigError) as raised:
        max_containers()
    message = str(raised.value)
    assert message.startswith(f"EXAMHALL_MAX_CONTAINERS={value!r} is not a positive integer;")
    assert "or unset it for the default" in message


def test_a_bad_value_stops_only_what_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """As when each setting was read where it was used: `examhall submit` does not fail
    over a bad EXAMHALL_MAX_CONTAINERS it never reads."""
    monkeypatch.setenv("EXAMHALL_MAX_CONTAINERS", "many")
    monkeypatch.setenv("EXAMHALL_SESSION_TTL_S", "5")
    monkeypatch.setenv("EXAMHALL_SERVER", "http://box:8000")
    settings = get_settings()
    assert settings.server == "http://box:8000"
    assert settings.max_variants == 8
    assert settings.model_fields_set == {"server"}
    with pytest.raises(ConfigError, match="EXAMHALL_MAX_CONTAINERS='many'"):
        _ = settings.max_containers
    with pytest.raises(ConfigError, match="EXAMHALL_SESSION_TTL_S"):
        _ = settings.session_ttl_s
    with pytest.raises(AttributeError):
        _ = settings.no_such_setting  # type: ignore[attr-defined]
    settings.checked("server", "max_variants")
    with pytest.raises(ConfigError, match="EXAMHALL_MAX_CONTAINERS"):
        settings.checked()


def test_the_front_doors_settings_are_checked_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMHALL_LIST_TIMEOUT_S", "0")
    monkeypatch.setenv("EXAMHALL_COOKIE_SECURE", "maybe")
    monkeypatch.setenv("EXAMHALL_MAX_CONTAINERS", "none")  # not the front door's
    with pytest.raises(ConfigError) as raised:
        front_settings()
    assert str(raised.value) == (
        "Invalid setting: EXAMHALL_LIST_TIMEOUT_S: Input should be greater than 0; "
        "EXAMHALL_COOKIE_SECURE: Input should be a valid boolean, unable to interpret input."
    )
    assert set(FRONT_FIELDS) <= set(Settings.model_fields)


def test_no_module_of_the_service_reads_an_examhall_variable_itself() -> None:
    """Every EXAMHALL_* read goes through service.settings: elsewhere in service/, no
    os.environ / os.getenv look-up names one (as a literal, or a module-level constant)."""
    offenders = []
    for path in sorted((ROOT / "service").rglob("*.py")):
        if path == ROOT / "service" / "settings.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for target in node.targets
            if isinstance(target, ast.Name) and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            key: ast.expr | None = None
            if isinstance(node, ast.Call) and node.args:
                function = ast.unparse(node.func)
                if function in ("os.environ.get", "os.getenv", "os.environ.pop", "environ.get"):
                    key = node.args[0]
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
                key = node.slice
            if key is None:
                continue
            if isinstance(key, ast.Constant):
                name = key.value
            elif isinstance(key, ast.Name):
                name = constants.get(key.id, "")
            else:
                name = ""
            if isinstance(name, str) and name.startswith("EXAMHALL_"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert offenders == [], "read them through service.settings.get_settings()"

"""sandbox/dataclass_code.py: the dataclasses' methods compiled at the image's build are the
methods `dataclasses` would have compiled, and the worker's start compiles none of its own.
Each case runs in a fresh interpreter, as the image's build and a trial's start do."""

from __future__ import annotations

from pathlib import Path

from tests.fresh_python import run_fresh

# Every method of every dataclass of the start's modules, as compiled code and annotations.
_METHODS = (
    "import dataclasses, sys\n"
    "def methods():\n"
    "    out = {}\n"
    "    for name, module in sorted(sys.modules.items()):\n"
    "        if not name.startswith('sandbox.'):\n"
    "            continue\n"
    "        for cls in list(vars(module).values()):\n"
    "            if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):\n"
    "                continue\n"
    "            for key, fn in sorted(vars(cls).items()):\n"
    "                code = getattr(fn, '__code__', None)\n"
    "                if code is not None and code.co_filename == '<string>':\n"
    "                    out[f'{cls.__module__}.{cls.__qualname__}.{key}'] = [\n"
    "                        code.co_code.hex(), repr(code.co_consts), repr(code.co_names),\n"
    "                        code.co_firstlineno, repr(fn.__annotations__),\n"
    "                        repr(fn.__defaults__), repr(fn.__kwdefaults__)]\n"
    "    return out\n"
)


def _write(store: Path) -> int:
    got = run_fresh(
        "import json\n"
        "from pathlib import Path\n"
        "from sandbox import dataclass_code\n"
        f"print(json.dumps({{'n': dataclass_code.write(Path({str(store)!r}))}}))\n"
    )
    count = got["n"]
    assert isinstance(count, int)
    return count


def _start(store: Path | None) -> dict[str, object]:
    """Import the worker as a trial's start does, with the store or without one."""
    install = (
        "import dataclasses\n"
        "from pathlib import Path\n"
        "from sandbox import dataclass_code\n"
        f"installed = dataclass_code.install(dataclasses, Path({str(store)!r}))\n"
        if store is not None
        else "installed = False\n"
    )
    return run_fresh(
        _METHODS + install + "import json\n"
        "compiled = []\n"
        "if installed:\n"
        "    real = dataclass_code._compile\n"
        "    dataclass_code._compile = lambda source: compiled.append(source) or real(source)\n"
        "import sandbox.worker\n"
        "print(json.dumps({'installed': installed, 'compiled': len(compiled),\n"
        "    'methods': methods()}))\n"
    )


def test_the_stored_methods_are_those_dataclasses_compiles_and_cover_the_start(
    tmp_path: Path,
) -> None:
    store = tmp_path / "dataclass_code.marshal"
    assert _write(store) > 100
    plain = _start(None)
    stored = _start(store)
    assert stored["installed"] is True
    assert stored["compiled"] == 0
    assert isinstance(plain["methods"], dict)
    assert len(plain["methods"]) > 150
    # Same bytecode, constants, names, annotations and defaults (no `__future__` flag of
    # dataclass_code.py leaks into the stored code).
    assert stored["methods"] == plain["methods"]


def test_a_source_the_store_lacks_is_compiled_as_dataclasses_would(tmp_path: Path) -> None:
    store = tmp_path / "dataclass_code.marshal"
    _write(store)
    got = run_fresh(
        "import dataclasses, json\n"
        "from pathlib import Path\n"
        "from sandbox import dataclass_code\n"
        f"installed = dataclass_code.install(dataclasses, Path({str(store)!r}))\n"
        "@dataclasses.dataclass(frozen=True, order=True)\n"
        "class Unseen:\n"
        "    '''Not one of the worker's.'''\n"
        "    some_name_of_its_own: int\n"
        "    other: str = 'x'\n"
        "a, b = Unseen(1), Unseen(2, 'y')\n"
        "try:\n"
        "    a.other = 'z'\n"
        "    frozen = False\n"
        "except dataclasses.FrozenInstanceError:\n"
        "    frozen = True\n"
        "print(json.dumps({'installed': installed, 'lt': a < b, 'repr': repr(b),\n"
        "    'frozen': frozen, 'ann': repr(Unseen.__init__.__annotations__)}))\n"
    )
    assert got == {
        "installed": True,
        "lt": True,
        "repr": "Unseen(some_name_of_its_own=2, other='y')",
        "frozen": True,
        "ann": "{'some_name_of_its_own': <class 'int'>, 'other': <class 'str'>, 'return': None}",
    }


def test_a_store_of_another_interpreter_or_none_is_not_used(tmp_path: Path) -> None:
    import marshal

    other = tmp_path / "other.marshal"
    other.write_bytes(marshal.dumps({"key": "cpython-39 3.9.0 -O0", "codes": {}}))
    broken = tmp_path / "broken.marshal"
    broken.write_bytes(b"\x00not marshal")
    got = run_fresh(
        "import dataclasses, json\n"
        "from pathlib import Path\n"
        "from sandbox import dataclass_code\n"
        "print(json.dumps([dataclass_code.install(dataclasses, Path(p)) for p in\n"
        f"    ({str(other)!r}, {str(broken)!r}, {str(tmp_path / 'missing')!r})]\n"
        "    + ['exec' in vars(dataclasses)]))\n"
    )
    assert got == [False, False, False, False]  # type: ignore[comparison-overlap]

"""sandbox/lazy.py: a deferred module costs nothing until it is used, and is then the real
module, the same object for every importer. Each case runs in a fresh interpreter, where
the module is not loaded yet."""

from __future__ import annotations

from tests.fresh_python import run_fresh


def test_a_deferred_module_loads_on_first_use_and_is_the_real_module() -> None:
    got = run_fresh(
        "import json, sys\n"
        "from sandbox import lazy\n"
        "lazy.defer('inspect')\n"
        "import inspect\n"  # an import statement alone does not load it
        "before = lazy.loaded('inspect'), 'ast' in sys.modules\n"
        "from inspect import isfunction\n"  # reading a name does
        "early = inspect\n"
        "signature = str(inspect.signature(lambda a, b=2: 0))\n"
        "import inspect as later\n"
        "print(json.dumps({'before': before, 'after': lazy.loaded('inspect'),\n"
        "    'ast': 'ast' in sys.modules, 'signature': signature,\n"
        "    'same': early is later is sys.modules['inspect'],\n"
        "    'file': inspect.__file__.endswith('inspect.py'),\n"
        "    'isfunction': isfunction(len), 'empty': inspect.Parameter.empty.__name__}))\n"
    )
    assert got == {
        "before": [False, False],
        "after": True,
        "ast": True,
        "signature": "(a, b=2)",
        "same": True,
        "file": True,
        "isfunction": False,
        "empty": "_empty",
    }


def test_a_deferred_module_is_not_loaded_by_import_statements() -> None:
    got = run_fresh(
        "import json, sys\n"
        "from sandbox import lazy\n"
        "lazy.defer('inspect')\n"
        "import inspect, dataclasses\n"
        "@dataclasses.dataclass\n"
        "class Documented:\n"
        "    '''With a docstring dataclasses does not ask inspect for a signature.'''\n"
        "    x: int\n"
        "print(json.dumps({'loaded': lazy.loaded('inspect'), 'ast': 'ast' in sys.modules,\n"
        "    'doc': Documented.__doc__}))\n"
    )
    assert got == {
        "loaded": False,
        "ast": False,
        "doc": "With a docstring dataclasses does not ask inspect for a signature.",
    }


def test_a_loaded_or_missing_module_is_left_as_it_is() -> None:
    got = run_fresh(
        "import json, sys, types\n"
        "from sandbox import lazy\n"
        "lazy.defer('json')\n"  # loaded already: untouched
        "lazy.defer('no_such_module_here')\n"
        "try:\n"
        "    import no_such_module_here\n"
        "    missing = 'imported'\n"
        "except ModuleNotFoundError as exc:\n"
        "    missing = exc.name\n"
        "print(json.dumps({'json': type(sys.modules['json']) is types.ModuleType,\n"
        "    'missing': missing}))\n"
    )
    assert got == {"json": True, "missing": "no_such_module_here"}


def test_threads_that_use_a_deferred_module_at_once_all_see_it_whole() -> None:
    # Whichever thread runs the module's code, the others wait for it rather than reading a
    # module half made (an AttributeError for a name defined further down).
    got = run_fresh(
        "import json, threading\n"
        "from sandbox import lazy\n"
        "lazy.defer('inspect')\n"
        "import inspect\n"
        "gate = threading.Barrier(8)\n"
        "seen = []\n"
        "def use():\n"
        "    gate.wait()\n"
        "    seen.append(inspect.getattr_static.__name__)\n"  # defined near the end
        "threads = [threading.Thread(target=use) for _ in range(8)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()\n"
        "print(json.dumps({'seen': seen, 'dir': 'signature' in dir(inspect)}))\n"
    )
    assert got == {"seen": ["getattr_static"] * 8, "dir": True}


def test_dir_of_a_deferred_module_loads_it() -> None:
    got = run_fresh(
        "import json\n"
        "from sandbox import lazy\n"
        "lazy.defer('tokenize')\n"
        "import tokenize\n"
        "names = dir(tokenize)\n"
        "print(json.dumps({'loaded': lazy.loaded('tokenize'), 'open': 'open' in names}))\n"
    )
    assert got == {"loaded": True, "open": True}

"""Choosing a sandbox backend by name (service/backends/registry.py, EXAMHALL_BACKEND)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from service.backends.registry import BACKENDS, create_backend


def test_an_unknown_backend_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match=r"Unknown sandbox backend 'swarmm'; this build has: docker"
    ):
        create_backend("swarmm", progress=print)


def test_every_registered_backend_has_a_factory() -> None:
    import importlib

    for name, module in BACKENDS.items():
        assert callable(importlib.import_module(module).create), name


def test_the_cli_says_which_backend_setting_is_wrong() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "cases", "smoke"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "EXAMHALL_BACKEND": "nope"},
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "examhall: Unknown sandbox backend 'nope'" in done.stderr

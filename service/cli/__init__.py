"""The `examhall` command line: `main.py` builds the parser; each command group has its
module (`admin`, `box`, `remote`; the report commands live with the reports)."""

from service.cli.main import main

__all__ = ["main"]

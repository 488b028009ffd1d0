"""Reports: pure statistics over scored trials (no I/O, no database) and their CLI commands."""

"""Syscall numbers by architecture (generated data; see generate.py to regenerate)."""

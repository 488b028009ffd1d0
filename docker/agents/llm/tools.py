"""Tools the llm CLI offers the model when examhall runs it as an external agent."""

import subprocess
from pathlib import Path


def read_file(path: str) -> str:
    """Read a text file from the working directory."""
    return Path(path).read_text()


def write_file(path: str, content: str) -> str:
    """Write a text file in the working directory, creating parent directories."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    return f"Wrote {len(content)} characters to {path}"


def list_files(path: str = ".") -> str:
    """List the files under a directory."""
    return "\n".join(sorted(str(p) for p in Path(path).rglob("*") if p.is_file()))


def run(command: str) -> str:
    """Run a shell command (60 s at most) and return its output."""
    done = subprocess.run(
        command, shell=True, capture_output=True, text=True, timeout=60, check=False
    )
    return f"{done.stdout}{done.stderr}[exit code {done.returncode}]"

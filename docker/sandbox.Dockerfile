# The exam hall: every trial runs in a fresh container of this image.
# Built by service/images/sandbox_image.py, which sends a context of just this file (as
# "Dockerfile"), the sandbox/ package, and examhall/suite.py with examhall/__init__.py (what
# suites import, `from examhall.suite import ...`; the library's client stays out). They are
# stdlib-only, so any base with python3 >= 3.11 will do; when BASE cannot be pulled,
# service/images/debian_base.py bootstraps a Debian base with debootstrap.
ARG BASE=python:3.12-slim
FROM ${BASE}

# Metadata before the code: these layers stay cached, so a change to sandbox/ re-runs only the
# COPY and RUN below (each extra build step costs a container create on the classic builder).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/opt/examhall LANG=C.UTF-8
WORKDIR /workspace
# -P: the working directory (/workspace, the agent's to write) must never be on sys.path, or
# a module the agent drops there would shadow one the worker imports later. -S: no `site`,
# as in a task environment's worker layer: the worker is stdlib-only, and site's path
# scanning and the distribution's sitecustomize cost every trial's start for nothing.
ENTRYPOINT ["python3", "-P", "-S", "-m", "sandbox.worker"]

COPY sandbox /opt/examhall/sandbox
COPY examhall /opt/examhall/examhall

# Fail here, with the reason, rather than at the first trial if the base's Python is too old.
# Bytecode is compiled now because nothing may write it at run time (the code is read-only and
# PYTHONDONTWRITEBYTECODE is set), and every trial would otherwise pay for compiling it again.
# The code of the dataclasses' methods is compiled now too, for the same reason
# (sandbox/dataclass_code.py), by the interpreter that will run it.
# The code stays root-owned and unwritable by anyone else, so an agent cannot patch its harness.
RUN python3 -c "import sys; sys.exit(0 if sys.version_info >= (3, 11) else 'examhall: the sandbox needs python3 >= 3.11, the base image has ' + sys.version)" \
 && python3 -m compileall -q /opt/examhall/sandbox /opt/examhall/examhall \
 && python3 -P -S -m sandbox.dataclass_code \
 && chmod -R a+rX,go-w /opt/examhall \
 && python3 -S -c "import sandbox, examhall.suite"

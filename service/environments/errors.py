"""What goes wrong building a task environment."""

from __future__ import annotations


class EnvironmentProblem(ValueError):
    """Something wrong with an environment's inputs or its image, said without naming the
    environment; the builder turns it into an EnvironmentBuildError that does."""


class EnvironmentBuildError(RuntimeError):
    """An environment could not be built. The message names the environment (its source's
    name), what failed (the build's last step, or the check that refused the image) and the
    tail of the build's log; `log` has the whole log."""

    def __init__(self, message: str, *, log: str = "", step: str | None = None) -> None:
        super().__init__(message)
        self.log = log
        self.step = step


class BoxFault(RuntimeError):
    """A part of the box failed a build (its build proxy could not reach a host the operator
    allows): the build says nothing of the environment, so it is no task's verdict. The
    preparer tries the job again, as after any fault of examhall's own."""

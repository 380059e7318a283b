"""Errors that map to lbench's exit codes.

0 success, 1 the run failed, 2 the input was bad. Every bad-input error says what
was wrong, where, and what to do, and is raised before anything is written to
``results/``.
"""

from __future__ import annotations


class LbenchError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, what: str, *, where: str | None = None, hint: str | None = None):
        self.what = what
        self.where = where
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        parts = [self.what]
        if self.where:
            parts.append(f"  where: {self.where}")
        if self.hint:
            parts.append(f"  what to do: {self.hint}")
        return "\n".join(parts)


class BadInput(LbenchError):
    """The user's input is wrong (exit 2)."""

    exit_code = 2


class RunFailed(LbenchError):
    """The run could not complete (exit 1)."""

    exit_code = 1


class EngineError(RunFailed):
    """The engine failed to build, start or answer."""


class WriteFailed(RunFailed):
    """lbench could not write the run's results (full disk, read-only or unwritable directory)."""

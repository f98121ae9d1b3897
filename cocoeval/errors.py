"""Errors raised by cocoeval. Every message says what went wrong and how to fix it."""

from __future__ import annotations


class CocoevalError(Exception):
    """Base class: a problem the user can fix. ``hint`` says how."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  how to fix: {self.hint}"


class InputError(CocoevalError):
    """A data file is unreadable or malformed. Names the file and the record."""

    def __init__(
        self,
        problem: str,
        *,
        file: str | None = None,
        record: str | int | None = None,
        hint: str | None = None,
    ) -> None:
        where = []
        if file is not None:
            where.append(str(file))
        if record is not None:
            where.append(f"record {record}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(f"{prefix}{problem}", hint=hint)
        self.file = file
        self.record = record
        self.problem = problem


class ConfigError(CocoevalError):
    """A parameter, option or params file is invalid."""


class NotFoundError(CocoevalError):
    """Something asked for by name or id does not exist."""


class FatalLLMError(CocoevalError):
    """A provider error no retry can fix (bad key, no access, unknown model, no quota).

    The run stops; what completed is kept in the cache."""

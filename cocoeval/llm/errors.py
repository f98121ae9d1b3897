"""The LLM layer's own errors. Each says what went wrong and how to go on.

This module imports nothing of the package (DESIGN.md: ``llm/`` imports nothing of cocoeval).
The package re-exports the generic classes from ``cocoeval.core.errors`` (``CocoevalError`` is
``LLMError``), so the command line prints them as clear messages rather than tracebacks.
"""

from __future__ import annotations


class LLMError(Exception):
    """Base class: a problem the user can fix. ``hint`` says how.

    The package's ``cocoeval.core.errors.CocoevalError`` is this class (re-exported there), so
    ``except CocoevalError`` catches every error of either layer."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  how to fix: {self.hint}"


class InputError(LLMError):
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


class ConfigError(LLMError):
    """A parameter, option or params file is invalid."""


class FatalLLMError(LLMError):
    """A provider error no retry can fix (bad key, no access, unknown model, no quota).

    The run stops; what completed is kept in the cache."""


class CostCapReached(LLMError):
    """The spend reached ``LLMConfig.max_usd``: no further request was sent, the calls in flight
    finished and are kept (cached), and the run stops. ``reason`` is the one line a run's manifest
    records ("cost cap reached: $x of $X"); the same command with a larger cap resumes."""

    def __init__(self, *, spent_usd: float, max_usd: float, not_sent: int, unknown_calls: int = 0) -> None:
        self.spent_usd = spent_usd
        self.max_usd = max_usd
        self.not_sent = not_sent
        self.unknown_calls = unknown_calls
        self.reason = (
            f"cost cap reached: ${spent_usd:.4f} of ${max_usd:.4f}"
            if not unknown_calls
            else f"cost cap: the cost of {unknown_calls} call(s) is unknown (the server reported no usage), so the "
            f"spend (${spent_usd:.4f} known) cannot be held to the cap of ${max_usd:.4f}"
        )
        super().__init__(
            f"{self.reason}; {not_sent} call(s) not sent (the calls in flight finished and are kept in the call cache)",
            hint="run the same command with a larger cap (cocoeval run --max-usd, or --set llm.max_usd=USD) to go "
            "on: no completed call is sent again (the cap needs the call cache read and written, cache_policy "
            "read_write)",
        )


class CacheError(ConfigError):
    """The call cache's file cannot be used: names the file, why, and the way forward."""

    def __init__(self, path: object, problem: str, *, hint: str) -> None:
        super().__init__(f"call cache {path}: {problem}", hint=hint)
        self.path = str(path)
        self.problem = problem


class CacheNotSQLiteError(CacheError):
    """The file is not an SQLite database at all."""


class CacheDamagedError(CacheError):
    """An SQLite file that SQLite cannot read (damaged, truncated)."""


class CacheForeignError(CacheError):
    """An SQLite database of another application."""


class CacheVersionError(CacheError):
    """A cache of an older (not migratable) or newer schema than this cocoeval reads."""


class CacheLocationError(CacheError):
    """The path is a folder, a device, a pipe (anything but a regular file), or the file or its
    folder cannot be written."""


class CacheSpaceError(CacheError):
    """A write failed for want of room: the disk is full, or the file would pass the file-size
    limit (``ulimit -f``). The answers stored before are kept."""


__all__ = [
    "CacheDamagedError",
    "CacheError",
    "CacheForeignError",
    "CacheLocationError",
    "CacheNotSQLiteError",
    "CacheSpaceError",
    "CacheVersionError",
    "ConfigError",
    "FatalLLMError",
    "InputError",
    "LLMError",
]

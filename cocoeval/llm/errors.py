"""The LLM layer's own errors. Each says what went wrong and how to go on.

They subclass the package's ``CocoevalError`` (the one thing this layer takes from the package,
so that the command line prints them as clear messages rather than tracebacks).
"""

from __future__ import annotations

from ..errors import CocoevalError, ConfigError


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
    """The path is a folder, or the file or its folder cannot be written."""


__all__ = ["CacheDamagedError", "CacheError", "CacheForeignError", "CacheLocationError",
           "CacheNotSQLiteError", "CacheVersionError", "CocoevalError"]

"""The call cache: SQLite in WAL mode, content-addressed, values stored as JSON text.

Keys are sha256 of the canonical JSON of provider identity + prepared request (see
``base.request_key``); no API key or header ever enters a key or a value. Every write commits at
once, so a completed call survives ``kill -9``; several processes can share one file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError

CachePolicy = Literal["read_write", "read_only", "refresh", "off"]
POLICIES: tuple[str, ...] = ("read_write", "read_only", "refresh", "off")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
  key TEXT PRIMARY KEY,
  identity TEXT NOT NULL,
  request TEXT NOT NULL,
  response TEXT NOT NULL,
  created REAL NOT NULL
)"""


def _is_sqlite_or_empty(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        return True
    except OSError as e:
        raise ConfigError(f"cannot read the call cache {path}: {e.strerror or e}") from None
    return not head or head == b"SQLite format 3\x00"


class CallCache:
    """``read_write`` (default) reads and writes; ``read_only`` never writes; ``refresh`` ignores
    what is stored and overwrites it; ``off`` neither reads nor writes."""

    def __init__(self, path: str | Path | None, policy: CachePolicy = "read_write") -> None:
        if policy not in POLICIES:
            raise ConfigError(f"unknown cache policy {policy!r}", hint=f"use one of {', '.join(POLICIES)}")
        self.policy = policy
        self.path = Path(path).absolute() if path is not None else None  # workers may start elsewhere
        self.hits = self.misses = self.writes = 0
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if self.path is not None and policy != "off":
            if policy == "read_only" and not self.path.exists():
                return  # nothing cached yet: every lookup misses
            hint = "give the path of a call cache file (llm.cache / --llm-cache / --cache); it is created when missing"
            if self.path.is_dir():
                raise ConfigError(f"call cache {self.path} is a folder, not a file", hint=hint)
            if not _is_sqlite_or_empty(self.path):  # never write a cache into someone else's file
                raise ConfigError(f"{self.path} is not a call cache (not an SQLite file)", hint=hint)
            db = None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
                db.execute("PRAGMA busy_timeout=60000")
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(_SCHEMA)
            except (OSError, sqlite3.DatabaseError) as e:  # not SQLite, unwritable, under a file
                if db is not None:
                    db.close()
                raise ConfigError(f"cannot open the call cache {self.path}: {e}", hint=hint) from None
            self._db = db

    @property
    def reads(self) -> bool:
        return self._db is not None and self.policy in ("read_write", "read_only")

    @property
    def writes_enabled(self) -> bool:
        return self._db is not None and self.policy in ("read_write", "refresh")

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored response for ``key`` (None on a miss or when the policy does not read)."""
        row = None
        if self.reads:
            with self._lock:
                row = self._db.execute("SELECT response FROM calls WHERE key=?", (key,)).fetchone()  # type: ignore[union-attr]
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, identity: dict | str, request: dict | str, response: dict) -> None:
        """Store one answer; ``identity`` and ``request`` may come as JSON text already."""
        if not self.writes_enabled:
            return
        ident = identity if isinstance(identity, str) else json.dumps(identity, sort_keys=True)
        req = request if isinstance(request, str) else json.dumps(request, sort_keys=True)
        resp = json.dumps(response, sort_keys=True)
        with self._lock:
            self._db.execute(  # type: ignore[union-attr]
                "INSERT OR REPLACE INTO calls (key, identity, request, response, created) VALUES (?,?,?,?,?)",
                (key, ident, req, resp, time.time()))
        self.writes += 1

    def execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Run one statement on the cache's database (the batch records live there too)."""
        if self._db is None:
            raise ConfigError("the call cache is off", hint="set llm.cache to a file")
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def execute_many(self, statements: list[tuple[str, tuple]]) -> None:
        """Run statements in one transaction: all of them are stored, or none."""
        if self._db is None:
            raise ConfigError("the call cache is off", hint="set llm.cache to a file")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    self._db.execute(sql, params)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def __len__(self) -> int:
        if self._db is None:
            return 0
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def keys(self) -> set[str]:
        if self._db is None:
            return set()
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT key FROM calls")}

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes}

    def close(self) -> None:
        with self._lock:  # not under another thread's statement
            if self._db is not None:
                self._db.close()
                self._db = None

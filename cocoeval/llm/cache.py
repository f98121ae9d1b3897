"""The call cache: SQLite in WAL mode, content-addressed, values stored as JSON text.

Keys are sha256 of the canonical JSON of provider identity + prepared request (see
``base.request_key``); no API key or header ever enters a key or a value. Every write commits at
once, so a completed call survives ``kill -9``; several processes can share one file, and
the calls they send are claimed in it first (``_claims.py``), so each is paid for once. The file
has a schema version and an application id; a file that cannot be used (a folder, read-only,
not SQLite, damaged, another application's, another schema, a device or a pipe, a full disk) gets a
clear error (``_cachefile.py``).

A row whose stored answer cannot be read (not JSON, or JSON of a shape this cocoeval does not
know: an older format, an edited file) is a cache miss with a warning naming the file and the
key, never a crash: the call is sent again, and its new answer replaces the row (the rest of the
file is good; an error would stop every run on it). ``unusable`` is how a reader reports one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from ._cachefile import check_location, connect, sqlite_problem
from .errors import ConfigError
from .secrets import redact_urls

CachePolicy = Literal["read_write", "read_only", "refresh", "off"]
POLICIES: tuple[str, ...] = ("read_write", "read_only", "refresh", "off")


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
            writes = policy != "read_only"
            if not check_location(self.path, writes):
                return  # read-only and nothing cached yet: every lookup misses
            self._db = connect(self.path, writes)

    @contextlib.contextmanager
    def _guard(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock; an SQLite error about the file becomes a clear error."""
        with self._lock:
            if self._db is None:
                raise ConfigError("the call cache is off or closed", hint="set llm.cache to a file")
            try:
                yield self._db
            except sqlite3.Error as e:
                problem = sqlite_problem(self.path, e) if self.path is not None else None
                if problem is None:
                    raise
                raise problem from None

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
            with self._guard() as db:
                row = db.execute("SELECT response FROM calls WHERE key=?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        try:
            value = json.loads(row[0])
        except (TypeError, ValueError) as e:
            self.unusable(key, f"its stored answer is not JSON ({e})")
            return None
        except RecursionError:
            self.unusable(key, "its stored answer is JSON nested too deeply to read")
            return None
        if not isinstance(value, dict):
            self.unusable(key, f"its stored answer is a JSON {type(value).__name__}, not an object")
            return None
        return value

    def unusable(self, key: str, why: str) -> None:
        """A row ``get`` returned cannot be used (``why``): counted as a miss, with a warning."""
        self.hits -= 1
        self.misses += 1
        then = (
            "sent again and its new answer replaces the row"
            if self.writes_enabled
            else "sent again (the row stays: this cache is not written)"
        )
        logging.getLogger(__name__).warning(
            "call cache %s: the row of call %s cannot be used: %s (written by an older cocoeval, or edited); "
            "it counts as a miss: the call is %s",
            self.path,
            key[:16],
            why,
            then,
        )

    def put(self, key: str, identity: dict | str, request: dict | str, response: dict) -> None:
        """Store one answer; ``identity`` and ``request`` may come as JSON text already."""
        if not self.writes_enabled:
            return
        # a key in the model's URL (refused by parse_model_spec) would be [REDACTED] in the identity column
        ident = redact_urls(identity if isinstance(identity, str) else json.dumps(identity, sort_keys=True))
        req = request if isinstance(request, str) else json.dumps(request, sort_keys=True)
        resp = json.dumps(response, sort_keys=True)
        with self.atomic() as db:  # the answer stored and its claim let go at once
            db.execute(
                "INSERT OR REPLACE INTO calls (key, identity, request, response, created) VALUES (?,?,?,?,?)",
                (key, ident, req, resp, time.time()),
            )
            db.execute("DELETE FROM claims WHERE key=?", (key,))
        self.writes += 1

    @contextlib.contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: no other process writes in between)."""
        with self._guard() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Run one statement on the cache's database (the batch records live there too)."""
        with self._guard() as db:
            return db.execute(sql, params).fetchall()

    def execute_many(self, statements: list[tuple[str, tuple]]) -> None:
        """Run statements in one transaction: all of them are stored, or none."""
        with self.atomic() as db:
            for sql, params in statements:
                db.execute(sql, params)

    def __len__(self) -> int:
        if self._db is None:
            return 0
        with self._guard() as db:
            return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def keys(self) -> set[str]:
        if self._db is None:
            return set()
        with self._guard() as db:
            return {r[0] for r in db.execute("SELECT key FROM calls")}

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes}

    def close(self) -> None:
        with self._lock:  # not under another thread's statement
            if self._db is not None:
                self._db.close()
                self._db = None

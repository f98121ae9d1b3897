"""Opening the call cache's SQLite file: its schema version, migration, and a clear error for
every file that cannot be used (a folder, a read-only place, not SQLite, damaged, another
application's database, an older or newer schema, a device or a pipe, a full disk).

Schema versions (``PRAGMA user_version``; ``PRAGMA application_id`` marks the file as ours):
  1  table ``calls`` only; no application id (cocoeval before the version was recorded)
  2  adds ``meta`` (schema version, application), ``claims`` and ``owners`` (calls claimed by a
     live process, so that processes sharing the cache pay for each call once); migrated from 1
     in place, automatically (only tables are added)
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from pathlib import Path

from .errors import (
    CacheDamagedError,
    CacheError,
    CacheForeignError,
    CacheLocationError,
    CacheNotSQLiteError,
    CacheSpaceError,
    CacheVersionError,
)

APPLICATION_ID = 0x43434556  # "CCEV"
SCHEMA_VERSION = 2
_MAGIC = b"SQLite format 3\x00"

_CALLS = """CREATE TABLE IF NOT EXISTS calls (
  key TEXT PRIMARY KEY,
  identity TEXT NOT NULL,
  request TEXT NOT NULL,
  response TEXT NOT NULL,
  created REAL NOT NULL
)"""
_V2 = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # a call being sent by a live owner: others wait for its answer instead of paying again
    "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, claimed REAL NOT NULL)",
    # the owners of claims: host, process ids (a runner and its workers), last heartbeat
    "CREATE TABLE IF NOT EXISTS owners (owner TEXT PRIMARY KEY, host TEXT NOT NULL, pids TEXT NOT NULL, "
    "heartbeat REAL NOT NULL)",
)
_CALL_COLUMNS = {"key", "identity", "request", "response", "created"}
MOVE_ASIDE = (
    "move it aside (e.g. mv {p} {p}.bad) or set llm.cache to another file; a new cache "
    "starts empty, so calls are sent (and paid) again"
)


_WRITE_ERRORS = {
    "SQLITE_FULL",
    "SQLITE_IOERR_WRITE",
    "SQLITE_IOERR_FSYNC",
    "SQLITE_IOERR_TRUNCATE",
    "SQLITE_IOERR_SHMSIZE",
    "SQLITE_IOERR_SHMMAP",
}
"""SQLite's codes for a write that did not go through (a full disk, a file-size limit): not damage."""


def sqlite_problem(path: Path, e: sqlite3.Error) -> CacheError | None:
    """The clear error for an SQLite error on the cache file, or None when it is not about the file."""
    low = str(e).lower()
    if getattr(e, "sqlite_errorname", None) in _WRITE_ERRORS or "disk is full" in low:
        return no_room(path, str(e))
    if "malformed" in low or "not a database" in low or "disk i/o" in low:
        return CacheDamagedError(
            path,
            f"SQLite cannot read this file ({e}): it is damaged or truncated",
            hint=f"try `sqlite3 {path} .recover | sqlite3 {path}.recovered` and point llm.cache at "
            "the recovered file; or " + MOVE_ASIDE.format(p=path),
        )
    if "readonly" in low or "read-only" in low or "unable to open" in low:
        return read_only(path, str(e))
    return None


def no_room(path: Path, why: str) -> CacheSpaceError:
    """A write that failed: the disk full, or a file past the file-size limit (checked, so that the
    message says which), never "damaged"."""
    limit = _file_size_limit()
    sizes = [f.stat().st_size for f in (path, Path(f"{path}-wal"), Path(f"{path}-journal")) if f.is_file()]
    try:
        st = os.statvfs(path.parent)
        free: int | None = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    if limit is not None and sizes and max(sizes) + (1 << 20) > limit:
        return CacheSpaceError(
            path,
            f"cannot be written ({why}): the file is too large, it would pass the file-size "
            f"limit of this process ({limit} bytes, ulimit -f)",
            hint="raise the limit (ulimit -f unlimited), or set llm.cache to a new file; the "
            "answers stored so far are kept",
        )
    if free is not None and free < (64 << 20):
        return CacheSpaceError(
            path,
            f"cannot be written ({why}): the disk is full ({free} bytes free on the filesystem of {path.parent})",
            hint="free space on that disk, or set llm.cache to a file on another disk; the "
            "answers stored so far are kept, so a re-run sends only the rest",
        )
    return CacheSpaceError(
        path,
        f"cannot be written ({why}): the disk is full, the file is too large for its "
        "filesystem, or the disk is failing",
        hint="check the free space (df) and the system log; the answers stored so far are kept",
    )


def _file_size_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not on Unix
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def read_only(path: Path, why: str) -> CacheLocationError:
    return CacheLocationError(
        path,
        f"cannot be written ({why})",
        hint="make the file and its folder writable (SQLite writes -wal and -shm files "
        "beside it), set llm.cache to a writable place, or set llm.cache_policy: "
        "read_only to use the answers it has without writing",
    )


def check_location(path: Path, writes: bool) -> bool:
    """Raise for a folder or an unwritable place; False when a read-only cache has no file yet."""
    if path.is_dir():
        raise CacheLocationError(
            path, "is a folder, not a file", hint=f"set llm.cache to a file path, e.g. {path / 'cache.sqlite'}"
        )
    try:
        mode: int | None = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise CacheLocationError(
            path,
            f"cannot be looked at ({e.strerror or e})",
            hint="set llm.cache to a file path in a folder you can read",
        ) from None
    if mode is not None and not stat.S_ISREG(mode):  # a pipe would block the open forever
        what = (
            "is a device, not a file"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "is a named pipe (FIFO), not a file: SQLite would wait on it forever"
            if stat.S_ISFIFO(mode)
            else "is a socket, not a file"
            if stat.S_ISSOCK(mode)
            else "is not a regular file"
        )
        raise CacheLocationError(
            path,
            what,
            hint="set llm.cache to a regular file (or one not made yet), e.g. "
            ".cocoeval/cache.sqlite; to keep no cache, set "
            "llm.cache_policy: off",
        )
    if mode is not None:
        with open(path, "rb") as f:
            head = f.read(len(_MAGIC))
        if head and head != _MAGIC:
            raise CacheNotSQLiteError(
                path, "is not an SQLite database (not a call cache, or overwritten)", hint=MOVE_ASIDE.format(p=path)
            )
        if writes and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
            raise read_only(path, "the file or its folder is read-only")
        return True
    if not writes:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CacheLocationError(
            path, f"its folder cannot be made ({e.strerror or e})", hint="set llm.cache to a path in a writable folder"
        ) from None
    if not os.access(path.parent, os.W_OK):
        raise read_only(path, "its folder is read-only")
    return True


def connect(path: Path, writes: bool) -> sqlite3.Connection:
    """An open connection to a cache of the current schema (migrated or created when ``writes``)."""
    try:
        if not writes and not os.access(path.parent, os.W_OK):  # e.g. a cache on read-only media
            db = sqlite3.connect(f"file:{path}?immutable=1", uri=True, isolation_level=None, check_same_thread=False)
        else:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
            db.execute("PRAGMA busy_timeout=60000")
        try:
            _check(path, db, writes)
            if writes:
                _to_wal(db)
                db.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            db.close()
            raise
    except sqlite3.Error as e:
        raise (sqlite_problem(path, e) or e) from None
    return db


def _to_wal(db: sqlite3.Connection, wait_s: float = 60.0) -> None:
    """Switch to WAL, waiting as long as the busy timeout while another connection holds a write lock.

    SQLite answers ``PRAGMA journal_mode=WAL`` with "database is locked" at once, without its busy
    handler, while another connection holds a write lock (the switch upgrades a read lock, which
    SQLite never waits on, to avoid deadlock): two processes opening a new cache together hit it.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _check(path: Path, db: sqlite3.Connection, writes: bool) -> None:
    app = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if app == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise CacheVersionError(
                path,
                f"was written by a newer cocoeval (cache schema {version}; this one reads up to {SCHEMA_VERSION})",
                hint="upgrade cocoeval (pip install -U cocoeval), or set llm.cache to another file for this version",
            )
        if version == SCHEMA_VERSION:
            if not _is_v1(db, tables):
                raise CacheDamagedError(
                    path,
                    "is a call cache without its calls table, or with another one (edited with another tool?)",
                    hint=MOVE_ASIDE.format(p=path),
                )
            return
        if version < 1:
            raise CacheVersionError(path, f"has an unknown cache schema {version}", hint=MOVE_ASIDE.format(p=path))
    elif app != 0 or (tables and not _is_v1(db, tables)):
        what = f"application id {app:#x}" if app else f"tables {', '.join(sorted(tables))}"
        raise CacheForeignError(
            path,
            f"is an SQLite database of another application ({what}), not a call cache",
            hint="set llm.cache to a file of its own (e.g. .cocoeval/cache.sqlite); "
            "cocoeval never writes into another program's database",
        )
    if writes:
        _migrate(db)
    elif tables:  # read-only: schema 1 has the same calls table; claims are not used without writes
        return
    else:
        raise CacheVersionError(
            path,
            "is an empty SQLite file and the cache is read-only",
            hint="set llm.cache_policy: read_write to create the cache",
        )


def _is_v1(db: sqlite3.Connection, tables: set[str]) -> bool:
    if "calls" not in tables:
        return False
    return {r[1] for r in db.execute("PRAGMA table_info(calls)")} >= _CALL_COLUMNS


def _migrate(db: sqlite3.Connection) -> None:
    """Create schema 2, or bring schema 1 up to it (only tables are added); one process at a time."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            for sql in (_CALLS, *_V2):
                db.execute(sql)
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?), ('application', 'cocoeval call cache')",
                (str(SCHEMA_VERSION),),
            )
            db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")

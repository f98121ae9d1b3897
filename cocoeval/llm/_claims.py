"""Claims: processes sharing one call cache pay for each call once.

Before a call that missed the cache is sent, its key is claimed in the cache's file (table
``claims``) by an owner (host, process id and a random part; table ``owners`` holds its process
ids — the runner's and its worker processes' — and a heartbeat). Another process that wants the
same call finds the claim and waits for the answer to appear in the cache instead of sending
it. Storing the answer removes the claim in the same transaction (``CallCache.put``); a failed
call lets its claim go, so that someone can try again.

A claim whose owner is gone is taken over: on the same host when none of the owner's processes
is alive (a crash, ``kill -9``), on another host when its heartbeat is older than ``stale_s``.
Claims are used with the ``read_write`` policy only (``refresh`` does not read the answers of
others, ``read_only`` and ``off`` never write).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from typing import Literal

from .cache import CallCache

log = logging.getLogger("cocoeval.llm.claims")

HEARTBEAT_S = 10.0
"""Seconds between an owner's heartbeats."""
STALE_S = 90.0
"""A claim of another host whose owner has not beaten for this long is taken over."""

Claim = Literal["mine", "answered", "held"]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError:
        return False
    return True


class Claims:
    """This process's claims in one cache."""

    def __init__(self, cache: CallCache, *, stale_s: float = STALE_S, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.cache = cache
        self.host = socket.gethostname()
        self.owner = f"{self.host}:{os.getpid()}:{secrets.token_hex(4)}"
        self.stale_s, self.heartbeat_s = stale_s, heartbeat_s
        self.pids: list[int] = [os.getpid()]
        self.taken_over = 0
        """Claims of gone owners this process took over."""
        self._registered = False
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # -- owner --------------------------------------------------------------------------------
    def _register(self) -> None:
        if self._registered:
            return
        self.cache.execute(
            "INSERT OR REPLACE INTO owners VALUES (?,?,?,?)",
            (self.owner, self.host, json.dumps(self.pids), time.time()),
        )
        self._registered = True
        self._beat = threading.Thread(target=self._heartbeat, name="cocoeval-claims-heartbeat", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.cache.execute("UPDATE owners SET heartbeat=? WHERE owner=?", (time.time(), self.owner))
            except Exception as e:  # the cache closed under it: the owner is ending
                log.debug("claims heartbeat stopped: %s", e)
                return

    def set_pids(self, pids: list[int]) -> None:
        """The processes that may still answer this owner's claims (the runner and its workers)."""
        if pids != self.pids:
            self.pids = list(pids)
            if self._registered:
                self.cache.execute(
                    "UPDATE owners SET pids=?, heartbeat=? WHERE owner=?",
                    (json.dumps(self.pids), time.time(), self.owner),
                )

    def alive(self, host: str | None, pids: str | None, heartbeat: float | None) -> bool:
        """Whether an owner may still answer its claims."""
        if host is None or heartbeat is None:  # no owner record: nobody can answer
            return False
        if host == self.host:
            return any(pid_alive(int(p)) for p in json.loads(pids or "[]"))
        return time.time() - heartbeat < self.stale_s

    # -- claims -------------------------------------------------------------------------------
    def claim(self, key: str, *, look: bool = False) -> Claim:
        """'answered' (the cache has it now), 'mine' (send it), or 'held' by a live owner (wait).
        ``look``: read first, without a write lock (for waiting processes that poll)."""
        if look and (state := self._look(key)) != "free":
            return state
        self._register()
        with self.cache.atomic() as db:  # look again, then claim: no other process in between
            if db.execute("SELECT 1 FROM calls WHERE key=?", (key,)).fetchone():
                return "answered"
            row = db.execute(
                "SELECT c.owner, o.host, o.pids, o.heartbeat FROM claims c LEFT JOIN owners o "
                "ON o.owner = c.owner WHERE c.key=?",
                (key,),
            ).fetchone()
            if row is not None and row[0] != self.owner:
                if self.alive(*row[1:]):
                    return "held"
                log.info("taking over the claim of %s on call %s (its owner is gone)", row[0], key[:12])
                self.taken_over += 1
            db.execute("INSERT OR REPLACE INTO claims VALUES (?,?,?)", (key, self.owner, time.time()))
        return "mine"

    def _look(self, key: str) -> Claim | Literal["free"]:
        """A read without a write lock (waiting processes poll with it)."""
        if self.cache.execute("SELECT 1 FROM calls WHERE key=?", (key,)):
            return "answered"
        rows = self.cache.execute(
            "SELECT c.owner, o.host, o.pids, o.heartbeat FROM claims c LEFT JOIN owners o "
            "ON o.owner = c.owner WHERE c.key=?",
            (key,),
        )
        if not rows:
            return "free"
        if rows[0][0] == self.owner:
            return "mine"
        return "held" if self.alive(*rows[0][1:]) else "free"

    def holder(self, key: str) -> str | None:
        """Who holds ``key`` (for messages), or None."""
        rows = self.cache.execute("SELECT owner FROM claims WHERE key=?", (key,))
        return rows[0][0] if rows else None

    def release(self, keys: list[str] | set[str]) -> None:
        """Let go of claims (a failed or abandoned call): another process may send them."""
        if keys and self._registered:
            self.cache.execute_many([("DELETE FROM claims WHERE key=? AND owner=?", (k, self.owner)) for k in keys])

    def close(self, *, keep: bool = False) -> None:
        """Stop the heartbeat; unless ``keep`` (worker processes still finish calls, their claims
        stay until they exit), let go of every claim and the owner record."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        if self._registered and not keep:
            self.cache.execute_many(
                [
                    ("DELETE FROM claims WHERE owner=?", (self.owner,)),
                    ("DELETE FROM owners WHERE owner=?", (self.owner,)),
                ]
            )
            self._registered = False

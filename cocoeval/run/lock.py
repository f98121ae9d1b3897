"""The run-directory lock: one ``cocoeval run`` at a time on a run directory.

``<run dir>/.cocoeval-run.lock`` holds the holder's process id, host, start time and command,
and the holder keeps an OS lock on it (``fcntl.flock``; ``msvcrt.locking`` on Windows). The OS
drops the lock when the holder ends, however it ends (a crash, ``kill -9``), so a lock never
outlives its process; the file's text only names the holder for the message a second run gets.
(On a network file system without working locks, two runs on two machines are not stopped.)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from cocoeval.core.errors import ConfigError

LOCK_NAME = ".cocoeval-run.lock"


class RunDirLockedError(ConfigError):
    """Another process is running on this run directory."""


def _try_lock(f: IO[str]) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        except OSError:
            return False
        return True
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def holder(run_dir: Path) -> dict | None:
    """What the lock file says of its holder (None when it says nothing readable)."""
    try:
        data = json.loads((run_dir / LOCK_NAME).read_text(encoding="utf-8") or "null")
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run directory's lock while the block runs; RunDirLockedError if another
    process holds it."""
    path = run_dir / LOCK_NAME
    f = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the whole block
    try:
        f.seek(0)
        if not _try_lock(f):
            h = holder(run_dir) or {}
            who = (
                f"process {h.get('pid', '?')} on host {h.get('host', '?')}"
                + (f", running since {h['started']}" if h.get("started") else "")
                + (f" ({h['command']})" if h.get("command") else "")
            )
            same_host = h.get("host") == socket.gethostname()
            stop = f"`kill {h.get('pid')}`" if same_host and h.get("pid") else f"stop it on {h.get('host', 'its host')}"
            raise RunDirLockedError(
                f"run directory {run_dir} is in use by another cocoeval run: {who}",
                hint=f"wait for that run to finish, or {stop} (its completed calls are cached; re-running "
                "resumes); to run the same params side by side, give this run another directory "
                "(out: in the params file) — runs sharing one call cache pay for each call once",
            )
        f.seek(0)
        f.truncate()
        f.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300],
                }
            )
        )
        f.flush()
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                f.seek(0)
                f.truncate()  # the holder is gone; the OS lock goes with the close below
    finally:
        f.close()

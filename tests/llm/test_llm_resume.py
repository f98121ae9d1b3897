"""A run killed with SIGKILL midway re-sends exactly the calls that had not completed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.server import FakeServer

SCRIPT = Path(__file__).parents[1] / "scripts" / "run_requests.py"


def _cached_prompts(cache: Path) -> set[str]:
    if not cache.exists():
        return set()
    db = sqlite3.connect(cache)
    try:
        rows = db.execute("SELECT request FROM calls").fetchall()
    except sqlite3.OperationalError:
        return set()
    return {json.loads(r[0])["messages"][-1]["content"] for r in rows}


def _workers_of(cache: Path) -> list[int]:
    """Worker processes (llm.processes > 1) still running for this cache (their argument names it)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"cocoeval.llm._worker_main" in a for a in args) and any(str(cache).encode() in a for a in args):
            found.append(int(cmdline.parent.name))
    return found


@pytest.mark.parametrize(("processes", "stop"), [(1, "kill"), (2, "kill"), (2, "ctrl-c")])
def test_kill_9_midway_then_rerun_sends_exactly_the_missing(tmp_path, processes, stop):
    """``kill -9`` of the runner; ``ctrl-c``: SIGINT to its whole process group, as a terminal
    sends it (worker processes run in sessions of their own and finish their calls)."""
    cache = tmp_path / "cache.sqlite"
    n = 300
    with FakeServer(latency_s=0.03) as srv:
        p = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(cache), srv.openai_base, str(n), str(processes)],
            start_new_session=True,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 60
        while len(_cached_prompts(cache)) < 100 and time.time() < deadline and p.poll() is None:
            time.sleep(0.05)
        if processes > 1:
            assert len(_workers_of(cache)) == processes
        if stop == "kill":
            p.send_signal(signal.SIGKILL)
        else:
            os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=60)
        assert p.returncode == (-signal.SIGKILL if stop == "kill" else -signal.SIGINT)
        if processes > 1:  # orphaned workers finish what they were given, cache it and exit
            while _workers_of(cache) and time.time() < deadline + 30:
                time.sleep(0.05)
            assert not _workers_of(cache)
        done = _cached_prompts(cache)
        assert 100 <= len(done) < n
        first_sent = set(srv.stats()["prompts"])
        if processes == 1:
            assert done <= first_sent  # calls in flight at the kill were sent, not cached
        else:
            assert done == first_sent  # every call sent was answered and cached: nothing paid is lost
        srv.reset()
        out = subprocess.run(
            [sys.executable, str(SCRIPT), str(cache), srv.openai_base, str(n), str(processes)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0 and out.stdout.strip() == f"{n} ok"
        resent = srv.stats()["prompts"]
        everything = {f"request {i}" for i in range(n)}
        assert set(resent) == everything - done
        assert all(v == 1 for v in resent.values())
        assert _cached_prompts(cache) == everything

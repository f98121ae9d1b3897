"""A run killed with SIGKILL midway re-sends exactly the calls that had not completed."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from cocoeval.llm.fakeserver import FakeServer

SCRIPT = Path(__file__).parent / "scripts" / "run_requests.py"


def _cached_prompts(cache: Path) -> set[str]:
    if not cache.exists():
        return set()
    db = sqlite3.connect(cache)
    try:
        rows = db.execute("SELECT request FROM calls").fetchall()
    except sqlite3.OperationalError:
        return set()
    return {json.loads(r[0])["messages"][-1]["content"] for r in rows}


def test_kill_9_midway_then_rerun_sends_exactly_the_missing(tmp_path):
    cache = tmp_path / "cache.sqlite"
    n = 300
    with FakeServer(latency_s=0.03) as srv:
        p = subprocess.Popen([sys.executable, str(SCRIPT), str(cache), srv.openai_base, str(n)])
        deadline = time.time() + 60
        while len(_cached_prompts(cache)) < 100 and time.time() < deadline and p.poll() is None:
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert p.returncode == -signal.SIGKILL
        done = _cached_prompts(cache)
        assert 100 <= len(done) < n
        first_sent = set(srv.stats()["prompts"])
        assert done <= first_sent
        srv.reset()
        out = subprocess.run([sys.executable, str(SCRIPT), str(cache), srv.openai_base, str(n)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == f"{n} ok"
        resent = srv.stats()["prompts"]
        everything = {f"request {i}" for i in range(n)}
        assert set(resent) == everything - done
        assert all(v == 1 for v in resent.values())
        assert _cached_prompts(cache) == everything

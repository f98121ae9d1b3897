from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from cocoeval import ConfigError
from cocoeval.llm import CallCache


def test_policies(tmp_path):
    p = tmp_path / "c.sqlite"
    rw = CallCache(p)
    assert rw.get("k") is None
    rw.put("k", {"provider": "x"}, {"messages": []}, {"text": "one"})
    assert rw.get("k") == {"text": "one"}
    assert rw.stats() == {"hits": 1, "misses": 1, "writes": 1}
    ro = CallCache(p, "read_only")
    assert ro.get("k") == {"text": "one"}
    ro.put("k2", {}, {}, {"text": "two"})
    assert ro.get("k2") is None and len(rw) == 1
    ref = CallCache(p, "refresh")
    assert ref.get("k") is None  # ignores what is stored...
    ref.put("k", {}, {}, {"text": "new"})  # ...and overwrites it
    assert rw.get("k") == {"text": "new"}
    off = CallCache(p, "off")
    assert off.get("k") is None
    off.put("k3", {}, {}, {})
    assert len(rw) == 1
    assert CallCache(tmp_path / "none.sqlite", "read_only").get("k") is None
    assert not (tmp_path / "none.sqlite").exists()
    with pytest.raises(ConfigError, match="cache policy"):
        CallCache(p, "sometimes")


def test_wal_mode_and_json_values(tmp_path):
    p = tmp_path / "c.sqlite"
    CallCache(p).put("k", {"a": 1}, {"b": 2}, {"c": 3})
    db = sqlite3.connect(p)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT response FROM calls").fetchone()[0] == '{"c": 3}'


WRITER = """
import sys
from cocoeval.llm import CallCache
c = CallCache(sys.argv[1])
for i in range(400):
    c.put(f"{sys.argv[2]}-{i}", {"p": sys.argv[2]}, {"i": i}, {"text": "x" * 200})
    if i % 50 == 0:
        c.get(f"{sys.argv[2]}-0")
"""


def test_two_processes_writing_at_once_do_not_corrupt(tmp_path):
    p = tmp_path / "shared.sqlite"
    CallCache(p)  # create the schema first, as any run would
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(p), tag]) for tag in ("a", "b", "c")]
    assert [pr.wait(timeout=120) for pr in procs] == [0, 0, 0]
    db = sqlite3.connect(p)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 1200

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time

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


def test_the_switch_to_wal_waits_for_another_writer_as_sqlite_does_not(tmp_path):
    """Two processes opening a new cache together: one switches to WAL while the other holds the
    write lock of its schema check. SQLite refuses at once there (no busy handler), so we wait."""
    from cocoeval.llm._cachefile import _to_wal

    p = tmp_path / "c.sqlite"
    other = sqlite3.connect(p, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE t (x)")
    db = sqlite3.connect(p, isolation_level=None, timeout=60)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _to_wal(db, wait_s=0)  # SQLite itself gives up at once, busy timeout or not
    threading.Timer(0.3, other.execute, ("COMMIT",)).start()
    t = time.monotonic()
    _to_wal(db)
    assert time.monotonic() - t >= 0.25
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()
    db.close()


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


# -- the file: schema version, migration, and a clear error for each file that cannot be used --


def _v1_cache(path):
    """A cache as cocoeval wrote it before the schema version (table calls only)."""
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE calls (key TEXT PRIMARY KEY, identity TEXT NOT NULL, request TEXT NOT NULL, "
        "response TEXT NOT NULL, created REAL NOT NULL)"
    )
    db.execute("INSERT INTO calls VALUES ('k', '{}', '{}', '{\"text\": \"old\"}', 0)")
    db.commit()
    db.close()


def test_new_caches_carry_the_schema_version_and_old_ones_are_migrated(tmp_path):
    from cocoeval.llm._cachefile import APPLICATION_ID, SCHEMA_VERSION

    CallCache(tmp_path / "new.sqlite").close()
    db = sqlite3.connect(tmp_path / "new.sqlite")
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    assert dict(db.execute("SELECT name, value FROM meta"))["schema_version"] == "2"
    old = tmp_path / "old.sqlite"
    _v1_cache(old)
    assert CallCache(old, "read_only").get("k") == {"text": "old"}  # read as it is, not written
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone()[0] == 0
    c = CallCache(old)  # migrated in place: its answers kept
    assert c.get("k") == {"text": "old"}
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert c.execute("SELECT COUNT(*) FROM claims") == [(0,)]


def _damaged(path):
    c = CallCache(path)
    for i in range(300):
        c.put(f"k{i}", {}, {}, {"text": "x" * 300})
    c.close()
    data = bytearray(path.read_bytes())
    data[4096:] = b"\xde\xad\xbe\xef" * ((len(data) - 4096) // 4)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("kind", "make", "cls", "needle"),
    [
        ("folder", lambda p: p.mkdir(), "CacheLocationError", "is a folder"),
        ("not sqlite", lambda p: p.write_text("key,answer\nk,hello\n"), "CacheNotSQLiteError", "not an SQLite"),
        (
            "truncated",
            lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\x10\x00" * 20),
            "CacheDamagedError",
            "damaged",
        ),
        ("damaged", _damaged, "CacheDamagedError", "damaged"),
        (
            "foreign",
            lambda p: sqlite3.connect(p).execute("CREATE TABLE songs (title TEXT)"),
            "CacheForeignError",
            "another application",
        ),
        (
            "foreign app id",
            lambda p: sqlite3.connect(p).execute("PRAGMA application_id=1234"),
            "CacheForeignError",
            "another application",
        ),
        (
            "newer",
            lambda p: (CallCache(p).close(), sqlite3.connect(p).execute("PRAGMA user_version=99")),
            "CacheVersionError",
            "newer cocoeval",
        ),
    ],
)
def test_each_unusable_file_gets_a_clear_error(tmp_path, kind, make, cls, needle):
    from cocoeval.llm import errors

    p = tmp_path / "cache.sqlite"
    make(p)
    with pytest.raises(getattr(errors, cls)) as e:
        c = CallCache(p)
        c.get("k0")  # damage may only show when the pages are read
    msg = str(e.value)
    assert str(p) in msg and needle in msg and "how to fix" in msg
    assert isinstance(e.value, ConfigError)  # printed as a message by the command line


def test_a_cache_that_cannot_be_written_gets_a_clear_error(tmp_path):
    from cocoeval.llm.errors import CacheLocationError

    with pytest.raises(CacheLocationError, match="folder cannot be made") as e:
        CallCache("/proc/cocoeval-nowhere/cache.sqlite")  # /proc takes no new folders, even for root
    assert "writable" in str(e.value)
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        CallCache(ro / "c.sqlite").close()
        ro.chmod(0o555)
        try:
            with pytest.raises(CacheLocationError, match="cache_policy: read_only"):
                CallCache(ro / "c.sqlite")
            assert CallCache(ro / "c.sqlite", "read_only").get("k") is None
        finally:
            ro.chmod(0o755)


# -- paths that are no file, rows that cannot be read, a disk with no room (issue #24) --------


def test_a_device_or_a_pipe_is_refused_not_opened(tmp_path):
    from cocoeval.llm.errors import CacheLocationError

    with pytest.raises(CacheLocationError, match="is a device, not a file") as e:
        CallCache("/dev/null")
    assert "mv /dev/null" not in str(e.value) and "cache_policy: off" in str(e.value)
    fifo = tmp_path / "cache.sqlite"
    os.mkfifo(fifo)
    # opening a FIFO for reading blocks until a writer comes: a child, so that a hang fails the test
    code = (
        "import sys\nfrom cocoeval.llm import CallCache\nfrom cocoeval.llm.errors import CacheLocationError\n"
        "for policy in ('read_write', 'read_only'):\n"
        "    try:\n        CallCache(sys.argv[1], policy)\n    except CacheLocationError as e:\n"
        "        print(e)\n    else:\n        sys.exit('opened')\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("is a named pipe (FIFO), not a file") == 2 and str(fifo) in out.stdout


def test_a_row_that_is_not_json_or_of_an_older_format_is_a_miss_with_a_warning(srv, tmp_path, caplog):
    from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner

    p = tmp_path / "c.sqlite"
    call = Call(
        model=f"openai/gpt-4.1@{srv.openai_base}",
        stage="t",
        request=GenerateRequest(messages=[Message(role="user", content="hello")]),
    )
    r = Runner(LLMConfig(cache=str(p), progress=False))
    key = r.run([call])[0].key
    r.close()
    for bad in ("{not json", '"a string"', '{"answer": "an older format: no text"}'):
        r = Runner(LLMConfig(cache=str(p), progress=False))
        r.cache.execute("UPDATE calls SET response=? WHERE key=?", (bad, key))
        caplog.clear()
        with caplog.at_level("WARNING"):
            [res] = r.run([call])  # sent again, not a traceback
        assert res.status == "ok" and not res.cache_hit and res.response.text.startswith("echo")
        assert r.cache.stats()["misses"] >= 1 and r.ledger.totals()["reused_calls"] == 0
        assert any(str(p) in m and key[:16] in m and "counts as a miss" in m for m in caplog.messages)
        assert r.cache.get(key)["text"] == res.response.text  # its new answer replaced the row
        r.close()


FULL = """
import resource, sys
from cocoeval.core.errors import ConfigError
from cocoeval.core.jsonio import write_json
from cocoeval.llm import CallCache
from cocoeval.llm.errors import CacheSpaceError
c = CallCache(sys.argv[1] + "/cache.sqlite")
c.put("before", {}, {}, {"text": "kept"})
resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, resource.RLIM_INFINITY))
try:
    for i in range(1000):
        c.put(f"k{i}", {}, {}, {"text": "x" * 3000})
except CacheSpaceError as e:
    print("CACHE", e)
try:
    write_json(sys.argv[1] + "/run/usage.json", {"x": "y" * 400_000})
except ConfigError as e:
    print("RUN", e)
"""


def test_a_file_size_limit_or_a_full_disk_says_so_never_damaged(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "usage.json").write_text('{"before": 1}')
    out = subprocess.run([sys.executable, "-c", FULL, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr  # no traceback, no SIGXFSZ
    cache = next(ln for ln in out.stdout.splitlines() if ln.startswith("CACHE"))
    assert "file is too large" in cache and "file-size limit" in cache and str(tmp_path) in cache
    assert "damaged" not in out.stdout and ".recover" not in out.stdout
    assert "answers stored so far are kept" in out.stdout
    run = next(ln for ln in out.stdout.splitlines() if ln.startswith("RUN"))
    assert "usage.json" in run and "file is too large" in run and "ulimit -f" in out.stdout
    assert CallCache(tmp_path / "cache.sqlite").get("before") == {"text": "kept"}
    assert (tmp_path / "run" / "usage.json").read_text() == '{"before": 1}'
    assert not [f for f in (tmp_path / "run").iterdir() if f.name != "usage.json"]  # no temporary file left


def test_a_full_disk_is_named_as_one(tmp_path, monkeypatch):
    from collections import namedtuple

    from cocoeval.llm import _cachefile

    p = tmp_path / "c.sqlite"
    CallCache(p).close()
    st = namedtuple("st", "f_bavail f_frsize")(3, 4096)  # what statvfs says of a full disk
    monkeypatch.setattr(_cachefile.os, "statvfs", lambda _: st)
    e = _cachefile.sqlite_problem(p, sqlite3.OperationalError("database or disk is full"))
    assert "the disk is full (12288 bytes free" in str(e) and "free space" in str(e) and "damaged" not in str(e)

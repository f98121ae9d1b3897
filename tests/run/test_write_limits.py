"""Writes that really fail (issue #24), not faked: under a real file-size limit (RLIMIT_FSIZE in
the subprocess, SIGXFSZ ignored, so writes fail with EFBIG) and, where this process may mount one,
on a small tmpfs (a real ENOSPC), the call cache and the run directory's files give exit 2 and a
message that names the file and the cause, never a traceback and never the "damaged or truncated;
try .recover" of a broken database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..conftest import ROOT

SPEAKERS = ["Project Manager", "Marketing", "User Interface"]
WHOLE = "\n".join(f"{SPEAKERS[i % 3]}: point number {i}" for i in range(30))
LIMITED = """
import resource, runpy, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY))
sys.argv = ["cocoeval", *sys.argv[2:]]
runpy.run_module("cocoeval", run_name="__main__", alter_sys=True)
"""
resource = pytest.importorskip("resource")  # Unix only


def _meeting(n: int, words: int) -> dict:
    return {
        "topic_list": [{"topic": "Budget", "relevant_text_span": [["0", str(n - 1)]]}],
        "meeting_transcripts": [
            {"speaker": SPEAKERS[i % 3], "content": f"Turn {i} " + "budget " * words} for i in range(n)
        ],
    }


def _project(d: Path, srv, *, words: int, cache_policy: str, out: str = "runs/x", cache: str = "cache.sqlite") -> Path:
    """Three meetings (``words`` words a turn), a params file with one setup against the fake server."""
    for i in range(3):
        p = d / "src" / "product" / f"M{i}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(_meeting(80 + i, words)))
    params = d / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "name": "x",
                "out": out,
                "build": {"sources": ["qmsum:src"]},
                "setups": [{"name": "s", "model": f"openai-compatible/fake@{srv.openai_base}"}],
                "llm": {"cache": cache, "cache_policy": cache_policy},
            }
        )
    )
    return params


def _run(cwd: Path, *argv: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", LIMITED, str(limit)] if limit is not None else [sys.executable, "-m", "cocoeval"]
    return subprocess.run([*cmd, *argv], cwd=cwd, capture_output=True, text=True, timeout=180, env=env)


def _clear(out: subprocess.CompletedProcess[str], file: str, *cause: str) -> str:
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "Traceback" not in text and "internal error" not in text, text
    assert "damaged" not in text and ".recover" not in text and "truncated" not in text, text
    assert file in text, text
    assert all(c in text for c in cause), text
    return text


def test_a_file_size_limit_on_the_call_cache_is_named_with_its_limit(srv, tmp_path):
    srv.configure(answers=[{"match": "", "text": WHOLE}])
    _project(tmp_path, srv, words=1, cache_policy="read_write")
    # the benchmark and the run directory's files stay under 60 kB; the cache grows past it
    out = _run(tmp_path, "run", "p.yaml", "--no-progress", limit=60_000)
    text = _clear(out, str(tmp_path / "cache.sqlite"), "file-size limit", "60000 bytes", "ulimit -f")
    assert "answers stored so far are kept" in text
    # the limit lifted, the same command resumes from what the cache kept and ends well
    again = _run(tmp_path, "run", "p.yaml", "--no-progress")
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_file_size_limit_on_the_run_directory_is_named_with_its_limit(srv, tmp_path):
    srv.configure(answers=[{"match": "", "text": WHOLE}])
    _project(tmp_path, srv, words=40, cache_policy="off")  # no cache: the run directory's files are the large ones
    out = _run(tmp_path, "run", "p.yaml", "--no-progress", limit=40_000)
    text = _clear(out, str(tmp_path / "runs" / "x"), "file is too large", "file-size limit", "40000 bytes", "ulimit -f")
    assert "free space" not in text  # the fix for a limit, not for a full disk
    bench = tmp_path / "runs" / "x" / "bench"
    assert not [f for f in bench.iterdir() if f.name.endswith(".tmp")]  # no temporary file left


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 kB tmpfs at tmp_path/disk, or a skip saying why not (mounting needs root, or
    CAP_SYS_ADMIN, outside most containers)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        out = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"cannot mount a tmpfs to fill for real ({e}); the file-size-limit tests above cover EFBIG")
    if out.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs to fill for real ({(out.stderr or out.stdout).strip()}); the "
            "file-size-limit tests above cover EFBIG"
        )
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True, timeout=30)


def test_a_full_disk_under_the_call_cache_says_the_disk_is_full(srv, tmp_path, small_tmpfs):
    srv.configure(answers=[{"match": "", "text": WHOLE}])
    _project(tmp_path, srv, words=1, cache_policy="read_write", cache=str(small_tmpfs / "cache.sqlite"))
    # 64 kB: less than the cache needs (about 150 kB), more than an empty one
    out = _run(tmp_path, "run", "p.yaml", "--no-progress")
    _clear(out, str(small_tmpfs / "cache.sqlite"), "the disk is full", "bytes free")


def test_a_full_disk_under_the_run_directory_says_the_disk_is_full(srv, tmp_path, small_tmpfs):
    srv.configure(answers=[{"match": "", "text": WHOLE}])
    _project(tmp_path, srv, words=40, cache_policy="off", out=str(small_tmpfs / "run"))
    out = _run(tmp_path, "run", "p.yaml", "--no-progress")
    text = _clear(out, str(small_tmpfs / "run"), "the disk is full")
    assert "ulimit" not in text  # the fix for a full disk, not for a limit

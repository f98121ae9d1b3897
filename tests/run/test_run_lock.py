"""One ``cocoeval run`` at a time on a run directory: a second is refused, naming the holder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
import yaml

from cocoeval.run.lock import LOCK_NAME, RunDirLockedError, holder, run_dir_lock

from ..conftest import ROOT

HOLD = """
import sys
from pathlib import Path
from cocoeval.run.lock import run_dir_lock
with run_dir_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.read()
"""


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _holder(run_dir):
    run_dir.mkdir(parents=True, exist_ok=True)
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env()
    )
    assert p.stdout.readline().strip() == "locked"
    return p


def test_a_second_run_on_a_locked_run_dir_is_refused_and_names_the_holder(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"name": "x", "out": "runs/x", "bench": "bench"}))
    run_dir = tmp_path / "runs" / "x"
    h = _holder(run_dir)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "cocoeval", "run", str(params), "--no-progress"],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
        assert out.returncode != 0
        assert f"process {h.pid} on host {socket.gethostname()}" in out.stderr
        assert "in use by another cocoeval run" in out.stderr and f"kill {h.pid}" in out.stderr
        assert "Traceback" not in out.stderr
        assert not (run_dir / "manifest.json").exists()  # nothing of the holder's run was touched
    finally:
        h.kill()
        h.wait()


def test_the_lock_of_a_killed_holder_is_released_by_the_os(tmp_path):
    run_dir = tmp_path / "run"
    h = _holder(run_dir)
    assert holder(run_dir)["pid"] == h.pid
    with pytest.raises(RunDirLockedError), run_dir_lock(run_dir):
        pass
    h.send_signal(signal.SIGKILL)
    h.wait()
    with run_dir_lock(run_dir):  # no stale lock to remove by hand
        assert holder(run_dir)["pid"] == os.getpid()
    assert (run_dir / LOCK_NAME).read_text() == ""  # released: it names nobody

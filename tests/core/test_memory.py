"""``core.memory.tune_for_arrays``: ordinary pages for numpy, glibc's heap kept; once a process;
``COCOEVAL_MEMORY_TUNING=0`` leaves the process as it is. Each case runs in a fresh interpreter."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

PROBE = """
import json
from numpy._core import multiarray
from cocoeval.core.memory import tune_for_arrays
first, again = tune_for_arrays(), tune_for_arrays()
huge = multiarray._set_madvise_hugepage(False)  # returns the setting it replaces
print(json.dumps([first, again, huge]))
"""


def _probe(**env: str) -> list[bool]:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True,
                         env={**os.environ, **env}).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="the allocator knobs are glibc's, on Linux")
def test_tuning_turns_hugepage_advice_off_once_and_can_be_refused():
    first, again, huge = _probe()
    assert first is True and again is False and huge is False  # numpy already told: ordinary pages
    first, again, default = _probe(COCOEVAL_MEMORY_TUNING="0")
    assert first is False and again is False
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ:
        assert default is True  # numpy's own default on Linux 4.6 and later, left as it is


def test_opening_a_run_for_analysis_tunes_the_process(tmp_path, monkeypatch):
    from cocoeval.analysis.frames import open_run_dir
    from cocoeval.core import memory

    from ..analysis.test_stats import make_run
    from ..sim_helpers import write_run_dir

    calls: list[bool] = []
    monkeypatch.setattr(memory, "tune_for_arrays", lambda: calls.append(True) or False)
    write_run_dir(tmp_path / "run", make_run(), {"status": "complete"})
    open_run_dir(tmp_path / "run")
    assert calls == [True]

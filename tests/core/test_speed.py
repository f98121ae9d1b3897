"""The speed tricks of ``core.speed``: ``tune_for_arrays`` (ordinary pages for numpy, glibc's heap
kept; once a process), ``one_blas_thread``, ``gc_paused``; ``COCOEVAL_SPEED_OFF`` turns each off
(``all``: every one). The interpreter-wide cases run in a fresh interpreter."""

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
from cocoeval.core.speed import tune_for_arrays
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
    first, again, default = _probe(COCOEVAL_SPEED_OFF="gc, arrays")
    assert first is False and again is False
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ:
        assert default is True  # numpy's own default on Linux 4.6 and later, left as it is


def test_opening_a_run_for_analysis_tunes_the_process(tmp_path, monkeypatch):
    from cocoeval.analysis.frames import open_run_dir
    from cocoeval.core import speed

    from ..analysis.test_stats import make_run
    from ..sim_helpers import write_run_dir

    calls: list[bool] = []
    monkeypatch.setattr(speed, "tune_for_arrays", lambda: calls.append(True) or False)
    write_run_dir(tmp_path / "run", make_run(), {"status": "complete"})
    open_run_dir(tmp_path / "run")
    assert calls == [True]


BLAS_PROBE = """
import json
import numpy  # its BLAS loaded
from threadpoolctl import threadpool_info, threadpool_limits
from cocoeval.core.speed import one_blas_thread

def blas():
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

threadpool_limits(limits=2, user_api="blas")  # as numpy starts on two cores or more
before = blas()
with one_blas_thread():
    inside = blas()
print(json.dumps([before, inside, blas()]))
"""


def test_one_blas_thread_inside_the_block_and_as_it_was_after():
    """The analyses' small products run on one BLAS thread (``one_blas_thread``, around the
    report and every analysis), the process's setting back after; ``COCOEVAL_SPEED_OFF=blas``
    leaves it as it is."""
    def probe(**env: str) -> list[list[int]]:
        out = subprocess.run([sys.executable, "-c", BLAS_PROBE], capture_output=True, text=True, check=True,
                             env={**os.environ, **env}).stdout
        return json.loads(out.strip().splitlines()[-1])

    before, inside, after = probe()
    assert before and all(n == 2 for n in before) and all(n == 1 for n in inside) and after == before
    before, inside, after = probe(COCOEVAL_SPEED_OFF="blas")
    assert inside == before == after


def test_every_analysis_runs_on_one_blas_thread():
    import dataclasses

    from threadpoolctl import threadpool_info, threadpool_limits

    from cocoeval.analysis import analyses
    from cocoeval.analysis.registry import Params

    from ..analysis.test_stats import make_run

    seen: list[list[int]] = []
    a = dataclasses.replace(analyses.ANALYSES.get("rq1"), fn=lambda run, p: seen.append(
        [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]))
    with threadpool_limits(limits=2, user_api="blas"):  # as numpy starts on two cores or more
        a(make_run(), Params(judge="J", resamples=20, min_n=2))
    assert seen and seen[0] and all(n == 1 for n in seen[0])


def test_gc_paused_inside_the_block_as_it_was_after_and_can_be_refused(monkeypatch):
    import gc

    from cocoeval.core.speed import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # inside another: left to the outer one
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("a bad record")
    assert gc.isenabled()
    gc.disable()  # paused by someone else: left paused
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    monkeypatch.setenv("COCOEVAL_SPEED_OFF", "all")
    with gc_paused():
        assert gc.isenabled()


def _collections_while(read) -> int:
    import gc

    starts = []

    def count(phase, info):
        if phase == "start":
            starts.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        read()
    finally:
        gc.callbacks.remove(count)
    return len(starts)


def test_a_run_is_read_with_no_collection_and_the_same_records(tmp_path, monkeypatch):
    """Reading a run (whole, or lazily part by part) starts at most one garbage collection, the one
    put off to its end: every JSONL reader and ``Run.open`` pause it. With
    ``COCOEVAL_SPEED_OFF=gc`` the same reading collects (so this test can fail), and the
    records are the same."""
    from cocoeval.run import Run

    from ..analysis.test_report_same import paper_scale

    d = tmp_path / "run"
    paper_scale().write_paper_run(d, per_dataset=11, chats=3, turns_n=8)
    runs = []
    paused = [_collections_while(lambda: runs.append(Run.open(d))),
              _collections_while(lambda: runs.append(Run.open(d, lazy=True).load()))]
    monkeypatch.setenv("COCOEVAL_SPEED_OFF", "gc")
    every = _collections_while(lambda: runs.append(Run.open(d)))
    assert max(paused) <= 1 and every > 10  # measured: 1 (the one put off to the end) against 156
    assert runs[0] == runs[1] == runs[2]


def test_speed_off_names_tricks_or_all(monkeypatch):
    from cocoeval.core.speed import TRICKS, off, started_kernel

    monkeypatch.delenv("COCOEVAL_SPEED_OFF", raising=False)
    assert not any(off(t) for t in TRICKS)
    monkeypatch.setenv("COCOEVAL_SPEED_OFF", "gc, kernel")
    assert [t for t in TRICKS if off(t)] == ["gc", "kernel"]
    with started_kernel(".") as km:  # off: none started, papermill starts its own
        assert km is None
    monkeypatch.setenv("COCOEVAL_SPEED_OFF", "all")
    assert all(off(t) for t in TRICKS)

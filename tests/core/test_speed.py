"""The speed tricks of ``core.speed``: ``one_blas_thread`` (in a fresh interpreter: BLAS's threads
are the process's), ``COCOEVAL_SPEED_OFF`` naming tricks or ``all``. The deferred IRI grammar is
tested in tests/cli/test_lazy_imports.py, the report kept in tests/analysis/test_kept_report.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
        out = subprocess.run(
            [sys.executable, "-c", BLAS_PROBE], capture_output=True, text=True, check=True, env={**os.environ, **env}
        ).stdout
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
    a = dataclasses.replace(
        analyses.ANALYSES.get("rq1"),
        fn=lambda run, p: seen.append([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]),
    )
    with threadpool_limits(limits=2, user_api="blas"):  # as numpy starts on two cores or more
        a(make_run(), Params(judge="J", resamples=20, min_n=2))
    assert seen and seen[0] and all(n == 1 for n in seen[0])


def test_speed_off_names_tricks_or_all(monkeypatch):
    from cocoeval.core.speed import TRICKS, off

    monkeypatch.delenv("COCOEVAL_SPEED_OFF", raising=False)
    assert not any(off(t) for t in TRICKS)
    monkeypatch.setenv("COCOEVAL_SPEED_OFF", "blas, report")
    assert [t for t in TRICKS if off(t)] == ["blas", "report"]
    monkeypatch.setenv("COCOEVAL_SPEED_OFF", "all")
    assert all(off(t) for t in TRICKS)

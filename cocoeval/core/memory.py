"""How a process that analyses a run gets its memory: fresh pages are the analyses' hidden cost.

The bootstrap and permutation kernels make arrays of tens of megabytes (1,000 resamples of a few
thousand conversations), one after another. By default each is a fresh mapping: numpy asks Linux
for transparent huge pages on every array of 4 MB or more (``madvise``), and glibc maps blocks of
32 MB or more on their own and unmaps them when freed, so every new array faults its pages in
again. Where a page fault is dear (a sandboxed or virtualised kernel: measured 0.3 s to touch
43 MB, against 0.003 s for memory already held) that was most of an analysis's time: the
judge-free analysis of the paper-shaped run took 6.6 s, 1.8 s with ``tune_for_arrays()``.

``tune_for_arrays()`` asks numpy for ordinary pages and glibc to serve blocks up to 64 MB from
its heap and to keep up to 128 MB of freed heap for the next arrays. It changes no number, only
where the memory comes from; a process keeps more of what it used (the warm report's peak rose from
680 to 730 MB on the paper's shape). Set ``COCOEVAL_MEMORY_TUNING=0`` to leave the process as it
is. Called where a run is opened for analysis (``analysis.frames.open_run_dir``), once a process.

``one_blas_thread()``: the analyses' matrix products are small (1,000 resamples × a few hundred
instances); a second BLAS thread does not make them faster, and OpenBLAS's threads spin between
products on the core the report's figure workers render on (measured on the paper's shape: the
report's CPU 15-17 s with two BLAS threads, 12-14 s with one, and its bytes the same: OpenBLAS
splits a product's rows between threads, never a sum). The report and every analysis run in it;
``COCOEVAL_MEMORY_TUNING=0`` leaves the threads as they are too.

``gc_paused()``: reading a file of records makes millions of containers (dicts, lists, pydantic
models), none of them garbage; each few hundred made start a collection of the youngest, and their
growth full collections that walk every object made so far. Paused while records are read (every
JSONL reader, a run read whole), they were half the reading time: the paper-shaped run's 17,600
records read in 1.7 s instead of 3.0. Nothing read changes; ``COCOEVAL_MEMORY_TUNING=0`` leaves
the collector as it is."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

MMAP_THRESHOLD = 64 * 2**20
"""Blocks up to this size come from glibc's heap, not a mapping of their own (``M_MMAP_THRESHOLD``)."""
TRIM_THRESHOLD = 128 * 2**20
"""Freed heap kept for the next arrays before glibc gives it back (``M_TRIM_THRESHOLD``)."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_done: list[bool] = []


def _refused() -> bool:
    """Whether ``COCOEVAL_MEMORY_TUNING=0`` asks to leave the process as it is."""
    return os.environ.get("COCOEVAL_MEMORY_TUNING", "1").strip() == "0"


def tune_for_arrays() -> bool:
    """Ordinary pages for numpy's arrays and glibc's heap kept for them (see the module); once a
    process, and nothing where ``COCOEVAL_MEMORY_TUNING=0``. Returns whether anything was changed
    (False too on a system without these knobs: not Linux, not glibc)."""
    if _done or _refused():
        return False
    _done.append(True)
    changed = False
    import importlib

    for where in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2, numpy 1
        try:
            importlib.import_module(where)._set_madvise_hugepage(False)  # as NUMPY_MADVISE_HUGEPAGE=0 would
            changed = True
            break
        except (ImportError, AttributeError):
            continue
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        mmap_set = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)  # 1: set
        trim_set = libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        changed = changed or bool(mmap_set and trim_set)
    except (OSError, AttributeError):  # not glibc
        pass
    return changed


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread inside the block, as it was after (see the module); nothing
    where ``COCOEVAL_MEMORY_TUNING=0``."""
    if _refused():
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused inside the block (see the module), as it was
    after: a block inside another, or where something else paused it, leaves it to that one;
    nothing where ``COCOEVAL_MEMORY_TUNING=0``."""
    if _refused() or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

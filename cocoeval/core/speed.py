"""Speed tricks: what makes cocoeval faster without changing a byte of what it writes. Nothing else
depends on them; a newcomer can ignore this module (and ``analysis.speed``, the report kept beside a
run, which needs the analysis layer and so cannot live here). Each trick has a name, and
``COCOEVAL_SPEED_OFF`` turns tricks off: a comma-separated list of names (``arrays,gc``), or
``all``. The outputs are the same either way; only the time changes (``benchmarks/speed_tricks.py``
measures each trick by turning it off; docs/testing.md has the figures).

- ``arrays`` (``tune_for_arrays``, where a run is opened for analysis): the bootstrap and
  permutation kernels make arrays of tens of megabytes one after another. By default numpy asks
  Linux for transparent huge pages on every array of 4 MB or more and glibc maps blocks of 32 MB or
  more on their own and unmaps them when freed, so every new array faults its pages in again, which
  is dear on a sandboxed or virtualised kernel. This asks numpy for ordinary pages and glibc to serve
  blocks up to 64 MB from its heap and to keep up to 128 MB of freed heap for the next arrays: the
  memory comes from elsewhere, no number changes, and the process keeps more of what it used.
- ``gc`` (``gc_paused``, around every JSONL reader, a run read whole and the judge-free statistics'
  burst of token lists): reading records makes millions of containers, none of them garbage; each
  few hundred made start a collection of the youngest, and their growth full collections that walk
  every object made so far. Paused, the collector runs once at the end instead.
- ``blas`` (``one_blas_thread``, around the report and every analysis): the analyses' matrix
  products are small (1,000 resamples × a few hundred instances); a second OpenBLAS thread does not
  make them faster and spins between products on the core the report's figure workers render on.
  OpenBLAS splits a product's rows between threads, never a sum, so the bytes are the same.
- ``iri`` (``defer_iri_grammar``, when ``cocoeval.analysis`` is imported): jsonschema, which Altair
  imports, imports ``rfc3987_syntax`` when that optional package is installed (Jupyter brings it),
  and that package compiles 38 Lark grammars at import, for ``iri`` format checks that neither
  Altair nor cocoeval makes. A stand-in module takes its place and imports it at its first use.
- ``kernel`` (``started_kernel``, for each notebook cocoeval executes): the notebook's kernel is
  started before papermill is imported, and told at once to import the analysis the notebooks'
  first cell imports, so the kernel's start and its imports overlap papermill's import and the
  reading of the notebook.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

TRICKS = ("arrays", "gc", "blas", "iri", "kernel", "report")
"""The names ``COCOEVAL_SPEED_OFF`` takes (``report``: ``analysis.speed``, the report kept)."""


def off(trick: str) -> bool:
    """Whether ``COCOEVAL_SPEED_OFF`` turns ``trick`` off (it names it, or says ``all``)."""
    names = {n.strip() for n in os.environ.get("COCOEVAL_SPEED_OFF", "").split(",")}
    return trick in names or "all" in names


# -- arrays: ordinary pages for numpy, glibc's heap kept --

MMAP_THRESHOLD = 64 * 2**20
"""Blocks up to this size come from glibc's heap, not a mapping of their own (``M_MMAP_THRESHOLD``)."""
TRIM_THRESHOLD = 128 * 2**20
"""Freed heap kept for the next arrays before glibc gives it back (``M_TRIM_THRESHOLD``)."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_tuned: list[bool] = []


def tune_for_arrays() -> bool:
    """Ordinary pages for numpy's arrays and glibc's heap kept for them (``arrays`` above); once a
    process. Returns whether anything was changed (False too on a system without these knobs: not
    Linux, not glibc)."""
    if _tuned or off("arrays"):
        return False
    _tuned.append(True)
    changed = False
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


# -- gc: the collector paused while records are read --

@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused inside the block (``gc`` above), as it was after: a
    block inside another, or where something else paused it, leaves it to that one."""
    if off("gc") or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# -- blas: the analyses' small products on one thread --

@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread inside the block (``blas`` above), as it was after."""
    if off("blas"):
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


# -- iri: jsonschema's RFC 3987 grammar built at its first use --

IRI_PACKAGE = "rfc3987_syntax"


def defer_iri_grammar() -> None:
    """Put a stand-in for ``rfc3987_syntax`` in ``sys.modules`` (``iri`` above) that imports the
    real package at its first use, so a program that does check IRIs gets the same answers, later.
    Nothing happens when the package is absent, already imported, or when jsonschema was imported
    before (it holds the real function then)."""
    if off("iri") or IRI_PACKAGE in sys.modules or "jsonschema" in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(IRI_PACKAGE)
    except (ImportError, ValueError):
        return
    if spec is not None:
        sys.modules[IRI_PACKAGE] = _Deferred(IRI_PACKAGE, spec)


class _Deferred(types.ModuleType):
    """A module standing in for ``name`` until its first use: ``is_valid_syntax`` (the one name
    jsonschema imports from it) and any other attribute import the real module, which then
    replaces the stand-in in ``sys.modules``."""

    def __init__(self, name: str, spec: Any) -> None:
        super().__init__(name, f"stand-in for {name} until its first use (cocoeval.core.speed)")
        self.__spec__ = spec
        if spec.submodule_search_locations is not None:  # asked by every ``from name import x``
            self.__path__ = list(spec.submodule_search_locations)
        self._real: types.ModuleType | None = None

        def is_valid_syntax(*args: Any, **kwargs: Any) -> Any:
            return self._load().is_valid_syntax(*args, **kwargs)

        self.is_valid_syntax = is_valid_syntax

    def _load(self) -> types.ModuleType:
        if self._real is None:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            self._real = importlib.import_module(self.__name__)
        return self._real

    def __getattr__(self, name: str) -> Any:
        if name == "_real":  # before __init__ set it
            raise AttributeError(name)
        return getattr(self._load(), name)


# -- kernel: a notebook's kernel started before papermill is imported --

WARM_UP = "import cocoeval.notebooks.context"
"""What a notebook's kernel imports before papermill runs its first cell (every notebook's first
code cell imports this module: Altair, polars and the analysis)."""


@contextmanager
def started_kernel(cwd: str) -> Iterator[Any]:
    """A ``python3`` kernel for papermill (``execute_notebook(km=...)``), started as nbclient starts
    one (``cwd``, its IPython history in memory) but before papermill is imported, and told at
    once to import ``WARM_UP`` silently (no execution count, no output in the notebook); shut down
    as nbclient does (gracefully) on leaving. None where ``kernel`` is off: papermill starts its own."""
    if off("kernel"):
        yield None
        return
    from jupyter_client.blocking import BlockingKernelClient
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.utils import run_sync

    km = AsyncKernelManager(kernel_name="python3")
    warm = BlockingKernelClient()
    try:
        run_sync(km.start_kernel)(extra_arguments=["--HistoryManager.hist_file=:memory:"], cwd=cwd)
        warm.load_connection_info(km.get_connection_info())
        warm.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        warm.execute(WARM_UP, silent=True, store_history=False)
        yield km
    finally:  # whatever happened: no kernel left running
        warm.stop_channels()
        if km.has_kernel and run_sync(km.is_alive)():
            run_sync(km.shutdown_kernel)(now=False)  # its resources cleaned up too
        else:
            run_sync(km.cleanup_resources)()

"""Where a run's analysis results are kept: in this process (``per_run``: made once per run and
question while the run's files are unchanged, ``run_signature``) and beside the run
(``CACHE_DIR``: the frames ``frames.open_run_dir`` keeps after reading the records once, read back
by ``kept_frame`` and ``kept_facts``; ``keep_folder`` writes such a folder whole or not at all).
Every derived frame (``frames``, ``convstats``, ``coverage``) asks this module, which asks none
of them: the analysis modules form no circle."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import polars as pl

if TYPE_CHECKING:
    from cocoeval.run import Run

__all__ = [
    "CACHE_DIR",
    "KEPT_FRAMES",
    "OPEN_RUNS",
    "OUTPUT_DIRS",
    "code_digest",
    "integrity_warnings",
    "keep_folder",
    "kept_facts",
    "kept_frame",
    "per_run",
    "run_signature",
]

T = TypeVar("T")
log = logging.getLogger(__name__)

CACHE_DIR = "cache"
"""The folder of a run directory where its frames are kept (``run_frames``)."""
KEPT_FRAMES = 4
"""How many versions of a run's frames its ``CACHE_DIR`` keeps (the most recently written)."""
OUTPUT_DIRS = frozenset({"report", "notebooks", "figures", "bench", CACHE_DIR})
"""Folders of a run directory that ``Run.open`` does not read (what the report and the notebooks
write, the benchmark, the kept frames): changing them does not invalidate the cached frames."""
_CACHE: dict[tuple[Any, ...], tuple[Any, Any]] = {}
"""(what, run directory or id of an in-memory Run, ...) -> (signature when made, value)."""
OPEN_RUNS = 2
"""How many run directories ``open_run_dir`` keeps read in a process (the most recently read)."""


def run_signature(run_dir: str | Path) -> tuple[tuple[str, int, int], ...]:
    """Every file a run directory holds (but ``OUTPUT_DIRS``) with its mtime (ns) and size: what
    the cached frames of the run are valid for."""
    out = []
    stack = [Path(run_dir)]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if not (d == Path(run_dir) and e.name in OUTPUT_DIRS):
                    stack.append(Path(e.path))
            elif e.is_file():
                st = e.stat()
                out.append((e.path, st.st_mtime_ns, st.st_size))
    return tuple(sorted(out))


def per_run(run: Run, what: tuple[Any, ...], make: Callable[[], T]) -> T:
    """``make()`` once per run and ``what`` in this process: for the same ``Run`` object while it
    lives and, for an opened run, while its directory's files (``run_signature``) are unchanged,
    so that every analysis of a report or a notebook kernel shares one computation."""
    key = (id(run), *what)
    sig = (run.state(), run_signature(run.path) if run.path is not None else None)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == sig:
        return cast(T, hit[1])
    value = make()
    if not any(k[0] == id(run) for k in _CACHE):
        weakref.finalize(run, _forget, id(run))
    _CACHE[key] = (sig, value)
    return value


def _forget(run_id: int) -> None:
    for k in [k for k in _CACHE if k[0] == run_id]:
        del _CACHE[k]


def opened_run(d: Path, sig: tuple[tuple[str, int, int], ...]) -> Run | None:
    """The ``Run`` this process opened from the run folder ``d`` (resolved), while its files are
    still ``sig`` (``run_signature``); None otherwise."""
    hit = _CACHE.get(("open", str(d)))
    return cast("Run", hit[1]) if hit is not None and hit[0] == sig else None


def make_room_for(d: Path) -> None:
    """Forget what was held for ``d`` and, beyond the ``OPEN_RUNS`` - 1 most recent other run
    folders, the oldest ones (their kept folders go with them)."""
    others = [k for k in _CACHE if k[0] == "open" and k != ("open", str(d))]
    for k in others[: max(0, len(others) - (OPEN_RUNS - 1))]:
        del _CACHE[k]
        _CACHE.pop(("kept", k[1]), None)
    _CACHE.pop(("open", str(d)), None)
    _CACHE.pop(("kept", str(d)), None)


def hold(d: Path, sig: tuple[tuple[str, int, int], ...], run: Run, folder: Path | None) -> None:
    """Hold ``run`` as the one opened from ``d`` while its files are ``sig``, with the folder its
    frames are kept in (None: none kept), which ``kept_frame`` and ``kept_facts`` then read."""
    _CACHE[("open", str(d))] = (sig, run)
    if folder is not None:
        _CACHE[("kept", str(d))] = (sig, folder)


def kept_frame(run: Run, name: str, schema: dict[str, Any]) -> pl.DataFrame | None:
    """The frame ``name`` that ``open_run_dir`` kept with the frames of ``run`` (the judge-free
    statistics of every conversation, ``convstats``, and their turn-taking, ``turn_taking``, the
    speakers of every turn, ``speakers``, the self-selection counts, ``self_selection``, and the
    classifier test's documents, ``documents``: made from the records when they were read, so that
    a later process needs no record for them),
    for the run object it holds while its records are as read; None otherwise (compute it), or
    when the kept file has other columns than ``schema`` (said)."""
    folder = _held_folder(run)
    if folder is None or not (folder / f"{name}.arrow").exists():  # not kept (its making failed): made here
        return None
    try:
        return _read_kept(folder / f"{name}.arrow", schema)
    except (OSError, ValueError, pl.exceptions.PolarsError) as e:
        log.warning("the kept frame %s cannot be read (%s): made again from the run's files", folder / name, e)
        return None


def _held(run: Run) -> str | None:
    """The run folder (resolved) of ``run`` when it is the run object ``open_run_dir`` holds for
    it and its records are as read: only then is what was kept beside it this run's."""
    if run.path is None or not run.as_read:
        return None
    d = str(run.path.resolve())
    return d if _CACHE.get(("open", d), (None, None))[1] is run else None


def _held_folder(run: Run) -> Path | None:
    """Where ``open_run_dir`` kept what it made of ``run`` (``_held``), or None."""
    d = _held(run)
    return None if d is None or ("kept", d) not in _CACHE else cast(Path, _CACHE[("kept", d)][1])


def _read_kept(path: Path, schema: dict[str, Any]) -> pl.DataFrame:
    """A kept frame, refused (ValueError) when it has other columns than ``schema``."""
    df = pl.read_ipc(path)
    if dict(df.schema) != schema:
        raise ValueError(f"{path.name} has other columns than the frame")
    return df


def integrity_warnings(run: Run) -> list[str]:
    """``run.integrity_warnings()``, as kept with its frames when they are (``kept_facts``: no
    record read)."""
    kept = (kept_facts(run) or {}).get("integrity_warnings")
    if isinstance(kept, list) and all(isinstance(w, str) for w in kept):
        return kept
    return run.integrity_warnings()


def kept_facts(run: Run) -> dict[str, Any] | None:
    """What ``open_run_dir`` kept with the frames of ``run`` besides them (``{"coverage":
    coverage.run_facts(run), "integrity_warnings": run.integrity_warnings()}``), for the run
    object it holds while its records are as read; None otherwise (compute them from the
    records)."""
    folder = _held_folder(run)
    if folder is None:
        return None
    try:
        facts = json.loads((folder / "facts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        log.warning(
            "the kept facts of %s cannot be read (%s): made again from the run's files (delete its %s "
            "folder to have them kept anew)",
            run.path,
            e,
            CACHE_DIR,
        )
        return None
    return facts if isinstance(facts, dict) else None


@functools.cache
def code_digest(libs: tuple[str, ...], every_file: bool = False) -> str:
    """SHA-256 of cocoeval's code (its modules; ``every_file``: every file it ships, the taxonomy
    and the HTML report's assets too) and of the installed versions of ``libs`` (distribution
    names): what is kept beside a run (its frames, its report) is never used by other code."""
    from importlib.metadata import PackageNotFoundError, version

    import cocoeval

    def v(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "absent"

    h = hashlib.sha256(" ".join(f"{d}={v(d)}" for d in libs).encode())
    root = Path(cocoeval.__file__).parent
    files = root.rglob("*") if every_file else root.rglob("*.py")
    for f in sorted(p for p in files if "__pycache__" not in p.relative_to(root).parts and p.is_file()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def keep_folder(folder: Path, fill: Callable[[Path], None], *, newest: int, what: str) -> None:
    """Keep ``folder`` in a run's ``CACHE_DIR`` whole or not at all: ``fill(tmp)`` writes its files
    into a temporary folder beside it, which then becomes ``folder`` (where another process kept
    it meanwhile, theirs stays: the same bytes); then all but the ``newest`` folders named with the
    same prefix (``frames-``, ``report-``) are removed. A read-only run folder or a full disk keeps
    nothing (logged; the ``what`` of the run is made again next time)."""
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    prefix = folder.name.split("-")[0] + "-"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        fill(tmp)
        try:
            os.replace(tmp, folder)  # whole or not at all
        except OSError:
            if not folder.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process kept it first: the same bytes
        kept = sorted(
            (p for p in folder.parent.iterdir() if p.name.startswith(prefix)),
            key=lambda p: p.stat().st_mtime_ns,
            reverse=True,
        )
        for old in kept[newest:]:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as e:
        log.info("the %s of the run cannot be kept in %s (%s)", what, folder, e)
        shutil.rmtree(tmp, ignore_errors=True)

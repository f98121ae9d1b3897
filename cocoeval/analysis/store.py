"""Where a run is opened for analysis and what is made of it is kept: ``RunStore``.

A ``RunStore`` owns opening a run directory (the manifest at once, each record — instances,
continuations, judgments, annotations — at its first use, every file checked against the SHA-256
it had at opening), one line of a record when only that is wanted (the conversation viewer), the
in-process memo (``per_run``: made once per run and question while the run's files are unchanged,
``run_signature``) and what is kept beside the run on disk (``RunStore.open_kept``: the first
opening of a run's content reads its records once and keeps every registered frame in its
``CACHE_DIR``, keyed by the content, this code and the taxonomy — the tables computed from the
frames when first asked for, ``keep_late``, or by ``keep_all`` at the end of ``cocoeval run``; later
ones read no record, only ``kept_frame`` and ``kept_facts``; ``keep_folder`` writes such a folder whole or not at all). A
``Run`` (``cocoeval.run``) is the plain record read whole; the analyses take either (``RunLike``).

Frames register here as pure functions of the run (``DERIVED``): the run's own frames
(``frames.Frames``, registered by ``frames``) and derived ones (``derived_frame``); JSON facts
likewise (``FACTS``). Each is made once per run, kept and read back from there, so that adding
one is one decorated function. Every analysis module asks this one, which asks none of them: no
circle (``frames.open_run_dir``, the public door, imports the modules that register)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import inspect
import json
import logging
import os
import shutil
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeAlias, TypeVar, cast

import polars as pl

from cocoeval.core.jsonio import parse_json_line, read_text, recorded_reads, validate
from cocoeval.core.schema import Continuation, Instance, Judgment
from cocoeval.core.speed import off, one_blas_thread
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.run import Run
from cocoeval.run.rundir import (
    HUMAN_PREFIX,
    RECORDS,
    JudgeConfigs,
    Manifest,
    SetupConfigs,
    changed_since_opening,
    checked_part,
    checked_turns,
    configs,
    file_digests,
    instance_hashes,
    parse_part,
    part_of,
    read_manifest,
    run_folder,
    stale_reason,
    turn_char_limits,
)

__all__ = [
    "CACHE_DIR",
    "DERIVED",
    "FACTS",
    "KEPT_FRAMES",
    "KEY_LIBS",
    "OPEN_RUNS",
    "OUTPUT_DIRS",
    "DerivedFrame",
    "RunLike",
    "RunStore",
    "code_digest",
    "derived_facts",
    "derived_frame",
    "frames_key",
    "held_folder",
    "integrity_warnings",
    "is_own_frames",
    "keep_all",
    "keep_folder",
    "keep_late",
    "kept_facts",
    "kept_folder",
    "kept_frame",
    "made_for_run",
    "made_once",
    "memo_holds",
    "per_run",
    "register_frame",
    "register_frames_maker",
    "run_signature",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., pl.DataFrame])
log = logging.getLogger(__name__)

CACHE_DIR = "cache"
"""The folder of a run directory where its frames are kept (``run_frames``)."""
KEPT_FRAMES = 4
"""How many versions of a run's frames its ``CACHE_DIR`` keeps (the most recently written)."""
OUTPUT_DIRS = frozenset({"report", "notebooks", "figures", "bench", "inspect", CACHE_DIR})
"""Folders of a run directory that ``Run.open`` does not read (what the report, the notebooks and
``cocoeval export`` write, the benchmark, the kept frames): changing them does not invalidate the
cached frames."""
_CACHE: dict[tuple[Any, ...], tuple[Any, Any]] = {}
"""(what, run directory or id of an in-memory run, ...) -> (signature when made, value)."""
OPEN_RUNS = 2
"""How many run directories ``RunStore.open_kept`` keeps open in a process (the most recently opened)."""
BUILTIN_FRAMES = (
    "cocoeval.analysis.frames",
    "cocoeval.analysis.convstats",
    "cocoeval.analysis.documents",
    "cocoeval.analysis.detectability",
    "cocoeval.analysis.convcompare",
    "cocoeval.analysis.turntaking",
    "cocoeval.analysis.paired",
    "cocoeval.analysis.leaderboard",
)
"""The modules whose import registers the built-in kept frames and facts, imported by name before
a run's frames are made (as a ``Registry`` imports its ``builtins``): they import this module, so
it cannot import them itself."""
KEY_LIBS = ("polars", "pydantic", "numpy", "scipy", "scikit-learn")
"""The libraries whose versions are part of the key of what is kept beside a run (they read the
records and compute the kept frames)."""


class RunStore:
    """A run directory opened for analysis: ``manifest`` at once, each record (``instances``,
    ``continuations``, ``judgments``, ``human``) read whole at its first use, ``instance`` and
    ``continuation`` parsed from their own line while their record is unread, ``run()`` the whole
    ``Run``. Every file is checked, when read, against the SHA-256 it had at opening: one changed
    since is an InputError (open the run again), never a mix of two versions. It answers what a
    ``Run`` answers (``stale_reason``, ``current_continuations``, ``setup_configs``...), so the
    analyses take either (``RunLike``); ``memo`` and ``kept`` are the in-process memo and the
    frames kept beside the run."""

    def __init__(self, path: Path, manifest: Manifest, digests: dict[str, str]) -> None:
        self.path: Path = path
        self.manifest: Manifest = manifest
        self._digests = digests
        """{file in the run: SHA-256 of its bytes at opening} (``digest``)."""
        self._parts: dict[str, Any] = {}
        """The records read so far (until ``run()`` holds them all)."""
        self._run: Run | None = None
        self._lines: dict[str, dict[str, tuple[int, str]]] = {}
        """{file in the run: {instance id: (line number, line)}} (``_lines_of``)."""
        self._one: dict[tuple[str, str], Any] = {}
        """{(file in the run, instance id): the record parsed from its line} (``_record``)."""
        self._as_read: dict[str, Any] = {}
        """{record: its shape when read} (``state``)."""

    @classmethod
    def open(cls, path: str | Path) -> RunStore:
        """Open a run directory: read its manifest (a missing folder or a bad manifest is an error
        naming it) and take the SHA-256 of every record's file; nothing else is read yet."""
        d = run_folder(path)
        digests = file_digests(d)
        with recorded_reads() as seen:
            manifest = read_manifest(d)
        digests.update({Path(f).relative_to(d).as_posix(): h for f, h in seen.items()})  # the bytes parsed
        return cls(d, manifest, digests)

    @classmethod
    def open_kept(cls, path: str | Path, taxonomy: Taxonomy) -> RunStore:
        """The run directory opened once per process while its files are unchanged
        (``run_signature``: the same store is returned, so its frames and its memo are shared too;
        the last ``OPEN_RUNS`` directories opened are held), with what is kept beside it.

        Every registered frame (``DERIVED``; a lazy one when first asked for, ``keep_late``) and
        fact (``FACTS``) of the run for ``taxonomy`` is kept in its ``CACHE_DIR`` under
        ``kept_folder``: made right after the records are read whole (a bad file is an error here, as ``Run.open`` gives it; a derived frame that cannot
        be made is not kept and its analysis says why), before anything else holds them. When they
        are kept already (this content was read whole and valid by this code), no record is read:
        an analysis that needs more than the kept frames (the texts, for the viewer) reads the
        record then, or one line of it. A run folder that cannot be written keeps nothing (read
        whole each time)."""
        d = Path(path).resolve()
        sig = run_signature(d)
        if (hit := opened_run(d, sig)) is not None:
            return hit
        store = cls.open(path)
        make_room_for(d)
        folder = kept_folder(store, taxonomy)
        if folder is not None and not folder.is_dir() and not _writable(folder.parent):
            folder = None  # nothing can be kept: nothing is made ahead of its use
        if folder is not None and not folder.is_dir():
            store.run()  # read it all now: a bad file is an error here
            _import_builtins()
            with one_blas_thread():  # as the report and every analysis compute: the same bytes
                made = _make_derived(store, taxonomy)
            _keep(folder, made, {name: fact(store) for name, fact in FACTS.items()})
            if folder.is_dir():  # the records go: what follows needs the frames, rarely a text
                again = cls.open(path)
                if kept_folder(again, taxonomy) == folder:  # (unless a file changed meanwhile)
                    store = again
        elif folder is None:
            store.run()
        hold(d, sig, store, folder if folder is not None and folder.is_dir() else None, taxonomy.hash)
        return store

    # ------------------------------------------------------------------ the records
    @property
    def instances(self) -> list[Instance]:
        return cast("list[Instance]", self._part("instances"))

    @property
    def continuations(self) -> dict[str, list[Continuation]]:
        return cast("dict[str, list[Continuation]]", self._part("continuations"))

    @property
    def judgments(self) -> dict[str, list[Judgment]]:
        """{LLM judge name: its judgments}."""
        return cast("dict[str, list[Judgment]]", self._part("judgments"))

    @property
    def human(self) -> dict[str, list[Judgment]]:
        """{annotator: their judgments}."""
        return cast("dict[str, list[Judgment]]", self._part("human"))

    @property
    def unread(self) -> set[str]:
        """The records not read yet."""
        return set() if self._run is not None else set(RECORDS) - set(self._parts)

    def run(self) -> Run:
        """The whole run, every record read (once; in the order of ``RECORDS``: the first bad
        file is the error), as ``Run.open`` reads it; the same object each time, holding the same
        lists as this store's records."""
        if self._run is None:
            for part in RECORDS:
                self._part(part)
            self._run = Run.model_construct(path=self.path, manifest=self.manifest, **self._parts)
            self._parts = {}
        return self._run

    def _part(self, part: str) -> Any:
        if self._run is not None:
            return getattr(self._run, part)
        if part not in self._parts:
            self._read(part)
        return self._parts[part]

    def _read(self, part: str) -> None:
        d = self.path
        refs = None if part == "instances" else {i.id: len(i.reference) for i in self.instances}
        was = {k: v for k, v in self._digests.items() if part_of(k) == part}
        with recorded_reads() as seen:  # the files of the part as they are now: one added or gone shows too
            value = parse_part(d, part)
        got = {Path(f).relative_to(d).as_posix(): h for f, h in seen.items()}
        if got != was:
            raise changed_since_opening(d, sorted(set(was.items()) ^ set(got.items()))[0][0])
        if refs is not None:
            value = checked_part(part, value, refs, self.manifest)
        self._parts[part] = value
        self._as_read[part] = _shape_of(value)

    def instance(self, instance_id: str) -> Instance | None:
        """The instance ``instance_id`` (None: the run has none), as ``instances`` holds it; while
        the instances are unread, parsed from its own line alone."""
        if "instances" not in self.unread:
            return next((i for i in self.instances if i.id == instance_id), None)
        return cast("Instance | None", self._record("instances.jsonl", instance_id))

    def continuation(self, setup: str, instance_id: str) -> Continuation | None:
        """Setup ``setup``'s continuation of instance ``instance_id`` (None: it has none), as
        ``continuations`` holds it (read against its instance, ``checked_turns``); while the
        continuations are unread, parsed from its own line alone: a viewer of one conversation
        reads one line per setup, not the run."""
        if "continuations" not in self.unread:
            return next((c for c in self.continuations.get(setup, []) if c.instance_id == instance_id), None)
        return cast("Continuation | None", self._record(f"continuations/{setup}.jsonl", instance_id))

    def _record(self, rel: str, key: str) -> Any:
        """One record of an unread part, from the line of ``key`` in file ``rel`` (``_lines_of``),
        parsed and checked as reading the whole file would (its errors name the file and line)."""
        if (rel, key) in self._one:
            return self._one[rel, key]
        lines = self._lines_of(rel)
        if lines is None:  # the part was read whole instead
            return self.instance(key) if rel == "instances.jsonl" else self.continuation(PurePosixPath(rel).stem, key)
        if key not in lines:
            return None
        n, line = lines[key]
        f = self.path / rel
        if rel == "instances.jsonl":
            record: Any = validate(Instance, parse_json_line(line, f, n), file=f, record=f"line {n}")
        else:
            c = validate(Continuation, parse_json_line(line, f, n), file=f, record=f"line {n}")
            ref = self.instance(c.instance_id)
            record = checked_turns(
                c,
                None if ref is None else len(ref.reference),
                turn_char_limits(self.manifest).get(PurePosixPath(rel).stem),
            )
        self._one[rel, key] = record
        return record

    def _lines_of(self, rel: str) -> dict[str, tuple[int, str]] | None:
        """{instance id: (line number, line)} of file ``rel``, its bytes checked against the
        SHA-256 they had at opening (changed since: the InputError of ``_read``); {} for a file
        the run did not have then. None where a line cannot be indexed by its id (not JSON, no id,
        an id twice): the part is then read whole, which says what is wrong as ``Run.open``
        would, and the caller looks in what it read."""
        if rel in self._lines:
            return self._lines[rel]
        if rel not in self._digests:
            return {}
        f = self.path / rel
        with recorded_reads() as seen:
            text = read_text(f)
        if seen.get(str(f)) != self._digests[rel]:
            raise changed_since_opening(self.path, rel)
        field = "id" if rel == "instances.jsonl" else "instance_id"
        out: dict[str, tuple[int, str]] = {}
        for n, line in enumerate(text.split("\n"), start=1):  # as ``iter_jsonl`` cuts lines
            if not line.strip():
                continue
            try:
                key = json.loads(line).get(field)
            except (ValueError, AttributeError, RecursionError):
                key = None
            if not isinstance(key, str) or key in out:
                self._part(part_of(rel))  # read whole: its error, or the records to look in
                return None
            out[key] = (n, line)
        self._lines[rel] = out
        return out

    def names(self, part: str) -> list[str]:
        """The names ``part`` is keyed by, in its order, without reading an unread record: the
        setups (``"continuations"``), the LLM judges (``"judgments"``), the annotators
        (``"human"``), or both as ``all_judgments`` names them (``"all_judgments"``)."""
        if part == "all_judgments":
            return [*self.names("judgments"), *(f"{HUMAN_PREFIX}{a}" for a in self.names("human"))]
        if part not in RECORDS[1:]:
            raise ValueError(f"part must be one of {', '.join(RECORDS[1:])} or all_judgments, not {part!r}")
        if part in self.unread:
            return [PurePosixPath(k).name[: -len(".jsonl")] for k in self._digests if part_of(k) == part]
        return list(self._part(part))

    # ------------------------------------------------------------------ what a Run answers
    def stale_reason(self, name: str, item: Continuation | Judgment) -> str | None:
        """``Run.stale_reason``; while the instances are unread, from the instance's own line."""
        now = None
        if item.instance_hash is not None:
            if "instances" in self.unread:
                inst = self.instance(item.instance_id)
                now = None if inst is None else inst.content_hash()
            else:
                now = instance_hashes(self, self.instances).get(item.instance_id)
        return stale_reason(self.manifest, name, item, now)

    @property
    def current_continuations(self) -> dict[str, list[Continuation]]:
        """``continuations`` without the stale ones (``stale_reason``): what statistics count."""
        return {name: [c for c in cs if self.stale_reason(name, c) is None] for name, cs in self.continuations.items()}

    @property
    def all_judgments(self) -> dict[str, list[Judgment]]:
        """``Run.all_judgments``."""
        return {**self.judgments, **{f"{HUMAN_PREFIX}{a}": js for a, js in self.human.items()}}

    def setup_configs(self) -> SetupConfigs:
        """``Run.setup_configs`` (the manifest alone)."""
        return configs(self.manifest, self.path, "setups")

    def judge_configs(self) -> JudgeConfigs:
        """``Run.judge_configs`` (the manifest alone)."""
        return configs(self.manifest, self.path, "judges")

    def integrity_warnings(self) -> list[str]:
        """``Run.integrity_warnings`` of the whole run (``integrity_warnings(store)`` reads them
        where they were kept)."""
        return self.run().integrity_warnings()

    # ------------------------------------------------------------------ identity, memo, kept
    @property
    def digest(self) -> str:
        """SHA-256 of what the records are read from (the manifest, instances, continuations and
        judgments files: their paths in the run and their bytes at opening): the key of what is
        computed from the files alone (``frames.run_frames`` keeps the frames under it)."""
        return hashlib.sha256(json.dumps(sorted(self._digests.items())).encode()).hexdigest()

    def state(self) -> tuple[Any, ...]:
        """What of the records in memory changed since they were read: for each of ``RECORDS``,
        ``"as read"`` while it is unread or still the lists read (the same list objects holding
        the same items), else which lists and items it holds now (an item changed in place is not
        seen: pydantic models are replaced with ``model_copy``). The memo (``per_run``) is keyed
        by it."""
        out: list[Any] = []
        for part in RECORDS:
            if part in self.unread:
                out.append("as read")
                continue
            shape = _shape_of(self._part(part))
            out.append("as read" if self._as_read.get(part) == shape else shape)
        return tuple(out)

    @property
    def as_read(self) -> bool:
        """Whether every record is as read from the files (``state``)."""
        return all(s == "as read" for s in self.state())

    def memo(self, what: tuple[Any, ...], make: Callable[[], T]) -> T:
        """``per_run(self, what, make)``: ``make()`` once while the run is unchanged."""
        return per_run(self, what, make)

    def kept(self, name: str, schema: dict[str, Any], taxonomy: Taxonomy | None = None) -> pl.DataFrame | None:
        """``kept_frame(self, name, schema, taxonomy)``: the frame ``name`` kept beside the run, or None."""
        return kept_frame(self, name, schema, taxonomy)


RunLike: TypeAlias = Run | RunStore
"""What the analyses take: a run read whole (``Run``) or opened in parts (``RunStore``)."""


def _import_builtins() -> None:
    """Import the modules that register the built-in kept frames (``BUILTIN_FRAMES``; a no-op once
    imported): what is kept never depends on what the caller imported."""
    for module in BUILTIN_FRAMES:
        importlib.import_module(module)


def _make_derived(store: RunStore, taxonomy: Taxonomy) -> dict[str, pl.DataFrame]:
    """Every registered frame (``DERIVED``) of ``store`` for ``taxonomy`` but the lazy ones, with the default settings,
    through the memo (a frame made from another, the documents or the frames, makes it once); a
    derived frame that cannot be made is left out (its analysis says why), one of the run's own
    frames that cannot is the run's error (a bad file)."""
    made: dict[str, pl.DataFrame] = {}
    for name, part in DERIVED.items():
        if part.lazy:
            continue
        try:
            made[name] = per_run(store, part.memo(taxonomy), functools.partial(part.make, store, taxonomy))
        except Exception as e:
            if part.required:
                raise
            log.info("the %s frame of %s is not kept (%s: %s)", name, store.path, type(e).__name__, e)
    return made


def _shape_of(value: Any) -> tuple[Any, ...]:
    """The identity of a record's lists and of their items (``RunStore.state``)."""
    if isinstance(value, list):
        return (id(value), hash(tuple(map(id, value))))
    return (id(value), tuple((k, id(v), hash(tuple(map(id, v)))) for k, v in value.items()))


def _state(run: RunLike) -> tuple[Any, ...]:
    """``RunStore.state``; for a ``Run``, which lists and items its records hold."""
    if isinstance(run, RunStore):
        return run.state()
    return tuple(_shape_of(getattr(run, part)) for part in RECORDS)


def read_digest(run: RunLike) -> str | None:
    """``RunStore.digest`` of a store whose records are as read (``as_read``); None otherwise (a
    ``Run`` built from parts or read whole, a store changed in memory): nothing is kept for it."""
    return run.digest if isinstance(run, RunStore) and run.as_read else None


@dataclass(frozen=True)
class DerivedFrame:
    """A frame made from a run alone and kept beside it (``RunStore.open_kept``)."""

    name: str
    """The kept file: ``<name>.arrow``."""
    schema: dict[str, Any]
    """Its columns; a kept file with other columns is not read (made again)."""
    make: Callable[[RunLike, Taxonomy | None], pl.DataFrame]
    """The pure function that makes it from the run's records (and the taxonomy the run is
    analysed with, None for the shipped one: part of the kept folder's key)."""
    required: bool = False
    """One of the run's own frames (``frames.Frames``): an error making it is the run's error
    (a bad file), and it is kept uncompressed; a derived frame that cannot be made is not kept
    (its analysis says why) and is kept zstd-compressed (the speakers of 5,425 continuations
    18 MB -> 0.5 MB, read as fast)."""
    by_taxonomy: bool = False
    """Made from what the judges found, which the taxonomy reads: one frame per taxonomy."""
    lazy: bool = False
    """A table computed from the other kept frames: made when first asked for, then kept beside
    them (``keep_late``), or by ``keep_all`` (the last step of ``cocoeval run``), not when the
    run's frames are first kept, so that a report on a run whose frames were not kept computes it
    while its figures are drawn, without every record in memory."""

    def memo(self, taxonomy: Taxonomy | None) -> tuple[Any, ...]:
        """The key of its default-settings frame in the memo (``per_run``)."""
        return (self.name, taxonomy.hash) if self.by_taxonomy and taxonomy is not None else (self.name,)


DERIVED: dict[str, DerivedFrame] = {}
"""The frames registered (``register_frame``, ``derived_frame``), by name, in the order
registered: ``RunStore.open_kept`` makes and keeps each (a lazy one when first asked for,
``keep_late``, or by ``keep_all``)."""
FACTS: dict[str, Callable[[RunLike], Any]] = {}
"""JSON facts of a run kept beside it in ``facts.json`` (``derived_facts``), by name: what an
analysis needs of the records that is not a frame (read back by ``kept_facts``)."""


def register_frame(part: DerivedFrame) -> None:
    """Register ``part`` to be kept with the run's frames; a second frame of a taken name (by
    another function) is refused, so that no registration silently replaces another."""
    was = DERIVED.get(part.name)
    _refuse_taken(f"a derived frame named {part.name!r}", None if was is None else was.make, part.make)
    DERIVED[part.name] = part


def _refuse_taken(what: str, was: Callable[..., Any] | None, now: Callable[..., Any]) -> None:
    """Refuse ``what`` (a name in ``DERIVED`` or ``FACTS``) registered again by another function than
    the one that took it (``was``): no registration silently replaces another."""
    if was is not None and _origin(was) != _origin(now):
        raise ValueError(f"{what} is registered already (by {_origin(was)}); give {_origin(now)} another name")


def _origin(f: Callable[..., Any]) -> str:
    wrapped = getattr(f, "__wrapped__", f)
    return f"{wrapped.__module__}.{wrapped.__qualname__}"


def derived_facts(name: str) -> Callable[[Callable[[RunLike], Any]], Callable[[RunLike], Any]]:
    """Register ``make(run)`` (a pure function of the run's records returning JSON) to be kept in
    the run's ``facts.json`` under ``name`` (``kept_facts`` reads it back)."""

    def register(make: Callable[[RunLike], Any]) -> Callable[[RunLike], Any]:
        _refuse_taken(f"a facts entry named {name!r}", FACTS.get(name), make)
        FACTS[name] = make
        return make

    return register


def frames_key(taxonomy: Taxonomy) -> tuple[Any, ...]:
    """What the run's frames for ``taxonomy`` are held under in the memo (``per_run``)."""
    return ("frames", taxonomy.hash)


_FRAMES_MAKER: list[Callable[[RunLike, Taxonomy], Any]] = []


def register_frames_maker(make: Callable[[RunLike, Taxonomy], Any]) -> None:
    """Register the function giving a run's frames for a taxonomy, held under ``frames_key``
    (``frames.run_frames``, registered when ``frames`` is imported): what a ``by_taxonomy``
    derived frame is made from, without this module importing ``frames``."""
    _FRAMES_MAKER[:] = [make]


def _frames_of(run: RunLike, taxonomy: Taxonomy) -> Any:
    if not _FRAMES_MAKER:  # frames, which registers it, is one of the built-in modules
        _import_builtins()
    return _FRAMES_MAKER[0](run, taxonomy)


def is_own_frames(run: RunLike, f: Any) -> bool:
    """Whether ``f`` (a ``frames.Frames``) are the frames of ``run`` for their taxonomy, as they
    are now (``memo_holds``): only then is a table kept beside the run for that taxonomy a table of
    ``f``; frames made otherwise (filtered, built by hand) are computed from."""
    return memo_holds(run, frames_key(f.taxonomy), f)


_MADE: dict[tuple[Any, ...], Any] = {}
"""What ``made_once`` made in this process, by (id of the object it was made from, what)."""


def made_once(source: object, what: tuple[Any, ...], make: Callable[[], T]) -> T:
    """``make()`` once per ``source`` (a frame or the ``Frames`` it was made from, never changed in
    place: frozen) and ``what`` (the statistic and its settings) in this process, for a result that
    several analyses ask for with the same settings; dropped with ``source``. The result is
    shared: never changed by its callers (polars frames are not changed in place)."""
    key = (id(source), *what)
    if key not in _MADE:
        if not any(k[0] == id(source) for k in _MADE):
            weakref.finalize(source, _forget_made, id(source))
        _MADE[key] = make()
    return cast(T, _MADE[key])


def _forget_made(source_id: int) -> None:
    for k in [k for k in _MADE if k[0] == source_id]:
        del _MADE[k]


def made_for_run(run: RunLike, f: object, what: tuple[Any, ...], make: Callable[[], T]) -> T:
    """``made_once(f, ...)`` for a result that reads the run as well as its frames ``f``: keyed
    also by the run and its state as ``per_run`` checks it (its records' lists, its files), so a
    run changed since is computed again."""
    sig = (_state(run), run_signature(run.path) if run.path is not None else None)
    return made_once(f, (id(run), sig, *what), make)


def derived_frame(
    name: str, schema: dict[str, Any], *, by_taxonomy: bool = False, lazy: bool = False
) -> Callable[[F], F]:
    """Register a frame derived from the run alone, kept with the run's frames (``DERIVED``) so
    that a later process needs no record for it.

    ``make(run, **settings)`` is a pure function of the run's records with columns ``schema``; its
    keyword-only ``settings`` (the resamples, the seed...), each with a default, are what a caller
    may change. With ``by_taxonomy`` it is ``make(run, frames, **settings)``: a table made from
    what the judges found (``frames.Frames``, which the taxonomy reads), kept per taxonomy. The
    frame of the default settings is the one kept (made when ``RunStore.open_kept`` keeps the
    run's frames, the last step of ``cocoeval run``); other settings are made when asked for. The
    decorated name takes the same arguments and gives the frame: the kept one for the run
    ``open_kept`` holds and the default settings, else made; either way once per run (and
    taxonomy) and settings in a process (``per_run``), so an analysis calls one function whatever
    its settings. With ``by_taxonomy`` the kept frame serves only frames that are the run's own
    (``is_own_frames``); others (filtered, built by hand) are made from, once per frames object,
    state of the run and settings (``made_for_run``). Settings are compared by value (numbers, strings). A ``lazy`` one (a
    table computed from the other kept frames) is made when first asked for and then kept
    (``DerivedFrame.lazy``). The key of what is kept covers cocoeval's code, not a frame registered
    from elsewhere: after changing such a function, delete the run's ``cache/``."""

    def register(make: F) -> F:
        params = inspect.signature(make).parameters
        defaults = {k: v.default for k, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY}
        if unset := [k for k, v in defaults.items() if v is inspect.Parameter.empty]:
            raise TypeError(f"the settings of the derived frame {name!r} need defaults: {', '.join(unset)}")

        def made(run: RunLike, tax: Taxonomy | None) -> pl.DataFrame:
            return make(run, _frames_of(run, tax or load_taxonomy())) if by_taxonomy else make(run)

        register_frame(DerivedFrame(name, schema, functools.wraps(make)(made), by_taxonomy=by_taxonomy, lazy=lazy))

        @functools.wraps(make)
        def frame(run: RunLike, *args: Any, **settings: Any) -> pl.DataFrame:
            if unknown := sorted(set(settings) - set(defaults)):
                raise TypeError(f"{name}: unknown setting(s) {', '.join(unknown)} (known: {', '.join(defaults)})")
            if len(args) != by_taxonomy or (by_taxonomy and not hasattr(args[0], "taxonomy")):
                raise TypeError(
                    f"{name} takes the run{' and its frames' if by_taxonomy else ''}, then settings by name"
                )
            chosen = {**defaults, **settings}
            given = tuple(args)  # (the frames,) or ()
            tax = args[0].taxonomy if by_taxonomy else None
            if by_taxonomy and not is_own_frames(run, args[0]):  # computed from these frames, never kept
                return made_for_run(
                    run, args[0], (name, *sorted(chosen.items())), lambda: make(run, *given, **settings)
                )
            what = DERIVED[name].memo(tax)
            if chosen != defaults:  # made here, never kept
                return per_run(run, (*what, *sorted(chosen.items())), lambda: make(run, *given, **settings))

            def get() -> pl.DataFrame:
                kept = kept_frame(run, name, schema, tax)
                if kept is not None:
                    return kept
                with one_blas_thread():  # as every analysis computes: the same bytes kept
                    df = DERIVED[name].make(run, tax)  # (for the run's own frames: those given)
                keep_late(run, name, df, tax)
                return df

            return per_run(run, what, get)

        return cast(F, frame)

    return register


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


def per_run(run: RunLike, what: tuple[Any, ...], make: Callable[[], T]) -> T:
    """``make()`` once per run and ``what`` in this process: for the same ``Run`` or ``RunStore``
    object while it lives and its records hold the same lists (``RunStore.state``) and, for an
    opened run, while its directory's files (``run_signature``) are unchanged, so that every
    analysis of a report or a notebook kernel shares one computation."""
    key = (id(run), *what)
    sig = (_state(run), run_signature(run.path) if run.path is not None else None)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == sig:
        return cast(T, hit[1])
    value = make()
    if not any(k[0] == id(run) for k in _CACHE):
        weakref.finalize(run, _forget, id(run))
    _CACHE[key] = (sig, value)
    return value


def memo_holds(run: RunLike, what: tuple[Any, ...], value: object) -> bool:
    """Whether ``per_run(run, what, ...)`` gives ``value`` now (made for this run while it is as it
    was then), without making anything."""
    hit = _CACHE.get((id(run), *what))
    if hit is None or hit[1] is not value:
        return False
    return hit[0] == (_state(run), run_signature(run.path) if run.path is not None else None)


def _forget(run_id: int) -> None:
    for k in [k for k in _CACHE if k[0] == run_id]:
        del _CACHE[k]


def opened_run(d: Path, sig: tuple[tuple[str, int, int], ...]) -> RunStore | None:
    """The ``RunStore`` this process opened from the run folder ``d`` (resolved), while its files
    are still ``sig`` (``run_signature``); None otherwise."""
    hit = _CACHE.get(("open", str(d)))
    return cast(RunStore, hit[1]) if hit is not None and hit[0] == sig else None


def make_room_for(d: Path) -> None:
    """Forget what was held for ``d`` and, beyond the ``OPEN_RUNS`` - 1 most recent other run
    folders, the oldest ones (their kept folders go with them)."""
    others = [k for k in _CACHE if k[0] == "open" and k != ("open", str(d))]
    for k in others[: max(0, len(others) - (OPEN_RUNS - 1))]:
        del _CACHE[k]
        _CACHE.pop(("kept", k[1]), None)
    _CACHE.pop(("open", str(d)), None)
    _CACHE.pop(("kept", str(d)), None)


def hold(d: Path, sig: tuple[tuple[str, int, int], ...], run: RunStore, folder: Path | None, taxonomy: str) -> None:
    """Hold ``run`` as the one opened from ``d`` while its files are ``sig``, with the folder its
    frames are kept in for the taxonomy of hash ``taxonomy`` (None: none kept), which
    ``kept_frame`` and ``kept_facts`` then read."""
    _CACHE[("open", str(d))] = (sig, run)
    if folder is not None:
        _CACHE[("kept", str(d))] = (sig, (folder, taxonomy))


def _writable(cache: Path) -> bool:
    """Whether what is kept can be written in the run's ``cache`` folder (made if missing)."""
    try:
        cache.mkdir(exist_ok=True)
    except OSError:
        return False
    return os.access(cache, os.W_OK | os.X_OK)


def kept_folder(run: RunLike, taxonomy: Taxonomy) -> Path | None:
    """Where what is made of ``run`` for ``taxonomy`` is kept (``open_kept``): ``CACHE_DIR``/
    ``frames-<key>``, the key the SHA-256 of the files read (``RunStore.digest``), of this code and
    ``KEY_LIBS`` (``code_digest``) and of the taxonomy. None for what nothing is kept for: a
    ``Run``, or a store whose records were changed in memory since they were read
    (``read_digest``)."""
    digest = read_digest(run)
    if run.path is None or digest is None:
        return None
    what = hashlib.sha256(f"{digest} {code_digest(KEY_LIBS)} {taxonomy.hash}".encode()).hexdigest()[:40]
    return run.path / CACHE_DIR / f"frames-{what}"


def _keep(folder: Path, frames: dict[str, pl.DataFrame], facts: dict[str, Any]) -> None:
    """Write ``frames`` (Arrow IPC, one file each) and ``facts`` (``facts.json``) as ``folder``,
    whole or not at all, and remove all but the ``KEPT_FRAMES`` newest kept folders of the run."""

    def fill(tmp: Path) -> None:
        for n, df in frames.items():
            df.write_ipc(tmp / f"{n}.arrow", compression="uncompressed" if DERIVED[n].required else "zstd")
        (tmp / "facts.json").write_text(json.dumps(facts, ensure_ascii=False, sort_keys=True), encoding="utf-8")

    keep_folder(folder, fill, newest=KEPT_FRAMES, what="frames")


def kept_frame(
    run: RunLike, name: str, schema: dict[str, Any], taxonomy: Taxonomy | None = None
) -> pl.DataFrame | None:
    """The frame ``name`` that ``RunStore.open_kept`` kept beside ``run`` (``DERIVED``: made from
    the records when they were read, or a lazy table when first made, so that a later process
    needs no record for it), for the
    store it holds while its records are as read (and, given ``taxonomy``, opened with that
    taxonomy); None otherwise (compute it), or when the kept file has other columns than
    ``schema`` (said)."""
    held = _held_kept(run)
    if held is None or (taxonomy is not None and taxonomy.hash != held[1]):
        return None
    folder = held[0]
    if not (folder / f"{name}.arrow").exists():  # not kept (its making failed): made here
        return None
    try:
        return _read_kept(folder / f"{name}.arrow", schema)
    except (OSError, ValueError, pl.exceptions.PolarsError) as e:
        log.warning("the kept frame %s cannot be read (%s): made again from the run's files", folder / name, e)
        return None


def keep_late(run: RunLike, name: str, df: pl.DataFrame, taxonomy: Taxonomy | None = None) -> None:
    """Keep ``df``, the lazy frame ``name`` (``DerivedFrame.lazy``) of the default settings made
    from ``run`` for ``taxonomy``, beside the frames ``open_kept`` kept for it (the run it holds,
    its records as read, opened with that taxonomy): one file, written whole or not at all
    (another process writing it meanwhile writes the same bytes). Nothing where none is held or
    the folder cannot be written (logged)."""
    held = _held_kept(run)
    if not DERIVED[name].lazy or held is None or (taxonomy is not None and taxonomy.hash != held[1]):
        return
    if off("blas"):  # made on several BLAS threads: its last bits may differ from the analyses'
        return
    target = held[0] / f"{name}.arrow"
    tmp = target.with_name(f".{name}.{os.getpid()}.tmp")
    try:
        df.write_ipc(tmp, compression="zstd")
        os.replace(tmp, target)
    except Exception as e:  # a full disk, a folder gone, a write the library refuses: made, not kept
        log.info("the %s frame cannot be kept in %s (%s: %s)", name, held[0], type(e).__name__, e)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def keep_all(run: RunLike, taxonomy: Taxonomy) -> None:
    """Make and keep every lazy frame (``DerivedFrame.lazy``) of ``run`` not kept yet for
    ``taxonomy`` (the last step of ``cocoeval run``: the first report then computes none of them),
    on one BLAS thread as the analyses compute; one that cannot be made is left (its analysis
    says why when asked)."""
    if held_folder(run) is None:
        return
    _import_builtins()
    with one_blas_thread():
        for name, part in DERIVED.items():
            if not part.lazy or kept_frame(run, name, part.schema, taxonomy) is not None:
                continue
            try:
                df = per_run(run, part.memo(taxonomy), functools.partial(part.make, run, taxonomy))
            except Exception as e:
                log.info("the %s frame of %s is not kept (%s: %s)", name, run.path, type(e).__name__, e)
                continue
            keep_late(run, name, df, taxonomy)


def _held(run: RunLike) -> str | None:
    """The run folder (resolved) of ``run`` when it is the store ``open_kept`` holds for it and
    its records are as read: only then is what was kept beside it this run's."""
    if not isinstance(run, RunStore) or not run.as_read:
        return None
    d = str(run.path.resolve())
    return d if _CACHE.get(("open", d), (None, None))[1] is run else None


def _held_kept(run: RunLike) -> tuple[Path, str] | None:
    """Where ``open_kept`` kept what it made of ``run`` (``_held``) and the hash of the taxonomy it
    was made for, or None."""
    d = _held(run)
    return None if d is None or ("kept", d) not in _CACHE else cast("tuple[Path, str]", _CACHE[("kept", d)][1])


def held_folder(run: RunLike) -> Path | None:
    """Where ``open_kept`` kept what it made of ``run``, or None (nothing kept for it)."""
    held = _held_kept(run)
    return None if held is None else held[0]


def _read_kept(path: Path, schema: dict[str, Any]) -> pl.DataFrame:
    """A kept frame, refused (ValueError) when it has other columns than ``schema``."""
    df = pl.read_ipc(path)
    if dict(df.schema) != schema:
        raise ValueError(f"{path.name} has other columns than the frame")
    return df


@derived_facts("integrity_warnings")
def _integrity_warnings(run: RunLike) -> list[str]:
    return run.integrity_warnings()


def integrity_warnings(run: RunLike) -> list[str]:
    """``run.integrity_warnings()``, as kept with its frames when they are (``kept_facts``: no
    record read)."""
    kept = (kept_facts(run) or {}).get("integrity_warnings")
    if isinstance(kept, list) and all(isinstance(w, str) for w in kept):
        return kept
    return run.integrity_warnings()


def kept_facts(run: RunLike) -> dict[str, Any] | None:
    """What ``open_kept`` kept with the frames of ``run`` besides them: the ``FACTS`` registered
    by name (``{"coverage": coverage.run_facts(run), "integrity_warnings":
    run.integrity_warnings()}``), for the run object it holds while its records are as read; None
    otherwise (compute them from the records)."""
    folder = held_folder(run)
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

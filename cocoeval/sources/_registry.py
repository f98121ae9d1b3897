"""The registry of source loaders and the generic loading loop with its report."""

from __future__ import annotations

import errno
import os
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from cocoeval.core.errors import ConfigError, InputError
from cocoeval.core.registry import NotOfKind, Registry
from cocoeval.core.schema import Conversation, Participant, Turn


@dataclass
class SourceReport:
    """What a load read, skipped and dropped, and why."""

    files_read: int = 0
    conversations: int = 0
    skipped: list[dict] = field(default_factory=list)
    """Each: {file, record, reason} for a file, conversation or record left out."""
    dropped_turns: Counter = field(default_factory=Counter)
    """Reason to number of source turns dropped (empty after cleaning, pseudo-speaker...)."""
    merged_speakers: list[dict] = field(default_factory=list)
    """Each: {file, dataset, conversation, canonical, labels} for speaker labels of one person merged into
    one name (QMSum: ``cocoeval.sources.qmsum.speaker_merges``)."""

    def skip(self, file: str | Path, record: str | None, reason: str) -> None:
        self.skipped.append({"file": str(file), "record": record, "reason": reason})

    def drop(self, reason: str, n: int = 1) -> None:
        if n:
            self.dropped_turns[reason] += n

    def to_dict(self) -> dict:
        return {
            "files_read": self.files_read,
            "conversations": self.conversations,
            "skipped": self.skipped,
            "dropped_turns": dict(sorted(self.dropped_turns.items())),
            "merged_speakers": self.merged_speakers,
        }


class Loader(Protocol):
    """A source format: how to find its files and how to read one."""

    def files(self, path: Path) -> list[Path]: ...

    def load_file(self, path: Path, dataset: str | None, report: SourceReport) -> Iterator[Conversation]: ...


ENTRY_POINT_GROUP = "cocoeval.sources"
"""Other packages add source formats under this entry-point group: ``name = "module:LoaderClass"``
(a class with ``files`` and ``load_file``, see ``Loader``)."""


def _loader_entry(kind: str, obj: Any) -> Loader:
    """The loader of a class (instantiated) or of a ready object: it must have ``files`` and
    ``load_file``."""
    loader = obj() if isinstance(obj, type) else obj
    if not (callable(getattr(loader, "files", None)) and callable(getattr(loader, "load_file", None))):
        raise NotOfKind(
            "has no files()/load_file()", "the entry point must name a loader class (see cocoeval.sources.Loader)"
        )
    return loader


SOURCES: Registry[Loader] = Registry(
    "source",
    group=ENTRY_POINT_GROUP,
    builtins="cocoeval.sources",
    make=_loader_entry,
    unknown=("unknown source kind {name!r}", "use one of: {known}"),
)
"""The source loaders by kind: the modules of ``cocoeval.sources`` (imported with the package)
and installed packages' ``cocoeval.sources`` entry points."""


def source(name: str) -> Callable[[type], type]:
    """Class decorator registering a loader under ``name``."""
    return SOURCES.register(name)


def loader_for(kind: str) -> Loader | None:
    """The loader of a source kind: built in, or from an installed package's ``cocoeval.sources``
    entry point (loaded at first lookup); None when there is none."""
    return SOURCES.find(kind)


def available_sources() -> list[str]:
    return sorted(SOURCES.names())


@dataclass(frozen=True)
class SourceSpec:
    kind: str
    path: Path
    dataset: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}:{self.path}" + (f"#{self.dataset}" if self.dataset else "")


def parse_source_spec(spec: str) -> SourceSpec:
    """Parse ``KIND:PATH[#DATASET]``."""
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ConfigError(
            f"source {spec!r} is not of the form KIND:PATH",
            hint=f"e.g. qmsum:data/qmsum/product; kinds: {', '.join(available_sources())}",
        )
    if loader_for(kind) is None:
        raise ConfigError(
            f"unknown source kind {kind!r} in {spec!r}", hint=f"use one of: {', '.join(available_sources())}"
        )
    path, _, dataset = rest.partition("#")
    # a newline or other control character in the dataset name would be in every instance id (which
    # refuses them), a line break in the path in no real folder name
    bad = [(c, "dataset name") for c in dataset if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]
    bad += [(c, "path") for c in kind + path if unicodedata.category(c) in ("Cc", "Zl", "Zp")]
    if bad:
        c, part = bad[0]
        raise ConfigError(
            f"source {spec!r}: its {part} has a control or invisible character (U+{ord(c):04X})",
            hint="write the source on one line without such characters, e.g. qmsum:data/qmsum/product#qmsum_product",
        )
    if dataset != dataset.strip():
        raise ConfigError(
            f"source {spec!r}: its dataset name starts or ends with a space",
            hint="write the name after # without spaces around it",
        )
    return SourceSpec(kind, Path(path), dataset or None)


def load_conversations(
    spec: SourceSpec | str,
    report: SourceReport | None = None,
    on_error: Literal["fail", "skip"] = "fail",
) -> Iterator[Conversation]:
    """Yield every conversation of a source. Malformed files raise InputError, or are skipped
    and reported when ``on_error='skip'``."""
    spec = parse_source_spec(spec) if isinstance(spec, str) else spec
    report = report if report is not None else SourceReport()
    loader = SOURCES.get(spec.kind)
    if not spec.path.exists():
        raise InputError(
            "path does not exist",
            file=str(spec.path),
            hint=f"give an existing file or folder for the {spec.kind} source",
        )
    files = loader.files(spec.path)
    if not files:
        raise InputError(
            f"no {spec.kind} files found here", file=str(spec.path), hint="check the path and the source kind"
        )
    for f in files:
        if (why := unreadable(f)) is not None:  # never a silent skip: listed with its reason
            report.skip(f, None, why)
            continue
        report.files_read += 1
        try:
            convs = list(loader.load_file(f, spec.dataset, report))
        except InputError as e:
            if on_error == "fail":
                raise
            # record 0 (falsy) reaches skip() as int 0, not "0"; left as it is (a behaviour change)
            report.skip(f, e.record and str(e.record), f"malformed: {e.problem}")  # type: ignore[arg-type]
            continue
        for c in convs:
            report.conversations += 1
            yield c


def participants_in_order(turns: list[Turn], info: dict[str, Participant]) -> list[Participant]:
    """Participants in order of first appearance; known roles/stances from ``info``."""
    out: dict[str, Participant] = {}
    for t in turns:
        if t.speaker not in out:
            out[t.speaker] = info.get(t.speaker) or Participant(name=t.speaker)
    return list(out.values())


def cleaned_turn(speaker: str | None, raw: str | None, index: int, report: SourceReport) -> Turn | None:
    """A transcript turn with artefacts removed (raw text kept when cleaning changed it), or
    None, counted in the report, when it has no speaker or no words left."""
    from ._text import clean_transcript, normalise_space

    name = normalise_space(speaker or "")
    text = clean_transcript(raw or "")
    if not name:
        report.drop("no speaker")
        return None
    if not text:
        report.drop("empty after cleaning")
        return None
    return Turn(speaker=name, text=text, source_index=index, raw_text=raw if raw != text else None)


def unreadable(path: Path) -> str | None:
    """Why a source file (or folder) cannot be read: a dangling symlink, a symlink loop, no read
    permission; None when it can be read (or does not exist, for the loader to report)."""
    if path.is_symlink() and not path.exists():
        try:
            os.stat(path)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return "unreadable: symlink loop"
        return f"unreadable: dangling symlink (to {os.readlink(path)}, which does not exist)"
    if path.is_dir():
        return None if os.access(path, os.R_OK | os.X_OK) else "unreadable: folder cannot be listed (permission denied)"
    if path.exists() and not os.access(path, os.R_OK):
        return "unreadable: permission denied"
    return None


def unlisted_folders(path: Path) -> list[Path]:
    """The folders under ``path`` that cannot be listed (``Path.rglob`` passes over them silently)."""
    if not path.is_dir():
        return []
    found: list[Path] = []
    for _ in os.walk(path, onerror=lambda e: found.append(Path(e.filename))):
        pass
    return found


def sorted_files(path: Path, pattern: str) -> list[Path]:
    """The files under ``path`` matching ``pattern``, and those matching that cannot be read
    (dangling symlinks, symlink loops, unreadable files, folders that cannot be listed), which
    ``load_conversations`` reports as skipped with the reason: none is left out silently."""
    if path.is_file():
        return [path]
    return sorted(
        {
            p
            for p in path.rglob(pattern)  # a folder or named pipe of that name: named by the loader
            if not p.name.startswith(".") and (p.is_file() or p.exists() or unreadable(p) is not None)
        }
        | set(unlisted_folders(path))
    )

"""Reading a file that someone else made (an import file, a benchmark exported elsewhere, an
annotation sheet) without trusting what it is: ``read_bounded`` refuses anything but a regular file
after symlinks are resolved (a named pipe would make the read wait forever, ``/dev/zero`` would fill
the memory) and a file larger than the caller's bound, and reads at most that many bytes even when
the file grows while it is read."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from .errors import InputError

MiB = 1 << 20

MAX_IMPORT_BYTES = 256 * MiB
"""The largest continuations file ``import-continuations`` (and an imported setup) reads: about a
hundred times the paper's 300 instances x 30 turns of continuations, and small enough to parse in
memory."""

MAX_BENCH_BYTES = 2048 * MiB
"""The largest benchmark split file (parquet) read: far above any benchmark cocoeval builds (the
paper's is a few MB), below what would exhaust a laptop's memory once decoded."""

MAX_SHEET_BYTES = 256 * MiB
"""The largest annotation sheet (CSV) read: hundreds of thousands of annotated turns."""

MAX_TEXT_BYTES = 2048 * MiB
"""The largest JSON, JSONL or YAML file read (``core.jsonio.read_text``: a run's files, a built
benchmark, params): far above the judgments of thousands of instances, below what would exhaust a
laptop's memory once parsed."""


def _kind(mode: int) -> str:
    return (
        "a folder"
        if stat.S_ISDIR(mode)
        else "a named pipe (FIFO)"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a special file"
    )


def special_file(path: str | Path) -> str | None:
    """What ``path`` is when it is neither a regular file nor a folder (a named pipe, a device, a
    socket: reading one may wait forever), else None (missing paths included): for a caller that
    must know before it looks at the size (``read_bounded`` checks the open file itself)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else _kind(mode)


def _size(n: int) -> str:
    return f"{n / MiB:,.1f} MiB" if n >= MiB else f"{n:,} bytes"


def read_bounded(path: str | Path, limit: int, *, hint: str) -> bytes:
    """The bytes of the regular file ``path`` (symlinks followed), at most ``limit`` of them. An
    InputError naming the file, with ``hint`` as the fix, when it is missing, unreadable, a folder,
    a named pipe, a device or a socket, or larger than ``limit`` bytes (also when it grows past it
    while read). The file is opened without blocking and checked on the open descriptor, so a pipe
    put in its place between a check and the open cannot make the read wait."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise InputError("file not found", file=str(p), hint=hint) from None
    except IsADirectoryError:
        raise InputError("is a folder, not a file", file=str(p), hint=hint) from None
    except PermissionError:
        raise InputError("permission denied", file=str(p), hint="make the file readable (chmod)") from None
    except OSError as e:
        what = (
            "is a socket, not a regular file"
            if e.errno == errno.ENXIO
            else "file not found: a part of the path is a file, not a folder"
            if e.errno == errno.ENOTDIR
            else f"cannot be opened ({e.strerror or e})"
        )
        raise InputError(what, file=str(p), hint=hint) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            why = (
                ""
                if stat.S_ISDIR(st.st_mode)
                else ": reading it could wait forever or never end"
                if not stat.S_ISSOCK(st.st_mode)
                else ""
            )
            raise InputError(f"is {_kind(st.st_mode)}, not a regular file{why}", file=str(p), hint=hint)
        if st.st_size > limit:
            raise InputError(
                f"is {_size(st.st_size)}, more than the {_size(limit)} cocoeval reads from such a file",
                file=str(p),
                hint=hint,
            )
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            try:
                chunk = os.read(fd, min(1 << 24, limit + 1 - got))
            except OSError as e:
                raise InputError(f"cannot be read ({e.strerror or e})", file=str(p), hint=hint) from None
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:
            raise InputError(
                f"grew past {_size(limit)} while it was read (more than cocoeval reads from such a file)",
                file=str(p),
                hint=hint,
            )
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_bounded_text(path: str | Path, limit: int, *, hint: str) -> str:
    """``read_bounded``, decoded as UTF-8 (``decoded``)."""
    return decoded(read_bounded(path, limit, hint=hint), path, empty_hint=hint)


def decoded(data: bytes, path: str | Path, *, empty_hint: str) -> str:
    """The UTF-8 text of a file's bytes (a byte-order mark dropped); an InputError naming the file
    for an empty file (nothing but whitespace; ``empty_hint`` as the fix) and for bytes that are
    not UTF-8 (naming the byte and line)."""
    if not data.strip():
        raise InputError("file is empty", file=str(path), hint=empty_hint)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(
            f"not valid UTF-8 (byte {e.start}, line {line})",
            file=str(path),
            hint="re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
        ) from None


def portable_path(path: str | Path, base: str | Path, *, base_parent: bool = False) -> str:
    """``path`` as a record shared beyond this machine shows it (a manifest, a card, a report):
    relative to ``base`` (``base_parent``: to the folder holding ``base``) when it lies inside it
    (as given, then with links followed), else its file name alone, never an absolute path of the
    machine that wrote it (the record's SHA-256 says which file it was)."""
    for norm in (lambda p: Path(os.path.abspath(p)), lambda p: Path(p).resolve()):
        b = norm(base).parent if base_parent else norm(base)
        try:
            return norm(path).relative_to(b).as_posix()
        except ValueError:
            continue
    return Path(path).name


def _absolute(text: str) -> bool:
    return "\n" not in text and (PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute())


def _name(text: str) -> str:
    return (PureWindowsPath(text) if PureWindowsPath(text).is_absolute() else PurePosixPath(text)).name


_LOCAL_ABSOLUTE = re.compile(r"\blocal/((?:/|~[/\\]|[A-Za-z]:[\\/]|\\\\)[^\s\"'()\[\]{},;]*)")
"""A ``local/<path.gguf>`` model spec whose path is absolute (``local//home/me/m.gguf``) or in
the home folder (``local/~/models/m.gguf``)."""

_SOURCE_ABSOLUTE = re.compile(r"^([A-Za-z][\w.-]*):((?:/(?!/)|[A-Za-z]:[\\/])[^#]*)(#.*)?$")
"""A ``KIND:PATH[#DATASET]`` source (``build.sources``) whose path is absolute."""


def _portable(path: str, base: str | Path) -> str:
    if not PurePosixPath(path).is_absolute():  # a Windows path read on another system: its name
        return _name(path) or path
    return portable_path(path, base) or path


def portable_spec(text: str) -> str:
    """``text`` with each ``local/<absolute path>`` model spec in it reduced to ``local/<file name>``
    (``llm (local//home/me/m.gguf)`` reads ``llm (local/m.gguf)``): a shared record names the
    model file, not the folders of the machine that ran it."""
    return _LOCAL_ABSOLUTE.sub(lambda m: "local/" + (_name(m[1]) or m[1].strip("/\\")), text)


def portable_text(text: str, base: str | Path) -> str:
    """One recorded string as a shared record shows it: an absolute path as ``portable_path``
    gives it (relative to ``base``, else its name), a ``KIND:/absolute/path[#DATASET]`` source
    with its path made portable the same way, any ``local/<absolute path>`` model spec in it
    reduced to ``local/<file name>``; any other string as it is (URLs included)."""
    if _absolute(text):
        return _portable(text, base)
    if m := _SOURCE_ABSOLUTE.match(text):
        return f"{m[1]}:{_portable(m[2], base)}{m[3] or ''}"
    return portable_spec(text)


def portable_record(value: Any, base: str | Path) -> Any:
    """A JSON value (recorded params, a build report, an instance's provenance) with every string
    in it made portable (``portable_text``): what a run or a benchmark shares (its manifest, report,
    HTML page, Inspect logs, exported benchmark) names no absolute path of the machine that wrote
    it. Only strings change; keys, numbers and the structure are kept."""
    if isinstance(value, str):
        return portable_text(value, base)
    if isinstance(value, dict):
        return {k: portable_record(v, base) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [portable_record(v, base) for v in value]
    return value

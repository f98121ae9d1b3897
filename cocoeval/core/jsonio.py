"""Reading and writing JSON/JSONL with errors that name the file and record, atomically."""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import json
import os
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .errors import ConfigError, InputError
from .files import MAX_TEXT_BYTES, decoded, read_bounded

M = TypeVar("M", bound=BaseModel)

_READS: contextvars.ContextVar[tuple[dict[str, str], ...]] = contextvars.ContextVar("cocoeval_reads", default=())
"""The dicts of the active ``recorded_reads`` blocks (innermost last)."""


@contextlib.contextmanager
def recorded_reads() -> Iterator[dict[str, str]]:
    """Record the SHA-256 of the bytes of every file ``read_text`` reads in this block (and
    ``read_json``, ``iter_jsonl``... through it), by path as given: the digest of exactly what was
    parsed, for a cache keyed by a file's content (``RunStore.digest``). Blocks nest: each records
    what is read inside it."""
    seen: dict[str, str] = {}
    token = _READS.set((*_READS.get(), seen))
    try:
        yield seen
    finally:
        _READS.reset(token)


def read_text(path: str | Path) -> str:
    """Read a UTF-8 text file (``core.files.read_bounded``, up to ``MAX_TEXT_BYTES``); a clear
    InputError for missing, empty or non-UTF-8 files, and for a named pipe, device or socket in
    place of the file (reading it could wait forever)."""
    data = read_bounded(path, MAX_TEXT_BYTES, hint="check the path")
    if recorders := _READS.get():
        digest = hashlib.sha256(data).hexdigest()
        for seen in recorders:
            seen[str(Path(path))] = digest
    return decoded(data, path, empty_hint="remove the file or replace it with a complete export")


_TOO_DEEP = "JSON nested too deeply to read"


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key given twice raises (``json`` would keep the last)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs)
"""The decoder of every file read here: refuses duplicate keys (about 1.7x plain ``json.loads``)."""


def _duplicate(e: _DuplicateKey) -> str:
    return f"key {e.key!r} given twice in one JSON object (JSON readers would silently keep only the last value)"


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; errors say where the JSON breaks."""
    return parse_json_text(read_text(path), path)


_REPAIR = "repair or re-export the file"


def parse_json_text(text: str, path: str | Path, *, hint: str = _REPAIR) -> Any:
    """``text``, the whole of the file ``path``, parsed as ``read_json`` parses a file: a key given
    twice in one object, a nesting too deep for Python's stack, an integer past Python's digit
    limit and broken JSON are each an InputError naming ``path``, with ``hint`` saying the fix
    (for a file that comes from another tool, its own export step)."""
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}", file=str(path), hint=hint
        ) from None
    except _DuplicateKey as e:
        raise InputError(_duplicate(e), file=str(path), hint=f"give each key once: {hint}") from None
    except RecursionError:
        deep = "no cocoeval file nests more than a few levels: " if hint == _REPAIR else ""
        raise InputError(_TOO_DEEP, file=str(path), hint=deep + hint) from None
    except ValueError as e:  # an integer past Python's digit limit
        raise InputError(f"not readable as JSON ({str(e)[:100]})", file=str(path), hint=hint) from None


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) for each non-blank line of a JSONL file."""
    text = read_text(path)
    # JSONL lines end at \n only: str.splitlines() would also cut at U+2028, U+0085, \x1c...,
    # which JSON allows raw inside strings
    for n, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield n, parse_json_line(line, path, n)


def parse_json_line(line: str, path: str | Path, n: int) -> Any:
    """Line ``n`` of JSONL file ``path``, parsed as ``iter_jsonl`` parses each (errors name both)."""
    try:
        return _DECODER.decode(line)
    except json.JSONDecodeError as e:
        raise InputError(
            f"invalid JSON at column {e.colno}: {e.msg}",
            file=str(path),
            record=f"line {n}",
            hint="repair or remove that line",
        ) from None
    except _DuplicateKey as e:
        raise InputError(
            _duplicate(e), file=str(path), record=f"line {n}", hint="give each key once: repair or remove that line"
        ) from None
    except RecursionError:
        raise InputError(_TOO_DEEP, file=str(path), record=f"line {n}", hint="repair or remove that line") from None
    except ValueError as e:  # an integer past Python's digit limit
        raise InputError(
            f"not readable as JSON ({str(e)[:100]})",
            file=str(path),
            record=f"line {n}",
            hint="repair or remove that line",
        ) from None


def validate(model: type[M], data: Any, *, file: str | Path, record: str | int) -> M:
    """Validate ``data`` against ``model``; a ValidationError becomes an InputError."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
        more = f" (and {e.error_count() - 1} more problems)" if e.error_count() > 1 else ""
        raise InputError(
            f"field {loc}: {first['msg']}{more}",
            file=str(file),
            record=record,
            hint=f"the record must match the {model.__name__} layout",
        ) from None


def script_json(obj: Any) -> str:
    """JSON safe inside a ``<script>`` element of a page (the HTML report, the annotation page): no
    ``<``, ``>`` or ``&`` survives as such, nor a line or paragraph separator."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        s.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def temp_beside(path: Path, mode: int = 0o666) -> tuple[int, str]:
    """A new, empty temporary file in ``path``'s folder, open for writing: (descriptor, its path),
    for a write that ends in ``os.replace(tmp, path)``. Created with ``mode`` filtered by the
    process's umask, as ``open()`` creates a file (``tempfile.mkstemp`` makes every file 0600, so
    a collaborator could not read a report or a run file written through it); a file that holds
    a key passes ``mode=0o600``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(path.parent, f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary file name beside {path}")


def write_atomic(path: str | Path, text: str) -> None:
    """Write a text file via a temporary file and os.replace: never half-written. The values of
    the API key variables are replaced by ``[REDACTED]`` (a second line of defence: error texts
    are redacted where they are made; no other text is changed)."""
    from cocoeval.llm.secrets import redact_values

    write_atomic_bytes(path, redact_values(text).encode("utf-8"))


def write_atomic_bytes(path: str | Path, data: bytes, mode: int = 0o666) -> None:
    """Write ``data`` as ``path`` via a temporary file beside it (``temp_beside``: the umask
    applies) and os.replace: never half-written. Errors of a folder in the way, a read-only or
    full disk are ConfigErrors saying the fix; on a full disk the file before is kept as it was."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"cannot write {p}: it is a folder", hint="give a file path")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temp_beside(p, mode)
    except OSError as e:  # a file where a folder should be, no permission, read-only disk, a full disk
        if e.errno in _NO_ROOM:
            raise _no_room(p, e, existed=p.exists()) from None
        raise ConfigError(
            f"cannot write {p}: {e.strerror or e}",
            hint="choose an output folder that is a folder (or missing) and writable",
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in _NO_ROOM:  # the file before is kept as it was
            raise _no_room(p, e, existed=p.exists()) from None
        raise


def _file_size_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not on Unix
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def _no_room(p: Path, e: OSError, *, existed: bool) -> ConfigError:
    """The clear error of a write that found no room: which (a full disk, a quota, a file-size
    limit, with this process's limit when it has one) and the fix for that one."""
    kept = f"{p.name} is kept as it was before" if existed else f"nothing was written to {p.name}"
    if e.errno == errno.EFBIG:
        limit = _file_size_limit()
        why = (
            f"the file is too large: it would pass the file-size limit of this process ({limit} bytes, ulimit -f)"
            if limit is not None
            else _NO_ROOM[errno.EFBIG]
        )
        return ConfigError(
            f"cannot write {p}: {why} ({e.strerror or e})",
            hint=f"raise the limit (ulimit -f unlimited) or write to a filesystem that takes larger "
            f"files, and run again; {kept}",
        )
    return ConfigError(
        f"cannot write {p}: {_NO_ROOM.get(e.errno or 0, 'no room')} ({e.strerror or e})",
        hint=f"free space on that disk (df {p.parent}) or write elsewhere, and run again; {kept}",
    )


_NO_ROOM = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file is too large (past the file-size limit of this process or its filesystem)",
}


def write_jsonl(path: str | Path, records: Iterable[BaseModel | dict]) -> int:
    """Atomically write one JSON object per line; returns the number of lines."""
    lines = []
    for r in records:
        if isinstance(r, BaseModel):
            lines.append(r.model_dump_json(exclude_none=True))
        else:
            lines.append(json.dumps(r, ensure_ascii=False, sort_keys=True))
    write_atomic(path, "".join(line + "\n" for line in lines))
    return len(lines)


def write_json(path: str | Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n")


def read_models(path: str | Path, model: type[M]) -> list[M]:
    """Read a JSONL file of ``model`` records."""
    return [validate(model, obj, file=path, record=f"line {n}") for n, obj in iter_jsonl(path)]


def read_unique_models(
    path: str | Path, model: type[M], key: Callable[[M], Hashable], what: Callable[[M], str], hint: str
) -> list[M]:
    """``read_models``, refusing (InputError naming both lines) a second record with the same
    ``key``: a file cocoeval writes holds each key once, so a repeated one (a hand-made merge, a
    copy-paste) would be counted twice. ``what`` names the record in the error, ``hint`` the fix."""
    out: list[M] = []
    seen: dict[Hashable, int] = {}
    for n, obj in iter_jsonl(path):
        x = validate(model, obj, file=path, record=f"line {n}")
        k = key(x)
        if k in seen:
            raise InputError(
                f"{what(x)} is here twice (lines {seen[k]} and {n}); it would be counted twice",
                file=str(path),
                record=f"line {n}",
                hint=hint,
            )
        seen[k] = n
        out.append(x)
    return out

"""Resumable HTTP download of one file, with a progress bar (used by ``cocoeval fetch``).

Bytes go to a partial file that a later call continues with a ``Range`` request; a server that
ignores the range (200) restarts the file from zero. A response shorter than its announced
length is a clear error and the bytes received stay for the next call to resume.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import urllib.error
import urllib.request
from pathlib import Path

from cocoeval import __version__
from cocoeval.core.errors import CocoevalError, NotFoundError

CHUNK = 1 << 16


class DownloadError(CocoevalError):
    """A download failed (network, HTTP status, truncated response)."""


def _open(url: str, offset: int, timeout: float) -> http.client.HTTPResponse:
    headers = {"User-Agent": f"cocoeval/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:  # the partial file is not a prefix the server knows: start again
            raise _RestartError from None
        if e.code == 404:
            raise NotFoundError(
                f"{url}: not found (HTTP 404)",
                hint="check the URL (--url or the COCOEVAL_FETCH_<NAME>_URL variable); "
                "the dataset may have moved: see its home page",
            ) from None
        raise DownloadError(
            f"{url}: HTTP {e.code} {e.reason}", hint="try again later, or give a mirror with --url"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise DownloadError(
            f"{url}: cannot connect ({reason})",
            hint="check the network connection and the URL, or give a mirror with --url",
        ) from None


class _RestartError(Exception):
    pass


def _total(resp: http.client.HTTPResponse, offset: int) -> tuple[int, int | None]:
    """(offset the body starts at, total size or None when the server does not say)."""
    if resp.status == 206:
        m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", (resp.headers.get("Content-Range") or "").strip())
        if not m or int(m.group(1)) != offset:
            return -1, None  # a range we did not ask for: start again
        return offset, None if m.group(3) == "*" else int(m.group(3))
    length = resp.headers.get("Content-Length")
    return 0, int(length) if length and length.isdigit() else None


def download(
    url: str, part: Path, *, timeout: float = 60.0, progress: bool | None = None, label: str | None = None
) -> int:
    """Download ``url`` into ``part``, continuing a partial file there; returns its size.

    ``progress``: a tqdm bar on stderr (None: only on a terminal)."""
    from tqdm import tqdm

    part.parent.mkdir(parents=True, exist_ok=True)
    for _attempt in range(2):  # a second time from zero when the server refuses the range
        offset = part.stat().st_size if part.exists() else 0
        try:
            resp = _open(url, offset, timeout)
        except _RestartError:
            part.unlink()
            continue
        with resp:
            start, total = _total(resp, offset)
            if start < 0:
                part.unlink()
                continue
            got = start
            with (
                part.open("ab" if start else "wb") as f,
                tqdm(
                    total=total,
                    initial=start,
                    unit="B",
                    unit_scale=True,
                    unit_divisor=1024,
                    desc=label or part.name,
                    disable=None if progress is None else not progress,
                    leave=False,
                ) as bar,
            ):
                try:
                    while chunk := resp.read(CHUNK):
                        f.write(chunk)
                        got += len(chunk)
                        bar.update(len(chunk))
                except http.client.IncompleteRead as e:
                    f.write(e.partial)
                    got += len(e.partial)
                except (OSError, http.client.HTTPException) as e:
                    raise DownloadError(
                        f"{url}: the connection broke after {got:,} bytes ({e})",
                        hint="run the same command again: it resumes from there",
                    ) from None
            if total is not None and got != total:
                raise DownloadError(
                    f"{url}: truncated download: got {got:,} of {total:,} bytes",
                    hint="run the same command again: it resumes from there",
                ) from None
            return got
    raise DownloadError(
        f"{url}: the server refused to resume and to restart the download", hint=f"delete {part} and try again"
    )


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()

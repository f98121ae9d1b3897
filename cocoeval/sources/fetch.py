"""``cocoeval fetch``: download the real datasets from their public homes, verify, record.

Each dataset of the catalogue is one public archive. A fetch downloads it into ``DIR/.partial``
(resuming a broken download), checks that the archive opens and is intact, unpacks it there,
checks the expected layout and reads it with the project's loaders, and only then moves the
folder into place (``DIR/qmsum``, ``DIR/iq2-corpus``, ``DIR/tcr``) and records the sha256 of every
file in ``DIR/fetch-manifest.json``. A failure leaves nothing in place: at most the partial
download, which the next call resumes. ``cocoeval build`` copies the manifest's entry of every
fetched folder it reads into its report, so two people can tell whether they built from the
same data.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shlex
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cocoeval.core.errors import CocoevalError, InputError

from ._download import download, sha256_file

MANIFEST = "fetch-manifest.json"
PARTIAL = ".partial"


@dataclass(frozen=True)
class Entry:
    """One dataset of the catalogue: where its archive lives and what it must contain."""

    name: str
    url: str
    folder: str
    """Folder under DIR it is unpacked into (the archive's single top folder, if any, dropped)."""
    required: tuple[str, ...]
    """Paths (relative to the folder) that must exist after unpacking."""
    sources: tuple[str, ...]
    """KIND:PATH sources (PATH relative to the folder) for cocoeval build; each must load."""
    about: str


CATALOGUE: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry(
            "qmsum",
            "https://github.com/Yale-LILY/QMSum/archive/refs/heads/main.zip",
            "qmsum",
            ("LICENSE", "data/Product/train", "data/Academic/train", "data/Committee/train"),
            tuple(f"qmsum:data/{d}/{s}" for d in ("Product", "Academic", "Committee") for s in ("train", "val")),
            "QMSum meetings (product / academic / committee), MIT licence; QMSum's own layout",
        ),
        Entry(
            "iq2",
            "https://zissou.infosci.cornell.edu/convokit/datasets/iq2-corpus/iq2-corpus.zip",
            "iq2-corpus",
            ("utterances.jsonl", "conversations.json", "speakers.json"),
            ("convokit:.",),
            "Intelligence Squared US debates, ConvoKit's iq2-corpus",
        ),
        Entry(
            "tcr",
            "https://mtmdata.blob.core.windows.net/data-share/topic_conversation/data.zip",
            "tcr",
            ("SIM.json", "NCPC.json"),
            ("tcr:SIM.json#sim", "tcr:NCPC.json#ncpc"),
            "TCR dataset (Microsoft topic_conversation): SIM and NCPC meetings",
        ),
    )
}


class FetchError(CocoevalError):
    """A fetched archive is unusable (corrupt, or not shaped as the catalogue expects)."""


def url_for(name: str, url: str | None = None) -> str:
    """The URL to fetch: ``url``, else ``COCOEVAL_FETCH_<NAME>_URL``, else the catalogue's."""
    return url or os.environ.get(f"COCOEVAL_FETCH_{name.upper()}_URL") or CATALOGUE[name].url


def build_command(out: Path, names: list[str]) -> str:
    """The ``cocoeval build`` command line for the fetched datasets."""
    srcs = []
    for n in names:
        for s in CATALOGUE[n].sources:
            kind, _, rest = s.partition(":")
            path, sep, ds = rest.partition("#")
            srcs.append(f"--source {shlex.quote(f'{kind}:{out / CATALOGUE[n].folder / path}{sep}{ds}')}")
    return "cocoeval build " + " ".join(srcs) + " --out build/bench"


# ----------------------------------------------------------------------------- manifest
def read_manifest(out: Path) -> dict[str, Any]:
    from cocoeval.core.jsonio import read_json

    p = out / MANIFEST
    if not p.exists():
        return {"datasets": {}}
    data = read_json(p)
    if not isinstance(data, dict) or not isinstance(data.get("datasets"), dict):
        raise InputError(
            'not a fetch manifest (expected {"datasets": {...}})', file=str(p), hint="delete it and fetch again"
        )
    return data


def file_hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def tree_sha256(files: dict[str, str]) -> str:
    """One digest of a folder's files (their paths and sha256s), to compare two copies at a glance."""
    return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(files.items())).encode()).hexdigest()


def is_intact(out: Path, name: str) -> bool:
    """Whether DIR holds the dataset exactly as its manifest entry recorded it."""
    entry = read_manifest(out)["datasets"].get(name)
    folder = out / CATALOGUE[name].folder
    return bool(entry) and folder.is_dir() and file_hashes(folder) == entry.get("files")


def fetched_data(paths: list[Path]) -> list[dict[str, Any]]:
    """For ``cocoeval build``: the manifest entry of every fetched folder that holds one of
    ``paths`` (found in a fetch-manifest.json beside that folder), without duplicates, and
    whether its files still match (``unchanged_since_fetch``; else the first 50 ``changed_files``)."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for p in paths:
        p = Path(p).resolve()
        for folder in (p, *p.parents):
            mf = folder.parent / MANIFEST
            if not mf.is_file():
                continue
            try:
                datasets = read_manifest(folder.parent)["datasets"]
            except CocoevalError:
                continue
            for name, e in datasets.items():
                if isinstance(e, dict) and e.get("folder") == folder.name and (str(mf), name) not in seen:
                    seen.add((str(mf), name))
                    now = file_hashes(folder)
                    changed = sorted(
                        k for k in set(now) | set(e.get("files") or {}) if now.get(k) != (e.get("files") or {}).get(k)
                    )
                    out.append(
                        {
                            "manifest": str(mf),
                            "dataset": name,
                            **e,
                            "unchanged_since_fetch": not changed,
                            **({"changed_files": changed[:50]} if changed else {}),
                        }
                    )
    return out


# ----------------------------------------------------------------------------- unpack and verify
def _unpack(archive: Path, dest: Path, url: str) -> None:
    """Check and unpack a zip archive into ``dest``, dropping a single top-level folder."""
    bad = f"download it again (delete {archive}) or check the URL {url}"
    try:
        with zipfile.ZipFile(archive) as z:
            broken = z.testzip()
            if broken is not None:
                raise FetchError(f"{archive.name}: corrupt archive (CRC error in {broken})", hint=bad)
            names = [n for n in z.namelist() if not n.endswith("/")]
            if not names:
                raise FetchError(f"{archive.name}: the archive is empty", hint=bad)
            tops = {PurePosixPath(n).parts[0] for n in z.namelist()}
            strip = len(tops) == 1 and all(len(PurePosixPath(n).parts) > 1 for n in names)
            for info in z.infolist():
                if info.is_dir():
                    continue
                parts = PurePosixPath(info.filename).parts[1 if strip else 0 :]
                if not parts or info.filename.startswith("/") or ".." in parts or "\\" in info.filename:
                    raise FetchError(f"{archive.name}: unsafe path in the archive: {info.filename!r}", hint=bad)
                target = dest.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    except zipfile.BadZipFile as e:
        raise FetchError(f"{archive.name}: not a zip archive or truncated ({e})", hint=bad) from None
    except (zipfile.LargeZipFile, NotImplementedError, EOFError) as e:
        raise FetchError(f"{archive.name}: cannot unpack ({e})", hint=bad) from None


def _verify(entry: Entry, folder: Path, url: str) -> dict[str, int]:
    """Check the layout and read every source with the loaders; {source: conversations}."""
    from . import SourceReport, load_conversations, parse_source_spec

    missing = [r for r in entry.required if not (folder / r).exists()]
    if missing:
        top = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())[:12]
        raise FetchError(
            f"{entry.name}: the archive from {url} is not shaped as expected: missing "
            f"{', '.join(missing)} (it holds: {', '.join(top) or 'nothing'})",
            hint=f"check the URL; {entry.name} expects {', '.join(entry.required)}",
        )
    counts = {}
    for s in entry.sources:
        spec = parse_source_spec(s)
        spec = type(spec)(spec.kind, folder / spec.path, spec.dataset)
        try:
            n = sum(1 for _ in load_conversations(spec, SourceReport()))
        except CocoevalError as e:
            raise FetchError(
                f"{entry.name}: the project's {spec.kind} loader cannot read the archive from {url}: {e}",
                hint="check the URL; the dataset's format may have changed",
            ) from None
        if n == 0:
            raise FetchError(f"{entry.name}: no conversation in {s} of the archive from {url}", hint="check the URL")
        counts[s] = n
    return counts


# ----------------------------------------------------------------------------- fetch
def fetch(
    name: str,
    out: str | Path = "data",
    *,
    url: str | None = None,
    force: bool = False,
    progress: bool | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Fetch one dataset of the catalogue into ``out``; returns its manifest entry."""
    from cocoeval.core.jsonio import write_json

    if name not in CATALOGUE:
        raise CocoevalError(f"unknown dataset {name!r}", hint=f"choose from {', '.join(CATALOGUE)}")
    entry, out = CATALOGUE[name], Path(out)
    src = url_for(name, url)
    folder = out / entry.folder
    manifest = read_manifest(out)
    if not force and folder.exists():
        if is_intact(out, name):
            log(f"{name}: already in {folder} (every file matches {out / MANIFEST}); skipped")
            return manifest["datasets"][name]
        raise FetchError(
            f"{folder} exists but does not match {out / MANIFEST} (not fetched by cocoeval, or changed since)",
            hint=f"move it away, or replace it: cocoeval fetch {name} --force",
        )
    part = out / PARTIAL
    archive, staging = part / f"{name}.zip", part / name
    origin = part / f"{name}.url"  # a partial download resumes only from the URL it came from
    if archive.exists() and (not origin.exists() or origin.read_text(encoding="utf-8") != src):
        archive.unlink()
    log(f"{name}: {'resuming' if archive.exists() else 'downloading'} {src}")
    made_out = not out.exists()
    part.mkdir(parents=True, exist_ok=True)
    origin.write_text(src, encoding="utf-8")
    try:
        download(src, archive, progress=progress, label=name)
    except BaseException:
        if not archive.exists():
            origin.unlink(missing_ok=True)
        _tidy(part)  # a partial download stays for the next call to resume; an empty .partial goes
        if made_out:
            _tidy(out)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _unpack(archive, staging, src)
        counts = _verify(entry, staging, src)
    except FetchError:
        shutil.rmtree(staging, ignore_errors=True)
        archive.unlink(missing_ok=True)  # a bad archive is not resumed: the next call downloads anew
        origin.unlink(missing_ok=True)
        _tidy(part)
        if made_out:
            _tidy(out)
        raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = file_hashes(staging)
    record: dict[str, Any] = {
        "folder": entry.folder,
        "url": src,
        "archive_sha256": sha256_file(archive),
        "archive_bytes": archive.stat().st_size,
        "fetched_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "conversations": counts,
        "tree_sha256": tree_sha256(files),
        "files": files,
    }
    old = part / f"{name}.old"
    if folder.exists():  # --force: the old copy goes only once the new one is complete
        shutil.rmtree(old, ignore_errors=True)
        folder.rename(old)
    staging.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    manifest = read_manifest(out)
    manifest["datasets"][name] = record
    write_json(out / MANIFEST, manifest)
    archive.unlink(missing_ok=True)
    origin.unlink(missing_ok=True)
    _tidy(part)
    log(
        f"{name}: {len(files)} files in {folder}, {sum(counts.values())} conversations "
        f"(tree sha256 {record['tree_sha256'][:16]}…, recorded in {out / MANIFEST})"
    )
    return record


def _tidy(part: Path) -> None:
    if part.is_dir() and not any(part.iterdir()):
        part.rmdir()

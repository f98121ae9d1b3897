"""The benchmark folder, as every reader finds it: a split is ``<split>.jsonl`` (``cocoeval build``,
``build.py``) or ``<split>.parquet`` with its dataset card (``cocoeval bench-export``,
``export.py``); ``load_instances`` reads either, validated as untrusted data, and the round trip
is exact (an instance read back from parquet serialises to the same bytes as its JSONL line).
The writers import this module; it imports neither of them."""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any

from cocoeval.core.errors import ConfigError, InputError, NotFoundError
from cocoeval.core.files import MAX_BENCH_BYTES, MiB, read_bounded, special_file
from cocoeval.core.jsonio import read_unique_models, validate
from cocoeval.core.schema import Instance

__all__ = [
    "CARD_HASH",
    "find_instance",
    "has_benchmark",
    "is_parquet_bench",
    "load_instances",
    "read_parquet_split",
    "split_file",
]

MAX_CARD_BYTES = 16 * MiB
"""The largest dataset card (README.md beside a parquet split) read for its recorded hashes."""

_EXPORT_AGAIN = "give the folder cocoeval bench-export wrote (a regular parquet file), or export it again"


def split_file(bench_dir: str | Path, split: str) -> Path:
    """The file of one split of a benchmark folder: ``<split>.jsonl`` (``cocoeval build``), or
    ``<split>.parquet`` where the folder is an export (``cocoeval bench-export``) without JSONL."""
    d = Path(bench_dir)
    jsonl, parquet = d / f"{split}.jsonl", d / f"{split}.parquet"
    return parquet if not jsonl.exists() and parquet.is_file() else jsonl


def has_benchmark(bench_dir: str | Path) -> bool:
    """Whether ``bench_dir`` holds a benchmark (built, or exported as parquet)."""
    return split_file(bench_dir, "eval").exists()


def load_instances(bench_dir: str | Path, split: str | None = "eval") -> list[Instance]:
    """Read a benchmark's instances (``split=None``: both splits), from the JSONL ``cocoeval
    build`` writes or the parquet of ``cocoeval bench-export`` (``read_parquet_split``)."""
    splits = ["eval", "train"] if split is None else [split]
    out: list[Instance] = []
    for s in splits:
        p = split_file(bench_dir, s)
        if not p.exists():
            raise NotFoundError(
                f"{p} does not exist",
                hint="build the benchmark first: cocoeval build --source ... --out DIR "
                "(or give a folder cocoeval bench-export wrote)",
            )
        if p.suffix == ".parquet":
            out += read_parquet_split(p)
            continue
        if (what := special_file(p)) is not None:
            raise InputError(
                f"is {what}, not a regular file: reading it could wait forever",
                file=str(p),
                hint="replace it with the file cocoeval build wrote",
            )
        if p.stat().st_size:  # an empty split is written as an empty file
            out += read_unique_models(
                p,
                Instance,
                lambda i: i.id,
                lambda i: f"instance {i.id!r}",
                "cocoeval build writes each instance once: remove the extra line, or build the benchmark again",
            )
    return out


def find_instance(bench_dir: str | Path, instance_id: str) -> Instance:
    for inst in load_instances(bench_dir, None):
        if inst.id == instance_id:
            return inst
    raise NotFoundError(
        f"no instance {instance_id!r} in {bench_dir}",
        hint="list ids with: cut -c1-200 DIR/eval.jsonl, or see report.json",
    )


def _strip_nulls(v: Any) -> Any:
    """A parquet row as the JSONL holds it: null struct fields are fields the JSONL omits
    (cocoeval writes every model with exclude_none)."""
    if isinstance(v, dict):
        return {k: _strip_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_strip_nulls(x) for x in v]
    return v


CARD_HASH = re.compile(r"^- `(?P<name>[a-z]+\.parquet)`: `(?P<sha>[0-9a-f]{64})`$", re.M)
"""A split's line in the card's "Provenance and hashes" (``dataset_card``)."""


def card_sha256(split_path: Path) -> str | None:
    """The SHA-256 the dataset card (``README.md`` beside the split) records for the split file;
    None when there is no card or it records none (a folder not written by ``export_bench``, or a
    card whose line was removed to accept an edited file)."""
    card = split_path.parent / "README.md"
    try:
        text = read_bounded(card, MAX_CARD_BYTES, hint="").decode("utf-8", errors="replace")
    except InputError:
        return None
    return next((m["sha"] for m in CARD_HASH.finditer(text) if m["name"] == split_path.name), None)


def read_parquet_split(path: str | Path) -> list[Instance]:
    """The instances of one exported split (``export_bench``), validated as the JSONL is. The file
    is read as untrusted data (``core.files.read_bounded``: a regular file of at most
    ``MAX_BENCH_BYTES``), and refused when its SHA-256 is not the one its dataset card records: it
    was changed after the export, and results on it would be taken for results on the published
    benchmark."""
    import polars as pl

    p = Path(path)
    data = read_bounded(p, MAX_BENCH_BYTES, hint=_EXPORT_AGAIN)
    want, have = card_sha256(p), hashlib.sha256(data).hexdigest()
    if want is not None and want != have:
        raise InputError(
            f"its SHA-256 is {have}, but the dataset card (README.md beside it) records {want}: the "
            "file was changed after cocoeval bench-export wrote it",
            file=str(p),
            hint="use the benchmark as exported (download or export it again: cocoeval bench-export "
            "BENCH --format parquet --out DIR); to use the changed file on purpose, write its "
            f"SHA-256 into README.md in place of the old one (the line - `{p.name}`: ...)",
        )
    try:
        rows = pl.read_parquet(io.BytesIO(data)).to_dicts()
    except Exception as e:  # polars raises its own error classes for a file that is no parquet
        raise ConfigError(
            f"cannot read {p} as parquet: {e}",
            hint="export the benchmark again: cocoeval bench-export BENCH --format parquet --out DIR",
        ) from e
    out: list[Instance] = []
    seen: dict[str, int] = {}
    for n, row in enumerate(rows, 1):
        d = _strip_nulls(row)
        meta = d.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("extra"), str):
            try:
                meta["extra"] = json.loads(meta["extra"])
            except json.JSONDecodeError as e:
                raise ConfigError(
                    f"{p}, row {n}: metadata.extra is not JSON ({e})", hint="export the benchmark again"
                ) from e
            except RecursionError:
                raise InputError(
                    "metadata.extra is JSON nested too deeply to read",
                    file=str(p),
                    record=f"row {n}",
                    hint="export the benchmark again",
                ) from None
        inst = validate(Instance, d, file=p, record=f"row {n}")
        if inst.id in seen:
            raise InputError(
                f"instance {inst.id!r} is here twice (rows {seen[inst.id]} and {n}); it would be counted twice",
                file=str(p),
                record=f"row {n}",
                hint="export the benchmark again",
            )
        seen[inst.id] = n
        out.append(inst)
    return out


def is_parquet_bench(bench_dir: str | Path) -> bool:
    """Whether ``bench_dir`` is an exported benchmark (``eval.parquet``, no ``eval.jsonl``)."""
    d = Path(bench_dir)
    return (d / "eval.parquet").is_file() and not (d / "eval.jsonl").exists()

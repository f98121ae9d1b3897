"""Typed converters for command-line options: a bad value is an argparse error (exit 2) that
names the option and says what is accepted, before anything runs.

Each converter carries its bounds (``lo``, ``hi``, ``kind``) so that tests can derive values
outside them for every option that uses one.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _tag(
    fn: Callable[[str], Any], kind: str, lo: float | None, hi: float | None, lo_open: bool = False
) -> Callable[[str], Any]:
    fn.kind = kind  # type: ignore[attr-defined]
    fn.lo = lo  # type: ignore[attr-defined]
    fn.hi = hi  # type: ignore[attr-defined]
    fn.lo_open = lo_open  # type: ignore[attr-defined]
    return fn


def int_range(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An integer from ``lo`` to ``hi`` (inclusive; None: no upper bound)."""
    what = f"an integer from {lo:,} to {hi:,}" if hi is not None else f"an integer of at least {lo:,}"

    def conv(text: str) -> int:
        try:
            v = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v

    conv.__name__ = "int"  # argparse's fallback message says "invalid int value"
    return _tag(conv, "int", lo, hi)


def float_range(lo: float, hi: float | None = None, *, lo_open: bool = True) -> Callable[[str], float]:
    """A finite number above ``lo`` (or from ``lo`` when not ``lo_open``) up to ``hi``."""
    low = f"above {lo:g}" if lo_open else f"from {lo:g}"
    what = f"a number {low}" + (f" up to {hi:g}" if hi is not None else "")

    def conv(text: str) -> float:
        try:
            v = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(v) or v < lo or (lo_open and v == lo) or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text.strip()}")
        return v

    conv.__name__ = "float"
    return _tag(conv, "float", lo, hi, lo_open)


positive_int = int_range(1)
"""An integer of at least 1."""
count = int_range(0)
"""An integer of at least 0."""
share = float_range(0.0, 1.0)
"""A share in (0, 1]."""
seconds = float_range(0.0, 86400.0)
"""A positive number of seconds, at most a day."""


def _blocking_ancestor(p: Path) -> Path | None:
    """The first existing ancestor of ``p`` that is not a folder (nothing can be made under it)."""
    for q in p.absolute().parents:
        if q.exists():
            return None if q.is_dir() else q
    return None


def out_dir(text: str) -> Path:
    """An output folder: missing (it is made) or an existing folder, never a file."""
    p = Path(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder path, got an empty string")
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(
            f"{p} is an existing file, not a folder: choose a folder (it is created when missing)"
        )
    if (q := _blocking_ancestor(p)) is not None:
        raise argparse.ArgumentTypeError(f"cannot create {p}: {q} is a file, not a folder")
    return p


def out_file(text: str) -> Path:
    """An output (or cache) file: missing or an existing file, never a folder."""
    p = Path(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file path, got an empty string")
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{p} is a folder: give a file path")
    if (q := _blocking_ancestor(p)) is not None:
        raise argparse.ArgumentTypeError(f"cannot create {p}: {q} is a file, not a folder")
    return p


out_dir.kind = "out_dir"  # type: ignore[attr-defined]
out_file.kind = "out_file"  # type: ignore[attr-defined]


def set_item(text: str) -> str:
    """A ``--set KEY=VALUE`` override of a params key (``cocoeval.run.compose``); the key's shape
    is checked here, the key and the value when the params are read."""
    from cocoeval.run.compose import SET_HINT, parse_set_key

    key, sep, _ = text.partition("=")
    if not sep or not parse_set_key(key):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}: {SET_HINT}")
    return text


set_item.kind = "set"  # type: ignore[attr-defined]


def add_set_option(p: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` (repeatable) on a command that reads a params file."""
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        type=set_item,
        metavar="KEY=VALUE",
        help="override a key of the params file, after the files it extends are merged "
        "(repeatable, applied in order): KEY is a dotted path (llm.concurrency, "
        "instances.per_dataset), a list item by position from 0 (setups.0.temperature) or by "
        "name (setups[NAME].temperature); VALUE is YAML (8, true, null, [a, b])",
    )


def params_sets(a: argparse.Namespace, flags: dict[str, str]) -> list[str]:
    """The ``--set`` overrides of a command: its ``--set`` items, then each option of ``flags``
    ({option's dest: the params key it sets}) that was given, as ``KEY=VALUE``; an option that
    only sets a params key is this, not a second way into the settings."""
    import json

    out = list(a.sets)
    for dest, key in flags.items():
        v = getattr(a, dest)
        if v is not None and v is not False:
            out.append(f"{key}={json.dumps(v)}")
    return out

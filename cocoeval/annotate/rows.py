"""Reading the rows of an annotation file (used by ``cocoeval.annotate.exchange``): each row becomes one
cell, is skipped as not annotated, or is rejected with a reason. The rules are those of the judges'
answers: a value of the wrong type is rejected; behaviour names go through
``judge.parse.map_behaviour`` (case, spacing, plural, ids; unknown names are rejected, never
guessed) and every repair is recorded on the cell.

"No behaviour" is said explicitly: ``none`` in a CSV cell, ``[]`` (or ``"none"``) in JSONL. An
empty, null or missing ``behaviours`` on a turn row, and an overall row with both scores empty, is
*not annotated*: the row is skipped (``NotAnnotated``) and reported, never read as zero behaviours or
as a score.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cocoeval.core.errors import InputError
from cocoeval.core.files import MAX_SHEET_BYTES, read_bounded_text
from cocoeval.core.jsonio import iter_jsonl
from cocoeval.core.targets import Target
from cocoeval.core.taxonomy import Taxonomy
from cocoeval.judge.parse import map_behaviour
from cocoeval.run.humans import Cell, CellKey, name_problem

FIELDS = [
    "annotator",
    "item_id",
    "instance_id",
    "target",
    "turn",
    "behaviours",
    "not_in_taxonomy",
    "consistency",
    "collaborativeness",
    "note",
]


_NO_BEHAVIOUR = {"none", "nobehaviour", "nobehaviours", "na", "n/a"}  # as for the judges' answers


NONE = "none"
"""What an annotator writes for a turn without behaviour (JSONL: ``[]``)."""


class NotAnnotated(Exception):
    """A row left empty: skipped and reported, never a label."""

    def __init__(self, what: str, value: Any = "") -> None:
        super().__init__(what)
        self.what, self.value = what, value


class Reject(Exception):
    def __init__(self, reason: str, value: Any = "", hint: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.value, self.hint = reason, value, hint


_SHEET_HINT = (
    f"give the filled sheet (CSV as template.csv, at most {MAX_SHEET_BYTES >> 20} MiB): a regular file, "
    "not a pipe, device or folder"
)


def read_rows(path: Path) -> list[tuple[str, Any]]:
    if path.suffix == ".jsonl":
        rows = [(f"line {n}", obj) for n, obj in iter_jsonl(path)]
    else:
        # a sheet is untrusted: a pipe, a device or an oversize file is refused before it is read
        reader = csv.DictReader(io.StringIO(read_bounded_text(path, MAX_SHEET_BYTES, hint=_SHEET_HINT)))
        try:
            return _csv_rows(path, reader)
        except csv.Error as e:  # a field past csv's size limit, a NUL, a quote left open
            raise InputError(
                f"not readable as CSV ({e})",
                file=str(path),
                record=f"row {reader.line_num}",
                hint="save the sheet again as CSV (one row per turn, as template.csv)",
            ) from None
    return _some(path, rows)


def _csv_rows(path: Path, reader: csv.DictReader) -> list[tuple[str, Any]]:
    header = reader.fieldnames or []
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:  # DictReader would keep the last column of that name silently
        raise InputError(
            f"CSV header names the column{'s' if len(twice) > 1 else ''} "
            f"{', '.join(repr(c) for c in twice)} more than once",
            file=str(path),
            record="row 1",
            hint=f"keep one column of each name (the columns are {', '.join(FIELDS)})",
        )
    missing = {"annotator", "turn", "behaviours"} - set(reader.fieldnames or [])
    if missing:
        raise InputError(
            f"CSV header lacks {', '.join(sorted(missing))}",
            file=str(path),
            hint=f"use the columns {', '.join(FIELDS)} (see template.csv of an export)",
        )
    rows = [(f"row {n}", r) for n, r in enumerate(reader, start=2)]
    return _some(path, rows)


def _some(path: Path, rows: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    if not rows:
        raise InputError(
            "no annotation rows (only a header); nothing was imported",
            file=str(path),
            hint="fill the rows of template.csv (one per turn and one overall row per item)",
        )
    return rows


def _text(r: dict[str, Any], f: str) -> str | None:
    """A field as stripped text; None when absent or null."""
    v = r.get(f)
    if v is None:
        return None
    if isinstance(v, bool | dict | list):
        raise Reject(f"{f} must be text or a number, got {type(v).__name__} {v!r}", v)
    return str(v).strip()


def _int(r: dict[str, Any], f: str, repairs: list[str]) -> int | None:
    v = r.get(f)
    if isinstance(v, float) and v.is_integer():
        repairs.append(f"{f} {v!r} read as {int(v)}")
        return int(v)
    s = _text(r, f)
    if not s:
        return None
    # past 18 digits no turn or score: -1 is out of range (and int() of thousands of digits raises)
    return int(s) if s.isascii() and s.isdigit() and len(s) <= 18 else -1


def _blank(r: dict[str, Any], f: str) -> bool:
    """The field is absent, null or empty text (not annotated); ``[]`` is not blank (it says none)."""
    v = r.get(f)
    return v is None or (isinstance(v, str) and not v.strip())


def _behaviours(r: dict[str, Any]) -> str:
    """The behaviours as text; a JSONL list joined by ';', ``[]`` read as ``none``."""
    v = r.get("behaviours")
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return ";".join(v) if v else NONE
    return _text(r, "behaviours") or ""


def _where(r: dict[str, Any]) -> str:
    item = r.get("item_id") or " ".join(str(r.get(f) or "-") for f in ("instance_id", "target"))
    turn = r.get("turn")
    return f"item {item} " + (f"turn {turn}" if not _blank(r, "turn") else "overall")


def _not_annotated(r: dict[str, Any]) -> None:
    """Raise NotAnnotated when the row was left empty (a template row nobody filled)."""
    if _blank(r, "not_in_taxonomy") and _blank(r, "behaviours"):
        if not _blank(r, "turn") and _blank(r, "consistency") and _blank(r, "collaborativeness"):
            raise NotAnnotated(
                f"{_where(r)}: behaviours empty (write {NONE} for a turn without behaviour)", r.get("behaviours") or ""
            )
        if _blank(r, "turn") and _blank(r, "consistency") and _blank(r, "collaborativeness"):
            raise NotAnnotated(f"{_where(r)}: consistency and collaborativeness empty", "")


@dataclass(frozen=True)
class KeyEntry:
    """One item of an export's ``key.json`` (``exchange.read_key``): which conversation an item id
    stands for, kept by the organiser only (the annotators see the item id alone)."""

    instance_id: str
    """The instance of the conversation."""
    target: str
    """Its target: ``reference`` (the human continuation) or a setup name."""
    target_id: str | None = None
    """The id of the continuation exported (a later continuation of the setup is another one)."""
    tasks: tuple[str, ...] = ()
    """The tasks the item is exported for (``overall``, ``fine_grained``); empty in a key written
    before they were recorded (then both count)."""


def parse_row(
    r: Any, jsonl: bool, keymap: dict[str, KeyEntry], targets: dict[tuple[str, str], Target], tax: Taxonomy
) -> tuple[CellKey, Cell]:
    if not isinstance(r, dict):
        raise Reject(f"expected an object with the columns {', '.join(FIELDS)}, got {type(r).__name__}", r)
    if not jsonl and None in r:
        raise Reject(
            "the row has more cells than the header",
            ",".join(r[None]),
            "check for a stray comma (quote values that contain commas)",
        )
    _not_annotated(r)
    annotator = _text(r, "annotator") or ""
    if not annotator:
        raise Reject("no annotator", "", "fill the annotator column")
    if bad := name_problem(annotator):
        raise Reject(bad, annotator, "use a plain name or id for the annotator")
    inst_id, target = _text(r, "instance_id") or "", _text(r, "target") or ""
    item = _text(r, "item_id")
    if item:
        if item not in keymap:
            raise Reject(f"unknown item_id {item!r}", item, "pass the key.json of the export these items came from")
        k = keymap[item]
        if (inst_id and inst_id != k.instance_id) or (target and target != k.target):
            raise Reject(
                f"item_id {item!r} is {k.instance_id} {k.target}, but the row names {inst_id or '-'} {target or '-'}",
                item,
                "give item_id or instance_id and target",
            )
        inst_id, target = k.instance_id, k.target
    t = targets.get((inst_id, target))
    if t is None:
        raise Reject(
            f"no target {target!r} for instance {inst_id!r} in this run",
            f"{inst_id} {target}",
            "target is 'reference' or a setup name with an ok continuation",
        )
    turn = _text(r, "turn")
    repairs: list[str] = []
    if not turn:
        if _behaviours(r):
            raise Reject(
                "behaviours on a row without a turn",
                r.get("behaviours"),
                "an overall row (turn empty) holds only the two scores; put behaviours on turn rows",
            )
        if _text(r, "not_in_taxonomy"):
            raise Reject(
                "not_in_taxonomy on a row without a turn",
                r.get("not_in_taxonomy"),
                "describe a behaviour the taxonomy lacks on the turn row where it happens",
            )
        scores = []
        for f in ("consistency", "collaborativeness"):
            v = _int(r, f, repairs)
            if v is None:
                raise Reject(
                    f"{f} is empty but the other score is given",
                    r.get(f),
                    "an overall row (turn empty) needs both scores (leave both empty if not annotated)",
                )
            if not 1 <= v <= 10:
                raise Reject(
                    f"{f} must be an integer from 1 to 10, got {r.get(f)!r}",
                    r.get(f),
                    "an overall row (turn empty) needs both scores",
                )
            scores.append(v)
        return (annotator, inst_id, target, None), Cell(tuple(scores), "", f"{scores[0]}, {scores[1]}", repairs)
    n = _int(r, "turn", repairs)
    if n is None or not 1 <= n <= len(t.turns):
        raise Reject(f"turn must be 1-{len(t.turns)}, got {r.get('turn')!r}", r.get("turn"))
    if n - 1 not in t.judged:
        raise Reject(f"turn {n} is context only (not annotated in this target)", n)
    for f in ("consistency", "collaborativeness"):
        if _text(r, f):
            raise Reject(f"{f} on a turn row", r.get(f), "scores go on the item's overall row (turn empty)")
    raw = _behaviours(r)
    if not raw:
        raise Reject(
            "not_in_taxonomy is given but behaviours is empty",
            r.get("not_in_taxonomy"),
            f"write {NONE} in behaviours when the turn shows no behaviour of the taxonomy",
        )
    names = [x.strip() for x in raw.replace(",", ";").split(";") if x.strip()]
    if not names:
        raise Reject(f"behaviours {raw!r} names no behaviour", raw, f"write {NONE} for a turn without behaviour")
    ids: set[str] = set()
    unknown = []
    for name in names:
        if re.sub(r"[\s_\-/]+", "", name.lower()) in _NO_BEHAVIOUR:
            if len(names) > 1:
                raise Reject(f"{name!r} together with behaviours", raw, f"write {NONE} alone for no behaviour")
            if name.lower() != NONE:
                repairs.append(f"{name!r} read as no behaviour ({NONE})")
            continue
        bid, note = map_behaviour(name, tax)
        if bid is None:
            unknown.append(name)
            continue
        if note:
            repairs.append(note)
        if bid in ids:
            repairs.append(f"{name!r} lists {bid} twice; kept once")
        ids.add(bid)
    if unknown:
        raise Reject(
            f"unknown behaviour {', '.join(map(repr, unknown))}",
            raw,
            "use the taxonomy's names or ids: " + ", ".join(b.name for b in tax.behaviours),
        )
    value = tuple(b.id for b in tax.behaviours if b.id in ids)
    other = _text(r, "not_in_taxonomy") or ""
    shown = f"{raw} [not in taxonomy: {other}]" if other else raw
    return (annotator, inst_id, target, n - 1), Cell(value, "", shown, repairs, other)


@dataclass(frozen=True)
class RowProblem:
    """Why a row of an annotation file cannot be imported (``rejected`` names them all)."""

    row: str
    """Where the row is (``row 5``, ``line 5``, ``task 3 annotation 1``)."""
    reason: str
    """What is wrong with it."""
    value: Any = ""
    """The value at fault, as the file gives it."""
    hint: str | None = None
    """How to fix this row, when it has its own fix."""


def rejected(path: Path, problems: list[RowProblem], what: str, hint: str) -> InputError:
    """One InputError naming every problem row of ``path`` (nothing is imported), with the rows as
    notes in ``.rejected`` (file, row, value, action) for the import report."""
    if len(problems) == 1:
        p = problems[0]
        e = InputError(p.reason, file=str(path), record=p.row, hint=p.hint or hint)
    else:
        hints = list(dict.fromkeys(p.hint for p in problems if p.hint))
        e = InputError(
            f"{len(problems)} {what}; nothing was imported:\n" + "\n".join(f"  {p.row}: {p.reason}" for p in problems),
            file=str(path),
            hint="; ".join([hint, *hints]),
        )
    e.rejected = [  # type: ignore[attr-defined]
        {"file": str(path), "row": p.row, "value": str(p.value)[:200], "action": f"rejected: {p.reason}"}
        for p in problems
    ]
    return e


def describe(k: CellKey) -> str:
    return f"{k[0]}, {k[1]} {k[2]} " + ("overall" if k[3] is None else f"turn {k[3] + 1}")

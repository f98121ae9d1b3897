"""Label Studio exchange: the blind items of an export as Label Studio tasks with a labelling
config, and a Label Studio JSON export read back as the rows ``annotate-import`` reads.

Export (``write_labelstudio``, ``cocoeval annotate-export ... --format labelstudio``): beside the
usual files, ``labelstudio/tasks.json`` (one task per conversation to label: the blind item id,
the context as plain text, and one slot per turn to label) and ``labelstudio/config.xml`` (the
labelling interface: per slot a multiple ``Choices`` of the taxonomy's behaviour names and
``none``, and a ``TextArea`` for a behaviour the taxonomy lacks; the two Likert scores as 1-10
``Rating`` tags). Texts go into task data shown by ``Text`` tags, never into the config, so a turn
holding markup stays text.

Import (``read_labelstudio``): a Label Studio JSON export (the list of tasks, each with its
``annotations`` and their ``result``) becomes rows of the annotation row format
(``cocoeval.annotate.rows``), one per slot and one overall row per annotation, which then go
through the same checks as a CSV row: unknown behaviour names, unknown item ids, turns that are
context only, a turn left unticked (not annotated, reported), partly labelled conversations
(invalid judgments naming the missing turns). What is not an export of the tasks written here (a
result of a control the config does not have, a slot the task has no turn for, a value of the
wrong shape) is rejected with the file, task and annotation named. The file is bounded
(``MAX_SHEET_BYTES``) and a cancelled (skipped) annotation is left out, with a note.

An annotator is named ``ls-<user id>`` from the export's ``completed_by`` (a user id, or a user
object's ``id``), always: two users' e-mails may share the part before ``@`` (one rater would
silently absorb the other), and no part of an e-mail is stored in the run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from cocoeval.core.errors import InputError
from cocoeval.core.files import MAX_SHEET_BYTES, read_bounded_text
from cocoeval.core.jsonio import iter_jsonl, parse_json_text, write_atomic, write_json
from cocoeval.core.taxonomy import Taxonomy

from .rows import NONE

FOLDER = "labelstudio"
"""The export's subfolder of the Label Studio files."""
BEHAVIOURS = "behaviours_{k}"
"""The ``Choices`` of slot k (1-based): the behaviours of the slot's turn."""
OTHER = "not_in_taxonomy_{k}"
"""The ``TextArea`` of slot k: a behaviour of the turn the taxonomy lacks."""
TURN = "turn_{k}"
"""The ``Text`` of slot k (its data key too); ``turn_{k}_number`` holds the turn's number."""
SCORES = ("consistency", "collaborativeness")
"""The ``Rating`` tags (1-10) of an item's overall task."""
MAX_TASKS = 1_000_000
"""Most tasks an export may hold (far beyond any annotation round)."""
NO_TURN = "(no turn to label in this slot)"


def _slot(name: str) -> tuple[str, int] | None:
    """(kind, slot) of a result's ``from_name`` (behaviours, not_in_taxonomy); None otherwise."""
    m = re.fullmatch(r"(behaviours|not_in_taxonomy)_([1-9][0-9]{0,4})", name)
    return (m.group(1), int(m.group(2))) if m else None


def _person(p: dict[str, Any]) -> str:
    """A participant as the page shows one: the name, then role and stance when given."""
    more = ", ".join(str(p[k]) for k in ("role", "stance") if p.get(k))
    return f"{p.get('name', '')}" + (f" ({more})" if more else "")


def _context(item: dict[str, Any]) -> str:
    """What an annotator reads before the turns: goals, participants, summary, history, and every
    turn of the continuation numbered (those to label marked)."""
    goals = item.get("goals") or []
    lines = [
        f"Goals: {'; '.join(map(str, goals if isinstance(goals, list) else [goals])) or '-'}",
        f"Participants: {'; '.join(_person(p) for p in item.get('participants', [])) or '-'}",
        f"Summary: {item.get('summary') or '-'}",
        "",
        "History:",
        *(f"  {h['speaker']}: {h['text']}" for h in item.get("history", [])),
        "",
        "The conversation to label (* : a turn to label below):",
        *(
            f"{'*' if t.get('annotate') else ' '} {t['turn']}. {t['speaker']}: {t['text']}"
            for t in item.get("turns", [])
        ),
    ]
    return "\n".join(lines)


def _task(item: dict[str, Any], slots: int) -> dict[str, Any]:
    turns = [t for t in item.get("turns", []) if t.get("annotate")]
    data: dict[str, Any] = {
        "item_id": item["item_id"],
        "tasks": ", ".join(item.get("tasks", [])),
        "context": _context(item),
    }
    for k in range(1, slots + 1):
        t = turns[k - 1] if k <= len(turns) else None
        data[TURN.format(k=k)] = f"Turn {t['turn']}. {t['speaker']}: {t['text']}" if t else NO_TURN
        data[f"{TURN.format(k=k)}_number"] = t["turn"] if t else None
    return {"data": data}


def config_xml(tax: Taxonomy, slots: int, overall: bool) -> str:
    """The labelling config: the context, per slot its turn with the behaviours (``none`` and the
    taxonomy's names, several may be ticked) and a text for one the taxonomy lacks, and the two
    Likert scores (1-10) when some item has the overall task."""
    choices = "".join(
        f"      <Choice value={quoteattr(v)} hint={quoteattr(h)}/>\n"
        for v, h in [(NONE, "the turn shows no behaviour of the taxonomy")]
        + [(b.name, b.definition) for b in tax.behaviours]
    )
    parts = [
        "<View>\n",
        '  <Header value="Item $item_id (tasks: $tasks)"/>\n',
        '  <Text name="context" value="$context"/>\n',
    ]
    for k in range(1, slots + 1):
        turn, beh, other = TURN.format(k=k), BEHAVIOURS.format(k=k), OTHER.format(k=k)
        parts.append(
            "  <View>\n"
            f'    <Text name="{turn}" value="${turn}"/>\n'
            f'    <Choices name="{beh}" toName="{turn}" choice="multiple" showInline="true">\n'
            f"{choices}"
            "    </Choices>\n"
            f'    <TextArea name="{other}" toName="{turn}" maxSubmissions="1" '
            'placeholder="a behaviour the taxonomy lacks (optional)"/>\n'
            "  </View>\n"
        )
    if overall:
        parts.append('  <Header value="Overall (items whose tasks include overall): 1 (worst) to 10 (best)"/>\n')
        parts += [f'  <Rating name="{s}" toName="context" maxRating="10"/>\n' for s in SCORES]
    parts.append("</View>\n")
    return "".join(parts)


def write_labelstudio(folder: str | Path, tax: Taxonomy) -> tuple[Path, Path]:
    """Write ``labelstudio/tasks.json`` and ``labelstudio/config.xml`` for the items of an export
    folder (its ``items.jsonl``, written by ``export_items``); returns their paths."""
    out = Path(folder)
    items = [obj for _, obj in iter_jsonl(out / "items.jsonl")]
    slots = max((sum(bool(t.get("annotate")) for t in it.get("turns", [])) for it in items), default=0)
    overall = any("overall" in it.get("tasks", []) for it in items)
    tasks, config = out / FOLDER / "tasks.json", out / FOLDER / "config.xml"
    write_json(tasks, [_task(it, slots) for it in items])
    write_atomic(config, config_xml(tax, slots, overall))
    return tasks, config


def _annotator(who: Any, where: str, path: Path) -> str:
    """The annotator's name, ``ls-<user id>``, from ``completed_by`` (a user id, or a user object
    with ``id``); the user's e-mail is never used, so distinct users stay distinct."""
    if isinstance(who, dict):
        who = who.get("id")
    if isinstance(who, int) and not isinstance(who, bool) and 0 <= who < 10**18:
        return f"ls-{who}"
    raise InputError(
        f"the annotation's completed_by is {json.dumps(who)[:60]}, not a user id or a user object with an id",
        file=str(path),
        record=where,
        hint="give the file Label Studio exported (Export > JSON), unedited",
    )


def _values(r: dict[str, Any], key: str, where: str, path: Path) -> list[Any]:
    v = r.get("value")
    got = v.get(key) if isinstance(v, dict) else None
    if not isinstance(got, list) or not all(isinstance(x, str) for x in got):
        raise InputError(
            f"result {r.get('from_name')!r}: value.{key} is not a list of texts",
            file=str(path),
            record=where,
            hint="give the file Label Studio exported (Export > JSON), unedited",
        )
    return got


def _score(r: dict[str, Any], where: str, path: Path) -> Any:
    v = r.get("value")
    for key in ("rating", "number"):
        if isinstance(v, dict) and key in v:
            return v[key]
    raise InputError(
        f"result {r.get('from_name')!r}: no value.rating", file=str(path), record=where, hint="rate it 1 to 10"
    )


def read_labelstudio(path: str | Path) -> tuple[list[tuple[str, Any]], list[dict[str, str]]]:
    """The rows of a Label Studio JSON export of the tasks ``write_labelstudio`` wrote, each with
    where it came from (task, annotation, slot), and a note for every cancelled annotation left
    out. A file that is not such an export is an InputError naming the file and the task."""
    p = Path(path)
    hint = "give the JSON Label Studio exported for the tasks of annotate-export --format labelstudio (Export > JSON)"
    tasks = parse_json_text(read_bounded_text(p, MAX_SHEET_BYTES, hint=hint), p, hint=hint)
    if isinstance(tasks, dict) and "annotations" in tasks:
        tasks = [tasks]
    if not isinstance(tasks, list):
        raise InputError(f"expected a list of tasks, got a JSON {type(tasks).__name__}", file=str(p), hint=hint)
    if len(tasks) > MAX_TASKS:
        raise InputError(f"{len(tasks):,} tasks (at most {MAX_TASKS:,})", file=str(p), hint=hint)
    rows: list[tuple[str, Any]] = []
    notes: list[dict[str, str]] = []
    for n, task in enumerate(tasks, start=1):
        where = f"task {str(task.get('id', n))[:40]}" if isinstance(task, dict) else f"task {n}"
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            raise InputError("a task without a data object", file=str(p), record=where, hint=hint)
        data = task["data"]
        item = data.get("item_id")
        if not isinstance(item, str) or not item:
            raise InputError(
                "a task without item_id in its data (not a task annotate-export wrote)",
                file=str(p),
                record=where,
                hint=hint,
            )
        anns = task.get("annotations", [])
        if not isinstance(anns, list):
            raise InputError("annotations is not a list", file=str(p), record=where, hint=hint)
        for m, ann in enumerate(anns, start=1):
            at = f"{where} annotation {str(ann.get('id', m))[:40] if isinstance(ann, dict) else m}"
            if not isinstance(ann, dict) or not isinstance(ann.get("result", []), list):
                raise InputError("an annotation without a result list", file=str(p), record=at, hint=hint)
            annotator = _annotator(ann.get("completed_by"), at, p)
            if ann.get("was_cancelled"):
                notes.append(
                    {"file": str(p), "row": at, "value": annotator, "action": "cancelled (skipped) in Label Studio"}
                )
                continue
            rows += _rows_of(ann["result"], data, item, annotator, at, p)
    if not rows:
        raise InputError(
            "no annotation in the export (no task has one that was not cancelled); nothing was imported",
            file=str(p),
            hint="export the project after annotating (Export > JSON), not the tasks.json written by annotate-export",
        )
    return rows, notes


def _rows_of(
    results: list[Any], data: dict[str, Any], item: str, annotator: str, at: str, p: Path
) -> list[tuple[str, Any]]:
    """One annotation's rows: a row per slot that has a turn, and one overall row when the item's
    tasks include overall. A slot left unticked gives a row without behaviours (not annotated)."""
    hint = "give the file Label Studio exported, with the config annotate-export wrote (labelstudio/config.xml)"
    turns: dict[int, dict[str, Any]] = {}
    scores: dict[str, Any] = {}
    for r in results:
        if not isinstance(r, dict) or not isinstance(r.get("from_name"), str):
            raise InputError("a result without from_name", file=str(p), record=at, hint=hint)
        name = r["from_name"]
        slot = _slot(name)
        if name in SCORES:
            scores[name] = _score(r, at, p)
            continue
        if slot is None:
            raise InputError(
                f"a result of {name[:60]!r}, a control the labelling config does not have",
                file=str(p),
                record=at,
                hint=hint,
            )
        kind, k = slot
        number = data.get(f"{TURN.format(k=k)}_number")
        if number is None:
            raise InputError(
                f"a result of {name!r}, but slot {k} of item {item} has no turn to label",
                file=str(p),
                record=at,
                hint=hint,
            )
        row = turns.setdefault(k, {})
        if kind == "behaviours":
            row["behaviours"] = _values(r, "choices", at, p)
        else:
            row["not_in_taxonomy"] = " ".join(_values(r, "text", at, p)).strip()
    out: list[tuple[str, Any]] = []
    k = 1
    while f"{TURN.format(k=k)}_number" in data:
        number = data[f"{TURN.format(k=k)}_number"]
        if number is not None:
            out.append(
                (
                    f"{at} slot {k}",
                    {"annotator": annotator, "item_id": item, "turn": number, **turns.get(k, {})},
                )
            )
        k += 1
    if "overall" in str(data.get("tasks", "")).split(", ") or scores:
        out.append((f"{at} overall", {"annotator": annotator, "item_id": item, **scores}))
    return out

"""Human annotations: blind export of the items to annotate, and import of the labels as
judgments with the annotator as judge (``judge_id = human:<annotator>``).

Row format (CSV with a header, or JSONL with the same keys):
    annotator, item_id | (instance_id, target), turn, behaviours, consistency, collaborativeness
- a fine-grained row names a turn (1-based, as shown) and its behaviours (names or ids separated
  by ';', empty for none);
- an overall row leaves ``turn`` empty and gives both Likert scores (integers 1-10).
``target`` is ``reference`` or a setup name. Blind exports use ``item_id``, resolved through the
export's ``key.json``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from .errors import InputError
from .jsonio import iter_jsonl, read_json, read_text, write_atomic, write_json, write_jsonl
from .judge import Target, behaviour_counts, targets_for  # noqa: F401  (re-exported for users)
from .judge_parse import map_behaviour
from .schema import Judgment, TurnLabel
from .taxonomy import Taxonomy, load_taxonomy

FIELDS = ["annotator", "item_id", "instance_id", "target", "turn", "behaviours", "consistency",
          "collaborativeness", "note"]


def _item_id(seed: int, t: Target) -> str:
    return hashlib.sha256(f"{seed}|{t.instance.id}|{t.name}".encode()).hexdigest()[:10]


def export_items(run: dict[str, Any], out_dir: str | Path, *, seed: int = 0,
                 setups: list[str] | None = None, max_instances: int | None = None) -> dict[str, Any]:
    """Write ``items.jsonl`` (what annotators see: context and numbered turns, no hint of who
    wrote them, shuffled), ``template.csv`` (one row per turn and one overall row per item) and
    ``key.json`` (item id -> instance and target; for the organiser only)."""
    instances = run["instances"][:max_instances] if max_instances else run["instances"]
    conts = {k: v for k, v in run["continuations"].items() if setups is None or k in setups}
    targets = targets_for(instances, conts)
    random.Random(seed).shuffle(targets)
    out = Path(out_dir)
    items, key, rows = [], {}, []
    for t in targets:
        iid = _item_id(seed, t)
        key[iid] = {"instance_id": t.instance.id, "target": t.name, "target_id": t.target_id}
        inst = t.instance
        items.append({"item_id": iid, "goals": inst.metadata.goals,
                      "participants": [p.model_dump(exclude_none=True) for p in inst.metadata.participants],
                      "summary": inst.summary.text,
                      "history": [{"speaker": x.speaker, "text": x.text} for x in inst.history],
                      "turns": [{"turn": i + 1, "speaker": x.speaker, "text": x.text, "annotate": i in t.judged}
                                for i, x in enumerate(t.turns)]})
        rows += [{"item_id": iid, "turn": i + 1} for i in t.judged]
        rows.append({"item_id": iid})
    write_jsonl(out / "items.jsonl", items)
    write_json(out / "key.json", key)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    write_atomic(out / "template.csv", buf.getvalue())
    return {"items": len(items), "rows": len(rows), "folder": str(out)}


def _rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    if path.suffix == ".jsonl":
        rows = [(f"line {n}", obj) for n, obj in iter_jsonl(path)]
        for where, obj in rows:
            if not isinstance(obj, dict):
                raise InputError(f"expected an object, got {type(obj).__name__}", file=str(path), record=where,
                                 hint=f"each line is an object with the columns {', '.join(FIELDS)}")
        return rows
    text = read_text(path)
    reader = csv.DictReader(io.StringIO(text))
    missing = {"annotator", "turn", "behaviours"} - set(reader.fieldnames or [])
    if missing:
        raise InputError(f"CSV header lacks {', '.join(sorted(missing))}", file=str(path),
                         hint=f"use the columns {', '.join(FIELDS)} (see template.csv of an export)")
    return [(f"row {n}", r) for n, r in enumerate(reader, start=2)]


def import_annotations(path: str | Path, run: dict[str, Any], *, key: str | Path | None = None,
                       taxonomy: Taxonomy | None = None) -> list[Judgment]:
    """Turn annotation rows into judgments. Errors name the file, the row and the fix; an
    annotator who left judged turns unlabelled gets an invalid judgment saying which."""
    tax = taxonomy or load_taxonomy()
    p = Path(path)
    keymap = read_json(key) if key else {}
    targets = {(t.instance.id, t.name): t for t in targets_for(run["instances"], run["continuations"])}
    fine: dict[tuple, dict[int, TurnLabel]] = defaultdict(dict)
    overall: dict[tuple, tuple[int, int]] = {}
    for where, r in _rows(p):
        def bad(msg: str, hint: str | None = None, where: str = where) -> InputError:
            return InputError(msg, file=str(p), record=where, hint=hint)

        annotator = str(r.get("annotator") or "").strip()
        if not annotator:
            raise bad("no annotator", "fill the annotator column")
        if r.get("item_id"):
            if str(r["item_id"]) not in keymap:
                raise bad(f"unknown item_id {r['item_id']!r}", "pass the key.json of the export these items came from")
            k = keymap[str(r["item_id"])]
            inst_id, target = k["instance_id"], k["target"]
        else:
            inst_id, target = str(r.get("instance_id") or ""), str(r.get("target") or "")
        t = targets.get((inst_id, target))
        if t is None:
            raise bad(f"no target {target!r} for instance {inst_id!r} in this run",
                      "target is 'reference' or a setup name with an ok continuation")
        gk = (annotator, inst_id, target)
        turn = str(r.get("turn") or "").strip()
        if not turn:
            scores = []
            for f in ("consistency", "collaborativeness"):
                v = str(r.get(f) or "").strip()
                if not v.isdigit() or not 1 <= int(v) <= 10:
                    raise bad(f"{f} must be an integer from 1 to 10, got {v!r}")
                scores.append(int(v))
            overall[gk] = (scores[0], scores[1])
            continue
        if not turn.isdigit() or not 1 <= int(turn) <= len(t.turns):
            raise bad(f"turn must be 1-{len(t.turns)}, got {turn!r}")
        idx = int(turn) - 1
        if idx not in t.judged:
            raise bad(f"turn {turn} is context only (not annotated in this target)")
        ids = []
        for name in [x.strip() for x in str(r.get("behaviours") or "").replace(",", ";").split(";") if x.strip()]:
            bid, _ = map_behaviour(name, tax)
            if bid is None:
                raise bad(f"unknown behaviour {name!r}", "use the taxonomy's names or ids: "
                          + ", ".join(b.name for b in tax.behaviours))
            if bid not in ids:
                ids.append(bid)
        fine[gk][idx] = TurnLabel(turn=idx, behaviours=ids)
    out = []
    for (annotator, inst_id, target), labels in sorted(fine.items()):
        t = targets[(inst_id, target)]
        missing = [i + 1 for i in t.judged if i not in labels]
        out.append(Judgment(
            instance_id=inst_id, target=t.target_id, target_name=target, judge_id=f"human:{annotator}",
            judge_name=annotator, kind="fine_grained", taxonomy_hash=tax.hash,
            labels=[labels[i] for i in sorted(labels)], judged_turns=t.judged,
            status="invalid" if missing else "ok",
            reason=f"turns not annotated: {', '.join(map(str, missing))}" if missing else None))
    for (annotator, inst_id, target), (c, k) in sorted(overall.items()):
        t = targets[(inst_id, target)]
        out.append(Judgment(instance_id=inst_id, target=t.target_id, target_name=target,
                            judge_id=f"human:{annotator}", judge_name=annotator, kind="overall",
                            taxonomy_hash=tax.hash, consistency=c, collaborativeness=k, judged_turns=t.judged))
    return out


def export_annotations(judgments: list[Judgment], path: str | Path) -> None:
    """Write judgments (human or LLM) in the row format above (CSV or JSONL by extension)."""
    rows = []
    for j in judgments:
        base = {"annotator": j.judge_name or j.judge_id, "instance_id": j.instance_id,
                "target": j.target_name or j.target}
        if j.kind == "overall":
            rows.append({**base, "consistency": j.consistency, "collaborativeness": j.collaborativeness})
        else:
            rows += [{**base, "turn": lb.turn + 1, "behaviours": ";".join(lb.behaviours)} for lb in j.labels]
    p = Path(path)
    if p.suffix == ".jsonl":
        write_jsonl(p, rows)
        return
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    write_atomic(p, buf.getvalue())

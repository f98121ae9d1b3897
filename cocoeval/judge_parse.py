"""Validating judge answers: schema, turn indices, behaviour names, Likert scores.

Each answer ends as ok, repaired (usable after a recorded repair) or an error. Errors that a
re-ask may fix are ``retryable``; a truncated answer is not. An unusable answer never becomes
"no behaviour": it is an error, and after the re-asks, an invalid judgment.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import json_repair

from .schema import TurnLabel
from .taxonomy import Taxonomy, _norm

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_REFUSAL = re.compile(r"\b(i can(?:no|')t|i am unable|i'm unable|i won't|sorry|as an ai)\b", re.I)
_NONE = {"none", "nobehaviour", "nobehaviours", "na", "n/a", ""}


@dataclass
class Verdict:
    status: str = "ok"  # ok | repaired | error
    error: str | None = None
    retryable: bool = True
    repairs: list[str] = field(default_factory=list)
    labels: list[TurnLabel] = field(default_factory=list)
    consistency: int | None = None
    collaborativeness: int | None = None
    rationale: str | None = None

    @classmethod
    def fail(cls, error: str, retryable: bool = True) -> Verdict:
        return cls(status="error", error=error, retryable=retryable)

    def done(self) -> Verdict:
        self.status = "repaired" if self.repairs else "ok"
        return self


def extract_json(text: str, repairs: list[str]) -> Any:
    """The JSON value in an answer; records how it had to be dug out or repaired."""
    s = text.strip()
    try:
        return json.loads(s)
    except ValueError:
        pass
    m = _FENCE.search(s)
    candidates = [m.group(1).strip()] if m else []
    if "{" in s:
        candidates.append(s[s.index("{"): s.rindex("}") + 1] if "}" in s else s[s.index("{"):])
    for c in candidates:
        try:
            value = json.loads(c)
            repairs.append("extracted the JSON from surrounding text")
            return value
        except ValueError:
            continue
    for c in candidates or [s]:
        value = json_repair.loads(c)
        if isinstance(value, dict | list) and value:
            repairs.append("repaired near-valid JSON")
            return value
    raise ValueError("no JSON object in the answer")


def _precheck(text: str, finish_reason: str | None) -> Verdict | None:
    if finish_reason in ("length", "max_tokens"):
        return Verdict.fail("truncated", retryable=False)
    if not text.strip():
        return Verdict.fail("empty answer")
    if "{" not in text and "[" not in text and _REFUSAL.search(text):
        return Verdict.fail(f"refusal: {text.strip()[:120]}")
    return None


def _likert(value: Any, name: str, v: Verdict) -> int | None:
    if isinstance(value, bool):
        value = None
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(\.0+)?\s*", value):
        v.repairs.append(f"{name} given as text {value!r}")
        value = float(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= 10:
        v.error = f"{name} must be an integer from 1 to 10, got {value!r}"
        return None
    return value


def _load(text: str, finish_reason: str | None) -> tuple[Verdict, Any]:
    """The answer's JSON and a verdict to fill, or a failed verdict (truncated, empty, refusal,
    no JSON)."""
    if pre := _precheck(text, finish_reason):
        return pre, None
    v = Verdict()
    try:
        return v, extract_json(text, v.repairs)
    except ValueError as e:
        return Verdict.fail(str(e)), None


def validate_overall(text: str, finish_reason: str | None = None) -> Verdict:
    v, obj = _load(text, finish_reason)
    if v.status == "error":
        return v
    if not isinstance(obj, dict):
        return Verdict.fail("expected a JSON object with consistency and collaborativeness")
    for key in ("consistency", "collaborativeness"):
        if key not in obj:
            return Verdict.fail(f"missing {key}")
    v.consistency = _likert(obj["consistency"], "consistency", v)
    v.collaborativeness = _likert(obj["collaborativeness"], "collaborativeness", v)
    if v.error:
        return Verdict.fail(v.error)
    r = obj.get("rationale")
    v.rationale = r.strip() if isinstance(r, str) else None
    return v.done()


def map_behaviour(name: str, tax: Taxonomy) -> tuple[str | None, str | None]:
    """(behaviour id, repair note) for a judge's behaviour name; (None, None) if unknown."""
    b = tax.get(name)
    if b is not None:
        exact = name.strip() in (b.name, b.id)
        return b.id, None if exact else f"{name!r} read as {b.name!r}"
    names = {_norm(x.name): x for x in tax.behaviours} | {_norm(x.id): x for x in tax.behaviours}
    close = difflib.get_close_matches(_norm(name), list(names), n=1, cutoff=0.8)
    if close:
        b = names[close[0]]
        return b.id, f"{name!r} read as {b.name!r}"
    return None, None


def _as_int(x: Any) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, str) and x.strip().lstrip("[").rstrip("]").isdigit():
        return int(x.strip().lstrip("[").rstrip("]"))
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return None


def validate_fine(text: str, finish_reason: str | None, n_turns: int, tax: Taxonomy) -> Verdict:
    """Labels for turns numbered 1..n_turns (TurnLabel.turn is the 0-based position)."""
    v, obj = _load(text, finish_reason)
    if v.status == "error":
        return v
    if isinstance(obj, list):
        v.repairs.append("a bare list instead of {\"turns\": [...]}")
        obj = {"turns": obj}
    turns = obj.get("turns") if isinstance(obj, dict) else None
    if not isinstance(turns, list):
        return Verdict.fail('expected {"turns": [...]} with one entry per numbered turn')
    seen: dict[int, TurnLabel] = {}
    for entry in turns:
        if not isinstance(entry, dict):
            return Verdict.fail(f"each turn entry must be an object, got {entry!r}"[:200])
        num = _as_int(entry.get("turn"))
        if num is None:
            return Verdict.fail(f"turn number missing or not an integer in {entry!r}"[:200])
        if not 1 <= num <= n_turns:
            return Verdict.fail(f"turn {num} is out of range 1-{n_turns}")
        if num in seen:
            return Verdict.fail(f"turn {num} is listed twice")
        raw = entry.get("behaviours", entry.get("behaviors", []))
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            return Verdict.fail(f"turn {num}: behaviours must be a list")
        label = TurnLabel(turn=num - 1)
        for item in raw:
            name, evidence = (item, "") if isinstance(item, str) else (
                (item.get("behaviour") or item.get("behavior") or item.get("name") or "", item.get("evidence") or "")
                if isinstance(item, dict) else ("", ""))
            if not isinstance(name, str):
                return Verdict.fail(f"turn {num}: behaviour name must be text, got {name!r}")
            if _norm(name).replace("/", "") in _NONE:
                v.repairs.append(f"turn {num}: {name!r} read as no behaviour")
                continue
            bid, note = map_behaviour(name, tax)
            if bid is None:
                return Verdict.fail(f"turn {num}: unknown behaviour {name!r}; use one of: "
                                    + ", ".join(b.name for b in tax.behaviours))
            if note:
                v.repairs.append(f"turn {num}: {note}")
            if bid not in label.behaviours:
                label.behaviours.append(bid)
                if isinstance(evidence, str) and evidence.strip():
                    label.evidence[bid] = evidence.strip()[:300]
        seen[num] = label
    missing = [n for n in range(1, n_turns + 1) if n not in seen]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        return Verdict.fail(f"turns missing from the answer: {shown}")
    v.labels = [seen[n] for n in range(1, n_turns + 1)]
    return v.done()

"""Validating judge answers: schema, turn numbers, behaviour names, Likert scores.

Each answer ends ok, repaired (usable after repairs that cannot change what is counted, each
recorded) or an error naming the turn and key at fault. Errors a re-ask may fix are
``retryable``; a truncated answer is not (judging asks the same question again with a larger
output budget instead, up to ``JudgeConfig.max_tokens_cap``). Nothing is inferred from absence: a turn without
behaviours says ``"behaviours": []``; a missing, null or ill-typed key, an unknown or merely
similar behaviour name, or a score that is not a whole number from 1 to 10 is an error, and
after the re-asks an invalid judgment, never "no behaviour" or a zero.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cocoeval.core.schema import TurnLabel
from cocoeval.core.taxonomy import Taxonomy, name_key
from cocoeval.prompts.answer_json import DuplicateKey, extract_json

_REFUSAL = re.compile(r"\b(i can(?:no|')t|i am unable|i'm unable|i won't|sorry|as an ai)\b", re.I)
NONE_NAMES = frozenset({"none", "nobehaviour", "nobehaviours", "nobehavior", "nobehaviors", "n/a", "na"})
"""Name keys (``taxonomy.name_key``) that say "no behaviour" when they are all a list holds."""
_INT_TEXT = re.compile(r"\s*\[?\s*(\d+)(?:\.0+)?\s*\]?\s*")


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


class Bad(ValueError):
    """An unusable answer; the message names the turn and key."""


def _show(x: Any) -> str:
    return json.dumps(x, ensure_ascii=False)[:60]


def _kind(x: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean", type(None): "null"}.get(
        type(x), "a number"
    )


def says_none(name: str) -> bool:
    """Whether a behaviour name says "no behaviour" ("None", "No behaviours", "N/A")."""
    return name_key(name) in NONE_NAMES


def _key(obj: dict, key: str, where: str, notes: list[str], aliases: tuple[str, ...] = ()) -> tuple[bool, Any]:
    """(present, value) of ``key`` in ``obj``, also written with other case, spaces, hyphens or
    underscores, or as one of ``aliases`` (each such reading is noted). Two spellings at once
    are an error: which one counts?"""
    wanted = {name_key(key), *map(name_key, aliases)}
    found = [k for k in obj if isinstance(k, str) and name_key(k) in wanted]
    if len(found) > 1:
        raise Bad(f"{where}key {key!r} is given twice ({', '.join(map(repr, found))})")
    if not found:
        return False, None
    if found[0] != key:
        notes.append(f"{where}key {found[0]!r} read as {key!r}")
    return True, obj[found[0]]


def _extras(obj: dict, known: tuple[str, ...], where: str, notes: list[str], aliases: tuple[str, ...] = ()) -> None:
    """Other keys are ignored (noted) unless they hold a list or an object, which may hold what
    should have been counted."""
    keys = set(map(name_key, known + aliases))
    for k, val in obj.items():
        if name_key(str(k)) in keys:
            continue
        if isinstance(val, dict | list) and val:
            raise Bad(f"{where}unexpected key {k!r} holding {_kind(val)}; use only " + ", ".join(map(repr, known)))
        notes.append(f"{where}ignored key {k!r}")


def _unwrap(obj: Any, key: str, notes: list[str]) -> Any:
    """``{"answer": {...key...}}`` -> the inner object (a single wrapper key cannot change it)."""
    if isinstance(obj, dict) and len(obj) == 1:
        ((k, inner),) = obj.items()
        if (
            name_key(str(k)) != name_key(key)
            and isinstance(inner, dict)
            and any(isinstance(x, str) and name_key(x) == name_key(key) for x in inner)
        ):
            notes.append(f"read the answer inside key {k!r}")
            return inner
    return obj


def _precheck(text: str, finish_reason: str | None) -> Verdict | None:
    if finish_reason in ("length", "max_tokens"):
        return Verdict.fail("truncated", retryable=False)
    if not text.strip():
        return Verdict.fail("empty answer")
    if "{" not in text and "[" not in text and _REFUSAL.search(text):
        return Verdict.fail(f"refusal: {text.strip()[:120]}")
    return None


def _load(text: str, finish_reason: str | None, list_keys: tuple[str, ...] = ()) -> tuple[Verdict, Any]:
    """The answer's JSON and a verdict to fill, or a failed verdict (truncated, empty, refusal,
    no usable JSON)."""
    if pre := _precheck(text, finish_reason):
        return pre, None
    v = Verdict()
    try:
        return v, extract_json(text, v.repairs, list_keys)
    except DuplicateKey as e:
        return Verdict.fail(f"{_where_path(e.value, e.path)}key {e.key!r} is given twice"), None
    except ValueError as e:
        return Verdict.fail(str(e)), None


def _where_path(value: Any, path: list[Any]) -> str:
    """'turn N: ' (and 'behaviour entry K: ') for a path into a fine-grained answer, else ''."""
    where, cur = "", value
    for step in path:
        try:
            cur = cur[step]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(cur, dict):
            num = next((cur[k] for k in cur if isinstance(k, str) and name_key(k) == "turn"), None)
            if isinstance(num, int | str) and not isinstance(num, bool):
                where = f"turn {num}: "
            elif where and isinstance(step, int):
                where += f"behaviour entry {step + 1}: "
    return where


def _likert(value: Any, name: str, notes: list[str]) -> int:
    shown = _show(value)
    if isinstance(value, str) and (m := re.fullmatch(r"\s*(\d+)(?:\.0+)?\s*", value)):
        notes.append(f"{name} given as text {shown}")
        value = int(m.group(1))
    elif isinstance(value, float) and value.is_integer():
        notes.append(f"{name} given as {shown}")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise Bad(f"key {name!r} must be a whole number from 1 to 10, got {shown}")
    return value


def validate_overall(text: str, finish_reason: str | None = None) -> Verdict:
    v, obj = _load(text, finish_reason)
    if v.status == "error":
        return v
    try:
        obj = _unwrap(obj, "consistency", v.repairs)
        if not isinstance(obj, dict):
            raise Bad(
                f"expected a JSON object with 'consistency', 'collaborativeness' and 'rationale', got {_kind(obj)}"
            )
        scores = []
        for key in ("consistency", "collaborativeness"):
            present, val = _key(obj, key, "", v.repairs)
            if not present:
                raise Bad(f"missing key {key!r}")
            if val is None:
                raise Bad(f"key {key!r} is null")
            scores.append(_likert(val, key, v.repairs))
        v.consistency, v.collaborativeness = scores
        present, r = _key(obj, "rationale", "", v.repairs)
        if isinstance(r, str) and r.strip():
            v.rationale = r.strip()
        else:
            v.repairs.append(
                "missing key 'rationale'"
                if not present
                else f"key 'rationale' is {'empty' if isinstance(r, str) else _kind(r)}; stored none"
            )
        _extras(obj, ("consistency", "collaborativeness", "rationale"), "", v.repairs)
    except Bad as e:
        return Verdict.fail(str(e))
    return v.done()


def map_behaviour(name: str, tax: Taxonomy) -> tuple[str | None, str | None]:
    """(behaviour id, repair note) for a judge's or annotator's behaviour name: the taxonomy's id
    or name up to case, spaces, hyphens, underscores and a plural ending (noted unless written
    exactly as the name or id). Anything else, however close, is (None, None): never a guess
    across "On topic"/"Off topic" or "Understanding"/"Misunderstanding"."""
    b = tax.get(name)
    if b is None:
        return None, None
    exact = name.strip() in (b.name, b.id)
    return b.id, None if exact else f"{name!r} read as {b.name!r}"


def _turn_number(entry: dict, pos: int, notes: list[str]) -> int:
    where = f"turn entry {pos}: "
    present, x = _key(entry, "turn", where, notes)
    if not present:
        raise Bad(f"{where}missing key 'turn'")
    if x is None:
        raise Bad(f"{where}key 'turn' is null")
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    m = _INT_TEXT.fullmatch(x) if isinstance(x, str) else None
    if m or (isinstance(x, float) and x.is_integer()):
        notes.append(f"{where}turn given as {_show(x)}")
        return int(m.group(1)) if m else int(x)
    raise Bad(f"{where}key 'turn' must be a whole number, got {_show(x)}")


def _behaviours(entry: dict, where: str, tax: Taxonomy, notes: list[str]) -> TurnLabel:
    present, raw = _key(entry, "behaviours", where, notes, aliases=("behaviors",))
    if not present:
        raise Bad(f"{where}missing key 'behaviours' (a turn without behaviours has \"behaviours\": [])")
    if raw is None:
        raise Bad(f"{where}key 'behaviours' is null (a turn without behaviours has \"behaviours\": [])")
    if not isinstance(raw, list):
        raise Bad(f"{where}key 'behaviours' must be a list, got {_kind(raw)} {_show(raw)}")
    _extras(entry, ("turn", "behaviours"), where, notes, aliases=("behaviors",))
    found: list[tuple[str, str, Any]] = []  # (name, how it was given, evidence)
    for k, item in enumerate(raw, start=1):
        at = f"{where}behaviour entry {k}: "
        if isinstance(item, str):
            found.append((item, "plain", None))
            continue
        if not isinstance(item, dict):
            raise Bad(f"{at}expected an object with 'behaviour' and 'evidence', got {_kind(item)} {_show(item)}")
        present, name = _key(item, "behaviour", at, notes, aliases=("behavior",))
        if not present:
            raise Bad(f"{at}missing key 'behaviour'")
        if name is None:
            raise Bad(f"{at}key 'behaviour' is null")
        if not isinstance(name, str):
            raise Bad(f"{at}key 'behaviour' must be a behaviour name, got {_show(name)}")
        has_ev, ev = _key(item, "evidence", at, notes)
        _extras(item, ("behaviour", "evidence"), at, notes, aliases=("behavior",))
        found.append((name, "object" if has_ev else "no evidence", ev))
    label = TurnLabel(turn=0)
    nones = [name for name, _, _ in found if says_none(name)]
    if nones and len(nones) < len(found):
        raise Bad(f"{where}{nones[0]!r} is listed with behaviours; give [] for none, else only behaviours")
    if nones:
        notes.append(f"{where}{', '.join(map(repr, nones))} read as no behaviours")
        return label
    for name, how, ev in found:
        bid, note = map_behaviour(name, tax)
        if bid is None:
            raise Bad(f"{where}unknown behaviour {name!r}; use one of: " + ", ".join(b.name for b in tax.behaviours))
        if note:
            notes.append(f"{where}{note}")
        if how == "plain":
            notes.append(f"{where}{name!r} given as a plain name, without evidence")
        elif how == "no evidence" or ev is None:
            notes.append(f"{where}no evidence for {name!r}")
        elif not isinstance(ev, str):
            notes.append(f"{where}evidence for {name!r} is {_kind(ev)}; dropped")
        if bid in label.behaviours:
            notes.append(f"{where}{name!r} listed twice; counted once")
            continue
        label.behaviours.append(bid)
        if isinstance(ev, str) and ev.strip():
            label.evidence[bid] = ev.strip()[:300]
    return label


def validate_fine(text: str, finish_reason: str | None, n_turns: int, tax: Taxonomy) -> Verdict:
    """Labels for turns numbered 1..n_turns (TurnLabel.turn is the 0-based position)."""
    v, obj = _load(text, finish_reason, list_keys=("turns",))
    if v.status == "error":
        return v
    try:
        if isinstance(obj, list):
            v.repairs.append('a bare list instead of {"turns": [...]}')
            obj = {"turns": obj}
        obj = _unwrap(obj, "turns", v.repairs)
        if not isinstance(obj, dict):
            raise Bad(f'expected a JSON object {{"turns": [...]}}, got {_kind(obj)}')
        present, turns = _key(obj, "turns", "", v.repairs)
        if not present:
            raise Bad("missing key 'turns' (one entry per numbered turn)")
        if turns is None:
            raise Bad("key 'turns' is null")
        if not isinstance(turns, list):
            raise Bad(f"key 'turns' must be a list of turn entries, got {_kind(turns)}")
        _extras(obj, ("turns",), "", v.repairs)
        seen: dict[int, TurnLabel] = {}
        for pos, entry in enumerate(turns, start=1):
            if not isinstance(entry, dict):
                raise Bad(
                    f"turn entry {pos}: expected an object with 'turn' and 'behaviours', "
                    f"got {_kind(entry)} {_show(entry)}"
                )
            num = _turn_number(entry, pos, v.repairs)
            if not 1 <= num <= n_turns:
                raise Bad(f"turn {num}: out of range 1-{n_turns} (key 'turn')")
            if num in seen:
                raise Bad(f"turn {num}: listed twice (key 'turn')")
            label = _behaviours(entry, f"turn {num}: ", tax, v.repairs)
            seen[num] = label.model_copy(update={"turn": num - 1})
    except Bad as e:
        return Verdict.fail(str(e))
    missing = [n for n in range(1, n_turns + 1) if n not in seen]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        return Verdict.fail(f"turns missing from the answer: {shown}")
    v.labels = [seen[n] for n in range(1, n_turns + 1)]
    return v.done()

"""Finding the one JSON value in a judge's answer, and repairing it only where the repair cannot
change what is counted (``judge.parse`` validates what it holds).

Accepted with a recorded note: JSON inside a code fence or between prose; near-valid JSON
(trailing commas, single quotes, comments...) repaired by json-repair when the answer is
otherwise complete. Refused (``ValueError`` with the reason, re-asked by the judge): no JSON, two
JSON objects (which one counts?), mismatched brackets, a key given twice in one object (which
value counts?), and an answer that ends inside a string, a number or any list other than
``turns`` (a list of behaviours cut short would silently lose behaviours).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json_repair

from cocoeval.core.taxonomy import name_key

_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_OPENER = re.compile(r"\{|\[(?=\s*\{)")
_DECODER = json.JSONDecoder()
_WORD = re.compile(r"[^\W\d]\w*")
_OPENING = {"}": "{", "]": "["}
_CLOSED_END = set('}]"{[,:')  # an answer may stop after these without cutting a value


@dataclass
class Scan:
    """The bracket structure of a JSON text from its first character."""

    end: int | None = None
    """Index just past the value when its brackets close; None when the text ends first."""
    unclosed: list[tuple[str, str | None]] = field(default_factory=list)
    """Containers left open at the end, outermost first: (bracket, the key it is the value of)."""
    in_string: bool = False
    mismatch: bool = False
    duplicate: tuple[list[Any], str] | None = None
    """(path of the object, key) of the first key given twice in one object."""


def scan(s: str) -> Scan:
    """Walk the brackets of ``s`` (which starts with ``{`` or ``[``), tracking keys and list
    positions, until the first value closes. Strings in double or single quotes and bare words
    (unquoted keys) are read as possible keys."""
    out = Scan()
    stack: list[_Frame] = []
    i, key = 0, None  # key: the last string, while it may still be followed by ":"
    while i < len(s):
        c = s[i]
        if c in "\"'":
            j, buf = i + 1, []
            while j < len(s) and s[j] != c:
                j += 1 if s[j] != "\\" else 2
                buf.append(s[j - 1])
            if j >= len(s):
                out.in_string = True
                break
            key, i = "".join(buf), j + 1
            continue
        if (m := _WORD.match(s, i)) is not None:  # a bare word: an unquoted key, or true/false/null
            key, i = m.group(), m.end()
            continue
        if c == ":" and stack and stack[-1].bracket == "{" and key is not None:
            top = stack[-1]
            if key in top.keys and out.duplicate is None:
                out.duplicate = ([fr.step for fr in stack[1:]], key)
            top.keys.add(key)
            top.pending = key
        elif c == "," and stack and stack[-1].bracket == "[":
            stack[-1].index += 1
        elif c in "{[":
            parent = stack[-1] if stack else None
            step = None if parent is None else parent.pending if parent.bracket == "{" else parent.index
            stack.append(_Frame(c, step))
        elif c in "}]":
            if not stack or stack[-1].bracket != _OPENING[c]:
                out.mismatch = True
                return out
            stack.pop()
            if not stack:
                out.end = i + 1
                return out
        if not c.isspace():
            key = None
        i += 1
    out.unclosed = [(fr.bracket, fr.step if isinstance(fr.step, str) else None) for fr in stack]
    return out


@dataclass
class _Frame:
    bracket: str
    step: str | int | None
    """The key (in an object) or index (in a list) of this container in its parent."""
    keys: set[str] = field(default_factory=set)
    index: int = 0
    pending: str | None = None


def _one_more(rest: str) -> bool:
    """Whether text after the answer's JSON holds another JSON object."""
    for m in re.finditer(r"\{", rest):
        try:
            value, _ = _DECODER.raw_decode(rest, m.start())
        except ValueError:
            continue
        if isinstance(value, dict) and value:
            return True
    return False


def _check_cut(sc: Scan, body: str, list_keys: tuple[str, ...]) -> None:
    """Refuse an unclosed answer whose end may have cut a value or a list of behaviours."""
    if sc.in_string:
        raise ValueError("the answer ends inside a string (cut off?)")
    tail = body.rstrip()
    if tail and tail[-1] not in _CLOSED_END:
        raise ValueError("the answer ends in the middle of a value (cut off?)")
    for depth, (bracket, key) in enumerate(sc.unclosed):
        if bracket == "[" and depth and (key is None or name_key(key) not in list_keys):
            where = f"the list {key!r}" if key else "a list"
            raise ValueError(f"the answer ends inside {where}, which may have been cut short")


def extract_json(text: str, repairs: list[str], list_keys: tuple[str, ...] = (), *, lenient: bool = False) -> Any:
    """The single JSON value in a model's answer ``text``; appends a note to ``repairs`` for each
    repair. The one reader of JSON out of an answer, for judging, simulation and benchmark creation.

    Strict (the default, for judges: what is counted must not change): the rules of this module's
    docstring; ``list_keys`` are keys of lists that may be left unclosed at the end (``turns``:
    each entry is complete or absent). ``lenient`` (simulated turns, LLM-made M/S and clean-up,
    whose results are validated turn by turn afterwards): the text as JSON, else whatever
    json-repair makes of it (possibly ``""``), noted "repaired near-valid JSON"; never raises."""
    if lenient:
        try:
            return json.loads(text)
        except ValueError:
            repairs.append("repaired near-valid JSON")
            return json_repair.loads(text)
    s = text.strip()
    try:
        value = json.loads(s)
        found = s
    except ValueError:
        found = None
    if found is None:
        m = _OPENER.search(s)
        if m is None:
            raise ValueError("no JSON object in the answer")
        start = m.start()
        fence = next((f for f in _FENCE.finditer(s) if f.start(1) <= start <= f.end(1)), None)
        region_end = fence.end(1) if fence else len(s)
        body = s[start:region_end]
        sc = scan(body)
        if sc.mismatch:
            raise ValueError("the answer's brackets do not match")
        found = body[: sc.end] if sc.end is not None else body
        rest = body[sc.end :] + s[region_end:] if sc.end is not None else s[region_end:]
        if _one_more(rest):
            raise ValueError("the answer holds more than one JSON object")
        outside = re.sub(r"```[A-Za-z]*", "", s[:start] + rest).strip()
        try:
            value = json.loads(found)
        except ValueError:
            if sc.end is None:
                _check_cut(sc, found, list_keys)
            value = json_repair.loads(found)
            if not isinstance(value, dict | list) or not value:
                raise ValueError("no JSON object in the answer") from None
            repairs.append("repaired near-valid JSON")
        if fence and not outside:
            repairs.insert(0, "read the JSON inside a code fence")
        elif outside:
            repairs.insert(0, "extracted the JSON from surrounding text")
    sc = scan(found) if found.startswith(("{", "[")) else Scan()
    if sc.duplicate is not None:
        raise DuplicateKey(value, sc.duplicate[0], sc.duplicate[1])
    return value


class DuplicateKey(ValueError):
    """A key given twice in one object; ``path`` locates the object (keys and list indices)."""

    def __init__(self, value: Any, path: list[Any], key: str) -> None:
        super().__init__(f"key {key!r} is given twice in one object")
        self.value, self.path, self.key = value, path, key

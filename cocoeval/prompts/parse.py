"""Turning model output into turns: "Speaker: utterance" lines or JSON, speakers matched to the
participants, copied turns checked and stripped. Every repair is recorded as a note."""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from cocoeval.core.schema import Turn

from .answer_json import extract_json

# A fence opens a line or ends one (not "run ```make``` first"); a cut answer may not close it.
_FENCE = re.compile(r"(?:^[ \t]*|(?=```\w*[ \t]*\n))```(?:json|JSON|text|markdown)?\s*\n?(.*?)(?:```|\Z)", re.S | re.M)
_JSON_START = re.compile(r"\{|\[\s*(?:[\[\{\"']|\]|$)")
_LIST_MARK = re.compile(r"^\s*(?:\(?\d{1,3}[.):]|[-*•>]|#+)\s+")
_LINE = re.compile(
    r"^\s*[\*_\[]*\s*(?P<speaker>[^:\*\[\]\n]{1,60}?(?:\s*\[[^\]\n:]*\])?)\s*[\*_\]]*\s*"
    r":(?!//|\d)\s*[\*_]*\s*(?P<text>.*)$"
)  # not "https://x" nor "at 12:30"
_PAREN = re.compile(r"\s*[\(\[][^\)\]]*[\)\]]\s*")
_TEXT_KEYS = ("text", "utterance", "content", "message", "turn", "says")
_SPEAKER_KEYS = ("speaker", "name", "role", "participant", "from")
# a model's own voice, not a participant's: a refusal, or a remark under a label such as "Note:"
REFUSAL = re.compile(
    r"\b(?:i can(?:no|')?t (?:help|continue|comply|assist|do|write|generate|create|provide)|"
    r"i(?: am|'m) (?:not able|unable) to|i won't|as an ai\b)",
    re.I,
)
META_SPEAKERS = frozenset({"note", "notes", "assistant", "ai", "system", "model", "disclaimer", "response", "output"})
"""``norm_name`` of labels a model writes its own remarks under; never a turn unless a participant
has that name."""
_QUOTES = {'"': '"', "“": "”", "”": "”", "„": "“", "«": "»"}


@dataclass
class Parsed:
    turns: list[Turn] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unknown_speakers: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    """The model's own remarks dropped from the turns (refusals, "Note: ..."), as written."""


CHARS_PER_TOKEN = 8
"""More characters per output token than any tokenizer averages over an answer (English prose
averages about 4; whitespace runs are counted as one character): an answer longer than
``CHARS_PER_TOKEN`` x its call's ``max_tokens`` was not held to that budget."""


def over_budget(text: str, max_tokens: int | None) -> str | None:
    """Why an answer is longer than its call's output budget (``max_tokens``) could make it: a
    server that ignored max_tokens (a 2 MB "turn"), so it is no usable answer; None when it fits
    or there is no budget."""
    if not max_tokens or len(text) <= CHARS_PER_TOKEN * max_tokens:
        return None
    if len(" ".join(text.split())) <= CHARS_PER_TOKEN * max_tokens:
        return None
    return (
        f"{len(text)} characters, more than {max_tokens} output tokens can hold (at most {CHARS_PER_TOKEN} "
        "per token): the server did not keep to max_tokens"
    )


def norm_name(name: str) -> str:
    """Letters and digits of any script, case-folded, accents dropped."""
    return "".join(c for c in unicodedata.normalize("NFKD", name.casefold()) if c.isalnum())


def _fold(name: str) -> str:
    return " ".join(name.casefold().split())


def match_speaker(raw: str, participants: list[str]) -> tuple[str, str]:
    """(speaker, how): exact, then case/spacing-insensitive, then also punctuation/accent-insensitive
    (each also without a parenthetical role), else 'unknown' with the name as written; a name that
    fits several participants equally is 'unknown'."""
    raw = raw.strip()
    raw = raw if raw in participants else raw.strip("*_\"'").strip()
    if raw in participants:
        return raw, "exact"
    for key in (_fold, norm_name):  # case/spacing first, then punctuation too
        for cand in (raw, _PAREN.sub(" ", raw).strip()):
            hits = {p for p in participants if key(p) == key(cand)} if key(cand) else set()
            if hits:  # an ambiguous name stays unknown rather than risk the wrong participant
                return (hits.pop(), "normalised") if len(hits) == 1 else (raw, "unknown")
    return raw, "unknown"


def _from_json(obj: Any) -> list[tuple[str, str]] | None:
    if isinstance(obj, dict):
        for key in ("turns", "conversation", "continuation", "dialogue", "messages", "utterances"):
            if isinstance(obj.get(key), list):
                return _from_json(obj[key])
        sp = next((obj[k] for k in _SPEAKER_KEYS if isinstance(obj.get(k), str)), None)
        tx = next((obj[k] for k in _TEXT_KEYS if isinstance(obj.get(k), str)), None)
        return [(sp, tx)] if sp is not None and tx is not None else None
    if isinstance(obj, list):
        out: list[tuple[str, str]] = []
        for item in obj:
            if isinstance(item, str):
                m = _LINE.match(item)
                if m:
                    out.append((m.group("speaker"), m.group("text")))
                continue
            got = _from_json(item)
            if got:
                out.extend(got)
        return out
    return None


def _plausible_speaker(name: str) -> bool:
    """A name has a letter, at most 6 words, and does not end a sentence ("Note that...")."""
    name = name.strip()
    return bool(re.search(r"[^\W\d_]", name)) and len(name.split()) <= 6 and not name.endswith((".", "!", "?"))


def _known_speaker_line(line: str, participants: list[str]) -> re.Match[str] | None:
    """A line that opens with a participant's name as given (any length: committee labels such as
    "The Acting Chair (Mrs. A. Mends (Brossard, Lib.))" pass neither the 60-character nor the
    six-word limit of an unknown name), possibly in markdown, then a colon."""
    for name in sorted(participants, key=len, reverse=True):
        if len(name) <= 60 and len(name.split()) <= 6 and not name.endswith((".", "!", "?")):
            continue  # the general pattern reads it
        m = re.match(
            r"^\s*[\*_\[]*\s*(?P<speaker>" + re.escape(name) + r")\s*[\*_\]]*\s*:\s*[\*_]*\s*(?P<text>.*)$", line, re.I
        )
        if m:
            return m
    return None


def _from_lines(text: str, participants: list[str], notes: list[str]) -> list[tuple[str, str]]:
    """Lines without a speaker continue the previous turn, except text after a blank line that
    no later turn follows (a closing remark such as "Let me know if...")."""
    out: list[tuple[str, str]] = []
    skipped, gap = 0, False
    pending: list[str] = []
    for line in text.splitlines():
        line = _LIST_MARK.sub("", line.strip()).strip()
        if not line or set(line) <= set("-=*_#`"):
            gap = bool(out)
            continue
        m = _known_speaker_line(line, participants) or _LINE.match(line)
        if m and (m.re is not _LINE or _plausible_speaker(m.group("speaker"))):
            sp, tx = m.group("speaker"), m.group("text")
            if not out and not tx.strip(" *_") and match_speaker(sp, participants)[1] == "unknown":
                skipped += 1  # a preamble such as "Here is the continuation:"
                continue
            if pending:
                out[-1] = (out[-1][0], " ".join([out[-1][1], *pending]).strip())
            out.append((sp, tx))
            pending = []
        elif out and (gap or pending) and out[-1][1].strip(" *_"):
            pending.append(line)
        elif out:
            sp, tx = out[-1]
            out[-1] = (sp, f"{tx} {line}".strip())
        else:
            skipped += 1
        gap = False
    if skipped:
        notes.append(f"ignored {skipped} line(s) of text before the first turn")
    if pending:
        notes.append(f"ignored {len(pending)} line(s) of text after the last turn")
    return out


def parse_turns(text: str, participants: list[str], *, truncated: bool = False) -> Parsed:
    """Parse turns from a model answer. ``truncated``: the answer hit max_tokens, so its last
    turn may be cut and is dropped."""
    res = Parsed()
    body = text.strip()
    fence = _FENCE.search(body)
    if fence:
        body = fence.group(1).strip()
        res.notes.append("read the turns inside a code fence")
    pairs: list[tuple[str, str]] | None = None
    if _JSON_START.match(body):  # not "[Alice]: hi"
        fixes: list[str] = []
        value = extract_json(body, fixes, lenient=True)
        pairs = _from_json(value) if value not in ("", None) else None
        if pairs:
            res.notes.extend(fixes)
    if not pairs:
        pairs = _from_lines(body, participants, res.notes)
    empty = 0
    for raw_sp, raw_tx in pairs:
        tx = raw_tx.strip().strip("*_").strip()
        if len(tx) >= 2 and _QUOTES.get(tx[0]) == tx[-1] and not set(tx[1:-1]) & set('"“”'):
            tx = tx[1:-1].strip()
        if not tx:
            empty += 1
            continue
        sp, how = match_speaker(raw_sp, participants)
        if how == "unknown" and (norm_name(sp) in META_SPEAKERS or REFUSAL.search(f"{sp}: {tx}")):
            res.refusals.append(f"{raw_sp.strip()}: {tx}"[:120])
            res.notes.append(f"dropped {res.refusals[-1]!r}: the model's own remark, not a participant's turn")
            continue
        note = f"speaker {raw_sp.strip()!r} matched to {sp!r}"
        if how == "normalised" and sp != raw_sp.strip() and note not in res.notes:
            res.notes.append(note)
        elif how == "unknown" and sp not in res.unknown_speakers:
            res.notes.append(f"unknown speaker {sp!r}")
            res.unknown_speakers.append(sp)
        res.turns.append(Turn(speaker=sp, text=tx))
    if empty:
        res.notes.append(f"dropped {empty} empty turn(s)")
    if truncated and res.turns:
        res.turns.pop()
        res.notes.append("dropped the last turn: the answer was cut off at max_tokens")
    return res


def _similar(a: str, b: str) -> float:
    na, nb = " ".join(a.lower().split()), " ".join(b.lower().split())
    return difflib.SequenceMatcher(None, na, nb, autojunk=False).ratio()


def strip_copied(turns: list[Turn], expected: list[Turn], threshold: float = 0.6) -> tuple[list[Turn], int]:
    """Remove the leading turns that copy the end of ``expected`` (the most recent turns, in
    order; a model may copy fewer than asked). Returns the new turns and how many were copies."""

    def same(t: Turn, e: Turn) -> bool:
        sim = _similar(t.text, e.text)
        return sim >= 0.85 or (t.speaker == e.speaker and sim >= threshold)

    for n in range(min(len(expected), len(turns)), 0, -1):
        tail = expected[len(expected) - n :]
        if all(same(t, e) for t, e in zip(turns[:n], tail, strict=True)):
            return turns[n:], n
    return turns, 0

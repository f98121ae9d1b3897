"""ConvoKit corpus directories (``utterances.jsonl``, ``speakers.json``, ``conversations.json``).

One conversation per ``conversation_id``, turns ordered by timestamp. For debate corpora such as
IQ2 the speakers' stances come from the conversation's for/against/moderator lists (or the
speakers' meta) and the debate motion becomes the goal. Non-speech pseudo-speakers (RESULTS,
which holds vote tallies and timings) are dropped and reported.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import iter_jsonl, read_json, validate
from cocoeval.core.schema import Conversation, Participant, Turn

from ._registry import SourceReport, participants_in_order, source, unreadable
from ._text import normalise_space

PSEUDO_SPEAKERS = frozenset({"RESULTS"})
"""Speaker labels that are not people (vote results, timing notes)."""

_STANCE_ROLE = {
    "mod": "moderator",
    "moderator": "moderator",
    "for": "debater for the motion",
    "against": "debater against the motion",
    "audience": "audience member",
}
_MOTION = re.compile(r"\bmotion(?:\s+is)?[,:]?\s*[\"“]([^\"”]{8,200}?)[.\s]*[\"”]", re.I)
_TITLE_JUNK = re.compile(r"contact publicist|madison ave|\bfl\.", re.I)


class _RawUtterance(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    speaker: str
    conversation_id: str
    text: str | None = ""
    timestamp: float | int | None = None
    meta: dict[str, Any] | None = None


def _optional_json(path: Path, report: SourceReport, *, values: bool = True) -> dict:
    """An optional ConvoKit JSON object; ``values``: each value is an object (or null) too. One
    that cannot be read (a dangling symlink...) is read as absent and reported as skipped."""
    if (why := unreadable(path)) is not None:
        report.skip(path, None, why)
        return {}
    if not path.exists():
        return {}
    data = read_json(path)
    hint = "ConvoKit stores speakers.json/conversations.json as {id: {...}}"
    if not isinstance(data, dict):
        raise InputError("expected a JSON object keyed by id", file=str(path), hint=hint)
    if values:
        for k, v in data.items():
            if v is not None and not isinstance(v, dict):
                raise InputError(f"expected an object, got {type(v).__name__}", file=str(path), record=k, hint=hint)
    return data


def _names(meta: dict, key: str, path: Path, cid: str) -> list[str]:
    """A conversation's list of speaker names (moderator/for/against); [] when absent."""
    v = meta.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise InputError(
            f"'{key}' must be a list of speaker names",
            file=str(path),
            record=cid,
            hint='e.g. "for": ["Speaker A", "Speaker B"]',
        )
    return v


def _stance(v: Any, file: Path, record: str) -> str | None:
    if v is None or isinstance(v, str | int | float | bool):
        return None if v is None or v == "" else str(v)
    raise InputError(
        f"a stance/speakertype must be a word such as 'for', got {type(v).__name__}",
        file=str(file),
        record=record,
        hint="see the IQ2 corpus for the layout",
    )


def find_motion(title: str, turns: list[Turn]) -> tuple[str, str]:
    """The debate motion and where it came from: the title when it is clean, else the motion
    the moderator quotes most often, else whatever title there is."""
    title = normalise_space(title)
    if title and not _TITLE_JUNK.search(title) and len(title) <= 150:
        return title, "title"
    quoted = Counter(m.group(1).strip() for t in turns for m in _MOTION.finditer(t.text))
    if quoted:
        return quoted.most_common(1)[0][0], "transcript"
    return title, "title (noisy)" if title else "none"


@source("convokit")
class ConvoKitLoader:
    def files(self, path: Path) -> list[Path]:
        if path.is_file() and path.name == "utterances.jsonl":
            return [path.parent]
        if (path / "utterances.jsonl").is_file():
            return [path]
        # an unreadable utterances.jsonl (a dangling symlink...) or folder is listed itself, for
        # load_conversations to report as skipped with its reason (rglob of a plain name passes
        # over dangling symlinks and folders it cannot list)
        unlisted: list[Path] = []
        found = {
            Path(root) / "utterances.jsonl"
            for root, _, names in os.walk(path, onerror=lambda e: unlisted.append(Path(e.filename)))
            if "utterances.jsonl" in names
        }
        return sorted({p if unreadable(p) else p.parent for p in found} | set(unlisted))

    def load_file(self, path: Path, dataset: str | None, report: SourceReport) -> Iterator[Conversation]:
        ufile = path / "utterances.jsonl"
        corpus = _optional_json(path / "corpus.json", report, values=False)
        speakers = _optional_json(path / "speakers.json", report)
        conv_meta = _optional_json(path / "conversations.json", report)
        if dataset is None:
            name = str(corpus.get("name") or path.name)
            dataset = "iq2" if "iq2" in name.lower() else re.sub(r"\W+", "_", name).strip("_").lower()
        grouped: dict[str, list[tuple[tuple, _RawUtterance]]] = defaultdict(list)
        seen: dict[str, int] = {}
        for n, obj in iter_jsonl(ufile):
            u = validate(_RawUtterance, obj, file=ufile, record=f"line {n}")
            if u.id in seen:  # a repeated utterance would be a doubled turn: keep the first
                report.skip(ufile, f"line {n}", f"duplicate utterance id {u.id!r} (line {seen[u.id]} kept)")
                continue
            seen[u.id] = n
            key = (u.timestamp is None, u.timestamp if u.timestamp is not None else 0, n)
            grouped[u.conversation_id].append((key, u))
        for cid in sorted(grouped):
            utts = [u for _, u in sorted(grouped[cid], key=lambda kv: kv[0])]
            meta = conv_meta.get(cid) or {}
            cfile = path / "conversations.json"
            roles = {key: _names(meta, key, cfile, cid) for key in ("moderator", "for", "against")}
            turns: list[Turn] = []
            stance_seen: dict[str, str] = {}
            pseudo = 0
            for i, u in enumerate(utts):
                if u.speaker in PSEUDO_SPEAKERS:
                    pseudo += 1
                    continue
                text = normalise_space(u.text or "")
                if not text:
                    report.drop("empty utterance")
                    continue
                speaker = normalise_space(u.speaker)
                turns.append(Turn(speaker=speaker, text=text, source_index=i))
                st = _stance((u.meta or {}).get("speakertype"), ufile, f"utterance {u.id}") or _stance(
                    (speakers.get(u.speaker) or {}).get("stance"), path / "speakers.json", u.speaker
                )
                if st:
                    stance_seen.setdefault(speaker, str(st))
            if pseudo:
                report.drop("pseudo-speaker (e.g. RESULTS)", pseudo)
            info = {}
            for name in {t.speaker for t in turns}:
                stance = stance_seen.get(name)
                for side, st in (("moderator", "mod"), ("for", "for"), ("against", "against")):
                    if name in roles[side]:
                        stance = st
                info[name] = Participant(name=name, stance=stance, role=_STANCE_ROLE.get(stance or ""))
            title = meta.get("title")
            if title is not None and not isinstance(title, str):
                raise InputError(
                    f"'title' must be text, got {type(title).__name__}",
                    file=str(cfile),
                    record=cid,
                    hint="the title is the debate motion as a string",
                )
            motion, motion_source = find_motion(title or "", turns)
            yield Conversation(
                id=cid,
                dataset=dataset,
                source_format="convokit",
                kind="multiparty",
                source_file=str(ufile),
                participants=participants_in_order(turns, info),
                goals=[f"Debate the motion: {motion}"] if motion else [],
                turns=turns,
                meta={
                    "motion": motion,
                    "motion_source": motion_source,
                    "pseudo_speaker_turns_dropped": pseudo,
                    "source_turns": len(utts),
                    **{k: meta[k] for k in ("date", "results") if k in meta},
                },
            )

"""QMSum per-meeting JSON: ``{"meeting_transcripts": [{speaker, content}], "topic_list": [...]}``.

QMSum's three domains are three datasets: a file's dataset comes from the nearest folder named
Product, Academic or Committee (any case; with train/val/test subfolders as in QMSum's own
``data/`` layout, or flat) -> qmsum_product, qmsum_academic, qmsum_committee, unless ``#DATASET``
names it. QMSum's ``data/ALL`` folder repeats the meetings of the three domains in one place:
below a folder that has the domain folders it is left out (the same meetings are read from their
domain folders), and a file found only there, with no ``#DATASET``, is an error, so that the
domains never become one "qmsum" dataset. A meeting file elsewhere (your own, outside QMSum's
layout) is dataset "qmsum" unless ``#DATASET`` names it.
Artefacts such as {disfmarker} or {vocalsound} are removed by rule (the offline default); the
raw text stays alongside (the LLM clean-up of the paper, A.3, is a build stage: cocoeval.bench.clean).
Speaker labels of one person (QMSum Committee's "Mr. X (constituency, party)" beside "Mr. X", "The
Chair (Hon. X (…))" beside "The Chair") are merged into one name by the rule of ``speaker_merges``; every merge is listed in the source report
(``merged_speakers``) and in the conversation's ``meta``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import read_json, validate
from cocoeval.core.schema import Conversation, Participant

from ._registry import SourceReport, cleaned_turn, participants_in_order, sorted_files, source
from ._text import normalise_space

DOMAINS = {"product", "academic", "committee"}


class _RawTurn(BaseModel):
    model_config = ConfigDict(extra="allow")
    speaker: str
    content: str


class _RawTopic(BaseModel):
    model_config = ConfigDict(extra="allow")
    topic: str
    relevant_text_span: list[list[str | int]] = []


class _RawMeeting(BaseModel):
    model_config = ConfigDict(extra="allow")
    meeting_transcripts: list[_RawTurn]
    topic_list: list[_RawTopic] = []


_ACADEMIC = re.compile(r"^(Professor|PhD|Grad|Postdoc|Undergrad)\b", re.I)
_ACADEMIC_ROLE = {
    "professor": "professor",
    "phd": "PhD student",
    "grad": "graduate student",
    "postdoc": "postdoc",
    "undergrad": "undergraduate student",
}


def role_for(dataset: str, name: str) -> str | None:
    """The role a QMSum speaker label reveals, where it reveals one."""
    if dataset == "qmsum_product":
        return name  # AMI labels are the roles: Project Manager, Marketing, ...
    if m := _ACADEMIC.match(name):
        return _ACADEMIC_ROLE[m.group(1).lower()]
    if re.search(r"\bchair\b", name, re.I):
        return "chair"
    if name.endswith(" AM"):
        return "Assembly Member"
    return None


_HONORIFIC = re.compile(
    r"^(?:The Right Honourable|The Honourable|Right Hon\.|Hon\.|Mrs\.?|Mr\.?|Ms\.?|Miss"
    r"|Dr\.?|Professor)\s+"
)
_GENDER = {"Mr": "m", "Mr.": "m", "Mrs": "f", "Mrs.": "f", "Ms": "f", "Ms.": "f", "Miss": "f"}
_CHAIR_OF = re.compile(r"^The (?:Acting |Deputy |Vice[- ])?Chair \((?P<person>.+)\)$")


def _strip_suffixes(label: str) -> str:
    """``label`` without its trailing parenthesised groups ("(Carleton, CPC)", "(Minister of Health)",
    nested ones too); unchanged when its parentheses do not balance."""
    s = label.strip()
    while s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                break
        if depth != 0 or i == 0:
            return s
        s = s[:i].rstrip()
    return s


def person_key(label: str) -> tuple[str, str | None] | None:
    """The person a speaker label names, as (name key, gender of the honorific or None), or None
    when the label cannot be tied to one person by rule (see ``speaker_merges``)."""
    if m := _CHAIR_OF.match(label):
        label = m.group("person")  # "The Chair (Mr. X (…))" names Mr. X
        if not _HONORIFIC.match(label):
            return None
    elif label.startswith("The ") and not _HONORIFIC.match(label):
        return None  # a role alone ("The Chair", "The Acting Chair"): who it is is unknown
    core = _strip_suffixes(label)
    h = _HONORIFIC.match(core)
    name = normalise_space(core[h.end() :] if h else core)
    if len(name.split()) < 2:
        return None  # a surname (or one word) alone cannot tell two people apart
    return name.casefold(), _GENDER.get(h.group(0).strip()) if h else None


def speaker_merges(counts: dict[str, int]) -> dict[str, tuple[str, list[str]]]:
    """Speaker labels (with their turn counts) of one meeting that name the same person, merged:
    label -> (canonical label, every label merged into it), for merged labels only.

    The rule: two labels are one person when they give the same full name (two words or more,
    compared case-insensitively) once a leading honorific (Mr., Mrs., Ms., Miss, Hon., Right Hon.,
    The Honourable, The Right Honourable, Dr, Professor) and trailing parenthesised suffixes (the
    committee's "(constituency, party)" or "(Minister of ...)") are set aside, and a chair label
    naming a person, "The [Acting/Deputy/Vice] Chair (Mr. X ...)", is read as that person. And a
    bare label is the person of the label that is the same words with a parenthesised qualifier
    ("The Chair" and "The Chair (Hon. Anthony Rota (…))", "Mr. Smith" and "Mr. Smith (Carleton,
    CPC)"), when the meeting has exactly one such person (``bare_label_merges``). Never merged: a
    role label naming nobody that no qualified label of the meeting names (or that several
    people's do: "The Chair" beside "The Chair (Mr. A)" and "The Chair (Mrs. B)"), a name of one
    word without its qualified form, and a group whose honorifics disagree on gender (Mr. against
    Mrs./Ms./Miss). The canonical label is the longest (it carries the constituency and party, the
    ministry or the chair role that the short form leaves out), then the one with more turns, then
    the first in alphabetical order.
    """
    group: dict[str, str] = {}
    """label -> the key of its group (a person's name key, or the label itself when alone)."""
    genders: dict[str, set[str]] = {}
    keyed: dict[str, list[str]] = {}
    for label in sorted(counts):
        if (key := person_key(label)) is None:
            continue
        keyed.setdefault(key[0], []).append(label)
        if key[1]:
            genders.setdefault(key[0], set()).add(key[1])
    for person, labels in keyed.items():
        if len(labels) >= 2 and len(genders.get(person, set())) <= 1:
            for label in labels:
                group[label] = "person:" + person
    for bare, qualified in bare_label_merges(counts, group).items():
        target = group.get(qualified, qualified)
        for label in [k for k, g in group.items() if g == group.get(bare, bare)] or [bare]:
            group[label] = target
        group.setdefault(qualified, target)
    members: dict[str, list[str]] = {}
    for label in sorted(group):
        members.setdefault(group[label], []).append(label)
    out: dict[str, tuple[str, list[str]]] = {}
    for labels in members.values():
        if len(labels) < 2:
            continue
        canonical = min(labels, key=lambda x: (-len(x), -counts[x], x))
        for label in labels:
            out[label] = (canonical, labels)
    return out


def bare_label_merges(counts: dict[str, int], group: dict[str, str] | None = None) -> dict[str, str]:
    """{bare label: a qualified label of the same person}: a label without a trailing
    parenthesised group ("The Chair") and the labels that are the same words (case-insensitively)
    with one ("The Chair (Hon. Anthony Rota (…))"), where those name one person: one label, or
    labels of one group of ``group`` (label -> group key, ``speaker_merges``'s name rule). Where
    they name several people, the bare label could be any of them, and it is left alone."""
    group = group or {}
    qualified: dict[str, list[str]] = {}
    for label in sorted(counts):
        if (core := _strip_suffixes(label)) != label:
            qualified.setdefault(core.casefold(), []).append(label)
    out: dict[str, str] = {}
    for label in sorted(counts):
        if _strip_suffixes(label) != label or not (cands := qualified.get(label.casefold())):
            continue
        people = {group.get(c, c) for c in cands}
        own = group.get(label)
        if len(people) == 1 and (own is None or own in people):
            out[label] = cands[0]
    return out


def dataset_for(path: Path) -> str | None:
    """qmsum_<domain> from the nearest Product/Academic/Committee folder; None when none."""
    for part in reversed(path.parent.parts):
        if part.lower() in DOMAINS:
            return f"qmsum_{part.lower()}"
    return None


def _under_all(path: Path, root: Path) -> bool:
    return any(part.lower() == "all" for part in path.relative_to(root).parent.parts)


@source("qmsum")
class QMSumLoader:
    def files(self, path: Path) -> list[Path]:
        found = sorted_files(path, "*.json")
        if path.is_dir() and any(dataset_for(f) for f in found):
            # data/ALL duplicates the domain folders' meetings: read them from their domains
            found = [f for f in found if not _under_all(f, path)]
        return found

    def load_file(self, path: Path, dataset: str | None, report: SourceReport) -> Iterator[Conversation]:
        data = read_json(path)
        if not isinstance(data, dict) or "meeting_transcripts" not in data:
            raise InputError(
                "not a QMSum meeting: no 'meeting_transcripts' list",
                file=str(path),
                hint="pass QMSum per-meeting JSON files (or use another source kind)",
            )
        meeting = validate(_RawMeeting, data, file=path, record="meeting")
        dataset = dataset or dataset_for(path)
        if dataset is None and any(p.lower() == "all" for p in path.parent.parts):
            raise InputError(
                "this meeting is in QMSum's data/ALL folder, which mixes the Product, "
                "Academic and Committee domains: its domain (dataset) is unknown",
                file=str(path),
                hint="point the source at QMSum's data/ folder (its Product/Academic/Committee "
                "folders become qmsum_product, qmsum_academic, qmsum_committee), not at "
                "data/ALL, or name the dataset: qmsum:PATH#qmsum_product",
            )
        dataset = dataset or "qmsum"
        turns = [
            t
            for i, raw in enumerate(meeting.meeting_transcripts)
            if (t := cleaned_turn(raw.speaker, raw.content, i, report)) is not None
        ]
        merges = speaker_merges(Counter(t.speaker for t in turns))
        merged: dict[str, list[str]] = {}
        for canonical, labels in merges.values():
            merged.setdefault(canonical, labels)
        for canonical, labels in sorted(merged.items()):
            report.merged_speakers.append(
                {
                    "file": str(path),
                    "dataset": dataset,
                    "conversation": path.stem,
                    "canonical": canonical,
                    "labels": labels,
                }
            )
        turns = [t.model_copy(update={"speaker": merges[t.speaker][0]}) if t.speaker in merges else t for t in turns]
        topics: list[dict[str, Any]] = []
        for topic in meeting.topic_list:
            spans: list[list[int]] = []
            for span in topic.relevant_text_span:
                try:
                    spans.append([int(span[0]), int(span[-1])])
                except (ValueError, IndexError):
                    continue  # a malformed span only loses the topic's location, not the topic
            topics.append({"topic": normalise_space(topic.topic), "spans": spans})

        def role(name: str) -> str | None:  # a merged person keeps a role any of their labels reveals
            return next((r for x in [name, *merged.get(name, [])] if (r := role_for(dataset, x))), None)

        info = {s: Participant(name=s, role=role(s)) for s in {t.speaker for t in turns}}
        yield Conversation(
            id=path.stem,
            dataset=dataset,
            source_format="qmsum",
            kind="multiparty",
            source_file=str(path),
            participants=participants_in_order(turns, info),
            goals=[t["topic"] for t in topics if t["topic"]],
            turns=turns,
            meta={
                "topics": topics,
                "source_turns": len(meeting.meeting_transcripts),
                **(
                    {"merged_speakers": [{"canonical": c, "labels": ls} for c, ls in sorted(merged.items())]}
                    if merged
                    else {}
                ),
            },
        )

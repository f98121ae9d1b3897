"""QMSum per-meeting JSON: ``{"meeting_transcripts": [{speaker, content}], "topic_list": [...]}``.

The dataset comes from the folder (product/academic/committee -> qmsum_product, ...) unless given.
Artefacts such as {disfmarker} or {vocalsound} are removed by rule; the raw text stays alongside.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..errors import InputError
from ..jsonio import read_json, validate
from ..schema import Conversation, Participant
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
_ACADEMIC_ROLE = {"professor": "professor", "phd": "PhD student", "grad": "graduate student",
                  "postdoc": "postdoc", "undergrad": "undergraduate student"}


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


def dataset_for(path: Path) -> str:
    for part in reversed(path.parent.parts):
        if part.lower() in DOMAINS:
            return f"qmsum_{part.lower()}"
    return "qmsum"


@source("qmsum")
class QMSumLoader:
    def files(self, path: Path) -> list[Path]:
        return sorted_files(path, "*.json")

    def load_file(self, path: Path, dataset: str | None, report: SourceReport) -> Iterator[Conversation]:
        data = read_json(path)
        if not isinstance(data, dict) or "meeting_transcripts" not in data:
            raise InputError("not a QMSum meeting: no 'meeting_transcripts' list", file=str(path),
                             hint="pass QMSum per-meeting JSON files (or use another source kind)")
        meeting = validate(_RawMeeting, data, file=path, record="meeting")
        dataset = dataset or dataset_for(path)
        turns = [t for i, raw in enumerate(meeting.meeting_transcripts)
                 if (t := cleaned_turn(raw.speaker, raw.content, i, report)) is not None]
        topics = []
        for t in meeting.topic_list:
            spans = []
            for span in t.relevant_text_span:
                try:
                    spans.append([int(span[0]), int(span[-1])])
                except (ValueError, IndexError):
                    continue  # a malformed span only loses the topic's location, not the topic
            topics.append({"topic": normalise_space(t.topic), "spans": spans})
        info = {s: Participant(name=s, role=role_for(dataset, s)) for s in {t.speaker for t in turns}}
        yield Conversation(
            id=path.stem,
            dataset=dataset,
            source_format="qmsum",
            source_file=str(path),
            participants=participants_in_order(turns, info),
            goals=[t["topic"] for t in topics if t["topic"]],
            turns=turns,
            meta={"topics": topics, "source_turns": len(meeting.meeting_transcripts)},
        )

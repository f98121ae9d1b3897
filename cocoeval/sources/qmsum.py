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
"""

from __future__ import annotations

import re
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
            raise InputError("not a QMSum meeting: no 'meeting_transcripts' list", file=str(path),
                             hint="pass QMSum per-meeting JSON files (or use another source kind)")
        meeting = validate(_RawMeeting, data, file=path, record="meeting")
        dataset = dataset or dataset_for(path)
        if dataset is None and any(p.lower() == "all" for p in path.parent.parts):
            raise InputError("this meeting is in QMSum's data/ALL folder, which mixes the Product, "
                             "Academic and Committee domains: its domain (dataset) is unknown", file=str(path),
                             hint="point the source at QMSum's data/ folder (its Product/Academic/Committee "
                             "folders become qmsum_product, qmsum_academic, qmsum_committee), not at "
                             "data/ALL, or name the dataset: qmsum:PATH#qmsum_product")
        dataset = dataset or "qmsum"
        turns = [t for i, raw in enumerate(meeting.meeting_transcripts)
                 if (t := cleaned_turn(raw.speaker, raw.content, i, report)) is not None]
        topics: list[dict[str, Any]] = []
        for topic in meeting.topic_list:
            spans: list[list[int]] = []
            for span in topic.relevant_text_span:
                try:
                    spans.append([int(span[0]), int(span[-1])])
                except (ValueError, IndexError):
                    continue  # a malformed span only loses the topic's location, not the topic
            topics.append({"topic": normalise_space(topic.topic), "spans": spans})
        info = {s: Participant(name=s, role=role_for(dataset, s)) for s in {t.speaker for t in turns}}
        yield Conversation(
            id=path.stem,
            dataset=dataset,
            source_format="qmsum",
            kind="multiparty",
            source_file=str(path),
            participants=participants_in_order(turns, info),
            goals=[t["topic"] for t in topics if t["topic"]],
            turns=turns,
            meta={"topics": topics, "source_turns": len(meeting.meeting_transcripts)},
        )

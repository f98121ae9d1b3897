"""The TCR (Topic-Conversation Relevance) dataset's JSON, used for SIM and NCPC.

Public layout: ``{SOURCE: {MEETING_ID: {"topics": {TOPIC: {"transcripts": [{line_id, speaker,
start_s, end_s, contents, ...}], "topic_start_line", ...}}, "metadata": {...}}}}``. A file holding
one meeting (``{"topics": ..., "metadata": ...}``) or a map of meetings is read too. Turns are
re-assembled across topics in line order; the topics become the goals.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import read_json, validate
from cocoeval.core.schema import Conversation, Participant

from ._registry import SourceReport, cleaned_turn, participants_in_order, sorted_files, source
from ._text import normalise_space


class _RawLine(BaseModel):
    model_config = ConfigDict(extra="allow")
    line_id: float | None = None
    speaker: str | None = None
    start_s: float | None = None
    contents: str | None = None

    @field_validator("contents", "speaker", mode="before")
    @classmethod
    def _nan_is_none(cls, v: Any) -> Any:
        return None if isinstance(v, float) and math.isnan(v) else v


class _RawTopic(BaseModel):
    model_config = ConfigDict(extra="allow")
    transcripts: list[_RawLine]
    topic_start_line: float | None = None


class _RawMeeting(BaseModel):
    model_config = ConfigDict(extra="allow")
    topics: dict[str, _RawTopic]
    metadata: dict[str, Any] = {}


def _meetings(data: Any, path: Path) -> Iterator[tuple[str, str, Any]]:
    """Yield (source name, meeting id, raw meeting) whatever the nesting."""
    if isinstance(data, dict) and "topics" in data:
        yield path.stem, path.stem, data
        return
    if not isinstance(data, dict) or not data:
        raise InputError(
            "not TCR JSON: expected an object of meetings",
            file=str(path),
            hint='expected {"SOURCE": {"MEETING": {"topics": {...}}}}',
        )
    if all(isinstance(v, dict) and "topics" in v for v in data.values()):
        for mid, m in data.items():
            yield path.stem, mid, m
        return
    for src, meetings in data.items():
        if not isinstance(meetings, dict):
            raise InputError(
                f"source {src!r} is not an object of meetings",
                file=str(path),
                record=src,
                hint='expected {"SOURCE": {"MEETING": {"topics": {...}}}}',
            )
        for mid, m in meetings.items():
            if not isinstance(m, dict) or "topics" not in m:
                raise InputError(
                    "meeting has no 'topics'",
                    file=str(path),
                    record=f"{src}/{mid}",
                    hint="each meeting needs a topics object with transcripts",
                )
            yield src, mid, m


@source("tcr")
class TCRLoader:
    def files(self, path: Path) -> list[Path]:
        return sorted_files(path, "*.json")

    def load_file(self, path: Path, dataset: str | None, report: SourceReport) -> Iterator[Conversation]:
        data = read_json(path)
        for src, mid, raw in _meetings(data, path):
            meeting = validate(_RawMeeting, raw, file=path, record=f"{src}/{mid}")
            lines: list[tuple[tuple, _RawLine]] = []
            order = 0
            topics = sorted(
                meeting.topics.items(),
                key=lambda kv: kv[1].topic_start_line if kv[1].topic_start_line is not None else math.inf,
            )
            for _name, topic in topics:
                for line in topic.transcripts:
                    key = (
                        line.line_id if line.line_id is not None else math.inf,
                        line.start_s if line.start_s is not None else math.inf,
                        order,
                    )
                    lines.append((key, line))
                    order += 1
            lines.sort(key=lambda kv: kv[0])
            turns = [
                t
                for i, (_, line) in enumerate(lines)
                if (
                    t := cleaned_turn(
                        line.speaker, line.contents, int(line.line_id) if line.line_id is not None else i, report
                    )
                )
                is not None
            ]
            info = {s: Participant(name=s) for s in {t.speaker for t in turns}}
            yield Conversation(
                id=str(mid),
                dataset=dataset or src.lower(),
                source_format="tcr",
                kind="multiparty",
                source_file=str(path),
                participants=participants_in_order(turns, info),
                goals=[normalise_space(name) for name, _ in topics if normalise_space(name)],
                turns=turns,
                meta={
                    "tcr_source": src,
                    "source_turns": len(lines),
                    **{k: v for k, v in meeting.metadata.items() if k != "variations"},
                },
            )

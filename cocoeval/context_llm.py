"""LLM-made metadata M, summary S and (optionally) cleaned turns for built instances.

Every call goes through the LLM layer (cached). An answer that cannot be used keeps the
extractive M/S (or the uncleaned turns) and is reported with its reason; nothing is dropped
silently.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import json_repair
from pydantic import BaseModel, ConfigDict

from .llm import Call, GenerateRequest, Message, Runner
from .parsing import match_speaker
from .prompts import load_prompt
from .schema import Conversation, Instance, Metadata, Participant, Summary, Turn
from .simulate import format_metadata, format_turns

METADATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goals": {"type": "array", "items": {"type": "string"}},
        "participants": {"type": "array", "items": {
            "type": "object", "properties": {"name": {"type": "string"}, "role": {"type": "string"}},
            "required": ["name", "role"], "additionalProperties": False}},
    },
    "required": ["goals", "participants"], "additionalProperties": False,
}
CLEAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"turns": {"type": "array", "items": {
        "type": "object", "properties": {"speaker": {"type": "string"}, "text": {"type": "string"}},
        "required": ["speaker", "text"], "additionalProperties": False}}},
    "required": ["turns"], "additionalProperties": False,
}


class LLMContextOptions(BaseModel):
    """Models for LLM-made benchmark context (None: keep the extractive default)."""

    model_config = ConfigDict(extra="forbid")

    metadata: str | None = None
    """Model spec for M (goals, participants with roles)."""
    summary: str | None = None
    """Model spec for S (a paragraph about the turns before the history)."""
    clean: str | None = None
    """Model spec for transcript clean-up of x and r (disfluencies, artefacts)."""
    max_transcript_chars: int = 24_000
    """Longest transcript sent for M/S (~6k tokens); earlier turns are left out and it is said."""


def _tail(turns: Sequence[Turn], max_chars: int) -> tuple[str, bool]:
    lines: list[str] = []
    size = 0
    for t in reversed(turns):
        line = f"{t.speaker}: {t.text}"
        if lines and size + len(line) > max_chars:
            return "\n".join(reversed(lines)), True
        lines.append(line)
        size += len(line) + 1
    return "\n".join(reversed(lines)), False


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return json_repair.loads(text)


def enrich(instances: list[Instance], conversations: dict[tuple[str, str], Conversation],
           opts: LLMContextOptions, runner: Runner) -> tuple[list[Instance], dict[str, Any]]:
    """Return instances with LLM-made M/S/turns where asked, and a report of what failed."""
    report: dict[str, Any] = {"metadata": {"model": opts.metadata, "ok": 0, "failed": []},
                              "summary": {"model": opts.summary, "ok": 0, "failed": []},
                              "clean": {"model": opts.clean, "ok": 0, "failed": []}}
    out = list(instances)

    def conv(inst: Instance) -> Conversation:
        return conversations[(inst.dataset, inst.provenance.conversation_id)]

    def prior(inst: Instance) -> list[Turn]:
        c = conv(inst)
        return c.turns[: inst.provenance.start_index]

    if opts.metadata:
        p = load_prompt("metadata")
        calls = []
        for inst in out:
            text, _ = _tail([*prior(inst)[-40:], *inst.history], opts.max_transcript_chars)
            system, user = p.render(known=format_metadata(inst.metadata), transcript=text)
            calls.append(Call(model=opts.metadata, stage="metadata", tag=inst.id, request=GenerateRequest(
                messages=[Message(role="system", content=system), Message(role="user", content=user)],
                max_tokens=800, temperature=0, json_schema=METADATA_SCHEMA, schema_name="metadata")))
        for i, res in enumerate(runner.run(calls)):
            inst = out[i]
            why = _metadata_problem(res)
            if why:
                report["metadata"]["failed"].append({"instance": inst.id, "reason": why})
                continue
            data = _json(res.response.text)
            speakers = [t.speaker for t in [*inst.history, *inst.reference]]
            known = {p.name: p for p in inst.metadata.participants}
            parts: dict[str, Participant] = {}
            for pt in data["participants"]:
                name, how = match_speaker(str(pt.get("name", "")), list(known) or speakers)
                if how == "unknown":
                    continue
                old = known.get(name)
                parts[name] = Participant(name=name, role=str(pt.get("role") or "") or (old.role if old else None),
                                          stance=old.stance if old else None)
            for name, p0 in known.items():  # never lose a participant the data knows
                parts.setdefault(name, p0)
            goals = [str(g).strip() for g in data["goals"] if str(g).strip()] or inst.metadata.goals
            out[i] = inst.model_copy(update={"metadata": Metadata(
                goals=goals, participants=list(parts.values()), method="llm", model=opts.metadata,
                extra=inst.metadata.extra)})
            report["metadata"]["ok"] += 1

    if opts.summary:
        p = load_prompt("summary")
        idx, calls = [], []
        for i, inst in enumerate(out):
            before = prior(inst)
            if not before:
                continue
            text, cut = _tail(before, opts.max_transcript_chars)
            note = f" (the last part only: earlier turns of the {len(before)} are left out)" if cut else ""
            system, user = p.render(transcript=text, truncated=note)
            idx.append(i)
            calls.append(Call(model=opts.summary, stage="summary", tag=inst.id, request=GenerateRequest(
                messages=[Message(role="system", content=system), Message(role="user", content=user)],
                max_tokens=400, temperature=0)))
        for i, res in zip(idx, runner.run(calls), strict=True):
            inst = out[i]
            text = (res.response.text.strip() if res.status == "ok" and res.response else "")
            if not text or (res.response and res.response.finish_reason in ("length", "max_tokens")):
                reason = res.reason or ("truncated answer" if text else "empty answer")
                report["summary"]["failed"].append({"instance": inst.id, "reason": reason})
                continue
            out[i] = inst.model_copy(update={"summary": Summary(
                text=" ".join(text.split()), method="llm", model=opts.summary,
                covers_turns=inst.summary.covers_turns)})
            report["summary"]["ok"] += 1

    if opts.clean:
        p = load_prompt("clean")
        calls = []
        for inst in out:
            system, user = p.render(transcript=format_turns([*inst.history, *inst.reference]))
            calls.append(Call(model=opts.clean, stage="clean", tag=inst.id, request=GenerateRequest(
                messages=[Message(role="system", content=system), Message(role="user", content=user)],
                max_tokens=8000, temperature=0, json_schema=CLEAN_SCHEMA, schema_name="transcript")))
        for i, res in enumerate(runner.run(calls)):
            inst = out[i]
            turns = [*inst.history, *inst.reference]
            cleaned, why = _cleaned(res, turns)
            if why:
                report["clean"]["failed"].append({"instance": inst.id, "reason": why})
                continue
            h = len(inst.history)
            out[i] = inst.model_copy(update={"history": cleaned[:h], "reference": cleaned[h:]})
            report["clean"]["ok"] += 1
    return out, {k: v for k, v in report.items() if v["model"]}


def _metadata_problem(res: Any) -> str | None:
    if res.status != "ok" or res.response is None:
        return f"call failed: {res.reason}"
    try:
        data = _json(res.response.text)
    except Exception:
        return "unparseable JSON"
    if not isinstance(data, dict) or not isinstance(data.get("goals"), list) \
            or not isinstance(data.get("participants"), list):
        return "JSON without goals/participants lists"
    if not all(isinstance(p, dict) for p in data["participants"]):
        return "participants are not objects"
    return None


def _cleaned(res: Any, turns: list[Turn]) -> tuple[list[Turn], str | None]:
    if res.status != "ok" or res.response is None:
        return [], f"call failed: {res.reason}"
    try:
        data = _json(res.response.text)
        items = data["turns"]
    except Exception:
        return [], "unparseable JSON"
    if not isinstance(items, list) or len(items) != len(turns):
        return [], f"turn count changed ({len(items) if isinstance(items, list) else '?'} for {len(turns)})"
    out = []
    for old, new in zip(turns, items, strict=True):
        if not isinstance(new, dict) or str(new.get("speaker", "")).strip() != old.speaker:
            return [], "speakers changed or reordered"
        text = " ".join(str(new.get("text", "")).split())
        if not text:
            return [], "a turn was emptied"
        out.append(old.model_copy(update={"text": text, "raw_text": old.raw_text or old.text}))
    return out, None

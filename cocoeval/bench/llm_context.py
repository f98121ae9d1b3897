"""LLM-made benchmark inputs, as the paper made them (§3.2, A.3, E.1): metadata M from the
utterances of the whole conversation (one call per conversation, shared by its instances), a
paragraph summary S of the turns before the history (one call per instance), and the clean-up of
QMSum Product and Academic turns before windowing (``clean``).

Every call goes through the LLM layer (cached, batchable). What a stage cannot make is never
silently replaced: with ``on_failure: skip`` (the default) the instance is left out and listed
in the build report with its reason (a rebuild sends the failed calls again: failures are not
cached); with ``on_failure: extractive`` it keeps the extractive M/S, labelled ``method:
extractive``, and is listed too. The extractive M/S (``context.py``) stay the offline default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cocoeval.core.schema import Conversation, Instance, Metadata, Participant, Summary
from cocoeval.llm import Call, GenerateRequest, Message, Runner
from cocoeval.prompts.answer_json import extract_json
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.parse import match_speaker
from cocoeval.prompts.render import transcript_head, transcript_tail

from .clean import CLEAN_SCHEMA, clean_calls, clean_conversations
from .config import LLMContextOptions

__all__ = [
    "CLEAN_SCHEMA",
    "METADATA_SCHEMA",
    "LLMContextOptions",
    "clean_calls",
    "clean_conversations",
    "enrich",
    "metadata_calls",
    "summary_calls",
]

METADATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goals": {"type": "array", "items": {"type": "string"}},
        "participants": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "role": {"type": "string"}},
                "required": ["name", "role"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["goals", "participants"],
    "additionalProperties": False,
}


def _ask(
    model: str, stage: str, tag: str, system: str, user: str, max_tokens: int, opts: LLMContextOptions, **kw: Any
) -> Call:
    return Call(
        model=model,
        stage=stage,
        tag=tag,
        request=GenerateRequest(
            messages=[Message(role="system", content=system), Message(role="user", content=user)],
            max_tokens=max_tokens,
            temperature=0,
            reasoning_effort=opts.reasoning_effort,
            **kw,
        ),
    )


def _metadata_problem(res: Any) -> str | None:
    if res.status != "ok" or res.response is None:
        return f"call failed: {res.reason}"
    if res.response.finish_reason in ("length", "max_tokens"):
        return "answer cut off at max_tokens"
    try:
        data = extract_json(res.response.text, [], lenient=True)
    except Exception:
        return "unparseable JSON"
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("goals"), list)
        or not isinstance(data.get("participants"), list)
    ):
        return "JSON without goals/participants lists"
    if not all(isinstance(p, dict) for p in data["participants"]):
        return "participants are not objects"
    return None


def _llm_metadata(data: dict, conv: Conversation, old: Metadata, model: str, ref: str) -> Metadata:
    """M from the answer: roles from the model, matched to the conversation's speakers; a speaker
    the model left out keeps the data's entry, one it invented is dropped; stances known from the
    data (IQ2 sides) are kept."""
    known = {p.name: p for p in conv.participants}
    names = list(known) or list(dict.fromkeys(t.speaker for t in conv.turns))
    parts: dict[str, Participant] = {}
    for pt in data["participants"]:
        name, how = match_speaker(str(pt.get("name", "")), names)
        if how == "unknown" or name in parts:
            continue
        p0 = known.get(name)
        parts[name] = Participant(
            name=name,
            role=str(pt.get("role") or "").strip() or (p0.role if p0 else None),
            stance=p0.stance if p0 else None,
        )
    for name in names:  # never lose a participant the data knows
        parts.setdefault(name, known.get(name) or Participant(name=name))
    goals = [str(g).strip() for g in data["goals"] if str(g).strip()]
    extra = {k: v for k, v in old.extra.items() if k != "topics_in_history"}  # not in the paper's M
    return Metadata(goals=goals, participants=list(parts.values()), method="llm", model=model, prompt=ref, extra=extra)


def metadata_calls(
    instances: Sequence[Instance], conversations: Mapping[tuple[str, str], Conversation], opts: LLMContextOptions
) -> tuple[dict[tuple[str, str], list[int]], list[tuple[str, str]], list[Call]]:
    """M's requests, as ``enrich`` sends them (and ``cocoeval estimate`` prices them): one per
    conversation of ``instances``: the instances of each conversation, the conversations in
    order, and their calls."""
    assert opts.metadata
    p = load_prompt(opts.metadata_prompt)
    by_conv: dict[tuple[str, str], list[int]] = {}
    for i, it in enumerate(instances):
        by_conv.setdefault((it.dataset, it.provenance.conversation_id), []).append(i)
    keys = sorted(by_conv)
    calls = []
    for key in keys:
        c = conversations[key]
        text, n = transcript_head(c.turns, opts.max_transcript_chars)
        cut = f"; cut after the first {n} of {len(c.turns)} turns" if n < len(c.turns) else ""
        system, user = p.render(transcript=text, n_turns=len(c.turns), truncated=cut)
        calls.append(
            _ask(
                opts.metadata,
                "metadata",
                f"{key[0]}/{key[1]}",
                system,
                user,
                opts.metadata_max_tokens,
                opts,
                json_schema=METADATA_SCHEMA,
                schema_name="metadata",
            )
        )
    return by_conv, keys, calls


def summary_calls(
    instances: Sequence[Instance | None], conversations: Mapping[tuple[str, str], Conversation], opts: LLMContextOptions
) -> tuple[list[int], list[Call]]:
    """S's requests, as ``enrich`` sends them (and ``cocoeval estimate`` prices them): one per
    instance that some turn precedes (None: an instance already left out); their indices and calls."""
    assert opts.summary
    p = load_prompt(opts.summary_prompt)
    idx, calls = [], []
    for i, inst in enumerate(instances):
        if inst is None:
            continue
        before = conversations[(inst.dataset, inst.provenance.conversation_id)].turns[: inst.provenance.start_index]
        if not before:  # nothing precedes x: S is empty, as the extractive S is
            continue
        text, n = transcript_tail(before, opts.max_transcript_chars)
        note = f" (the last {n} of the {len(before)} turns)" if n < len(before) else ""
        system, user = p.render(transcript=text, truncated=note)
        idx.append(i)
        calls.append(_ask(opts.summary, "summary", inst.id, system, user, opts.summary_max_tokens, opts))
    return idx, calls


def enrich(
    instances: list[Instance],
    conversations: dict[tuple[str, str], Conversation],
    opts: LLMContextOptions,
    runner: Runner,
) -> tuple[list[Instance], dict[str, Any]]:
    """Instances with LLM-made M and S where asked, and a report per stage (ok, failed with
    reasons, and the instances left out)."""
    report: dict[str, Any] = {}
    out: list[Instance | None] = list(instances)
    fallback: dict[int, list[str]] = {}

    def fail(stage: str, i: int, why: str) -> None:
        report[stage]["failed"].append({"instance": instances[i].id, "reason": why})
        if opts.on_failure == "skip":
            out[i] = None
        else:
            fallback.setdefault(i, []).append(stage)

    if opts.metadata:
        p = load_prompt(opts.metadata_prompt)
        report["metadata"] = {"model": opts.metadata, "prompt": p.ref, "calls": 0, "ok": 0, "failed": []}
        by_conv, keys, calls = metadata_calls(instances, conversations, opts)
        report["metadata"]["calls"] = len(calls)
        for key, res in zip(keys, runner.run(calls) if calls else [], strict=True):
            why = _metadata_problem(res)
            for i in by_conv[key]:
                if why:
                    fail("metadata", i, why)
                    continue
                inst = out[i]
                assert inst is not None and res.response is not None  # (_metadata_problem: not None)
                out[i] = inst.model_copy(
                    update={
                        "metadata": _llm_metadata(
                            extract_json(res.response.text, [], lenient=True),
                            conversations[key],
                            inst.metadata,
                            opts.metadata,
                            p.ref,
                        )
                    }
                )
                report["metadata"]["ok"] += 1

    if opts.summary:
        p = load_prompt(opts.summary_prompt)
        report["summary"] = {"model": opts.summary, "prompt": p.ref, "calls": 0, "ok": 0, "failed": []}
        idx, calls = summary_calls(out, conversations, opts)
        report["summary"]["calls"] = len(calls)
        for i, res in zip(idx, runner.run(calls) if calls else [], strict=True):
            inst = out[i]
            assert inst is not None
            text = " ".join(res.response.text.split()) if res.status == "ok" and res.response else ""
            if not text or (res.response and res.response.finish_reason in ("length", "max_tokens")):
                fail(
                    "summary",
                    i,
                    f"call failed: {res.reason}"
                    if res.status != "ok"
                    else ("answer cut off at max_tokens" if text else "empty answer"),
                )
                continue
            out[i] = inst.model_copy(
                update={
                    "summary": Summary(
                        text=text,
                        method="llm",
                        model=opts.summary,
                        prompt=p.ref,
                        covers_turns=inst.summary.covers_turns,
                    )
                }
            )
            report["summary"]["ok"] += 1

    report["on_failure"] = opts.on_failure
    report["skipped_instances"] = [instances[i].id for i, x in enumerate(out) if x is None]
    report["kept_extractive"] = {instances[i].id: stages for i, stages in sorted(fallback.items())}
    return [x for x in out if x is not None], report

"""The LLM clean-up of transcripts (paper A.3): before windowing, the turns of the conversations
of the chosen datasets (QMSum Product and Academic by default) are sent, in order and in chunks,
to a model that removes disfluencies, fillers, unnecessary repetitions and special tokens while
keeping the content. The cleaned text replaces the turn text; the source text stays in
``raw_text``. A turn the model empties (nothing but fillers) is dropped and counted. A chunk that
cannot be used (failed call, unparseable answer, turns added, dropped, reordered or re-attributed)
leaves its conversation out of the benchmark, with the reason in the build report — a conversation
is never used half-cleaned or silently uncleaned. Failed calls are not cached, so a rebuild sends
them again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cocoeval.core.schema import Conversation, Turn
from cocoeval.llm import Call, GenerateRequest, Message, Runner
from cocoeval.prompts.answer_json import extract_json
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.render import numbered_transcript

if TYPE_CHECKING:
    from .config import LLMContextOptions

CLEAN_PROMPT = "clean"
CLEAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "turns": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"speaker": {"type": "string"}, "text": {"type": "string"}},
                "required": ["speaker", "text"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["turns"],
    "additionalProperties": False,
}


def chunks(turns: Sequence[Turn], max_turns: int, max_chars: int) -> list[tuple[int, int]]:
    """[start, end) ranges of at most ``max_turns`` turns and about ``max_chars`` characters of
    source text (a single longer turn is a chunk of its own)."""
    out: list[tuple[int, int]] = []
    start, size = 0, 0
    for i, t in enumerate(turns):
        n = len(t.raw_text or t.text) + len(t.speaker) + 8
        if i > start and (i - start >= max_turns or size + n > max_chars):
            out.append((start, i))
            start, size = i, 0
        size += n
    if start < len(turns):
        out.append((start, len(turns)))
    return out


def _apply(res: Any, turns: Sequence[Turn]) -> tuple[list[Turn | None], str | None]:
    """The chunk's turns with their cleaned text (None: emptied), or the reason it is unusable."""
    if res.status != "ok" or res.response is None:
        return [], f"call failed: {res.reason}" + (f" ({res.detail})" if res.detail else "")
    if res.response.finish_reason in ("length", "max_tokens"):
        return [], "answer cut off at max_tokens"
    try:
        items = extract_json(res.response.text, [], lenient=True)["turns"]
    except Exception:
        return [], 'unparseable JSON (expected {"turns": [{"speaker", "text"}]})'
    if not isinstance(items, list) or len(items) != len(turns):
        return [], f"turn count changed ({len(items) if isinstance(items, list) else '?'} for {len(turns)})"
    out: list[Turn | None] = []
    for old, new in zip(turns, items, strict=True):
        if not isinstance(new, dict) or str(new.get("speaker", "")).strip() != old.speaker:
            return [], "speakers changed or reordered"
        text = " ".join(str(new.get("text") or "").split())
        out.append(old.model_copy(update={"text": text, "raw_text": old.raw_text or old.text}) if text else None)
    return out, None


def clean_calls(
    conversations: Sequence[Conversation], opts: LLMContextOptions, worth_cleaning: Callable[[Conversation], bool]
) -> tuple[list[int], list[Call], list[tuple[int, int, int]]]:
    """The clean-up's requests, as ``clean_conversations`` sends them (and ``cocoeval estimate``
    prices them): the indices of the conversations to clean, one call per chunk, and each call's
    (conversation index, start, end)."""
    assert opts.clean
    prompt = load_prompt(opts.clean_prompt)
    todo = [i for i, c in enumerate(conversations) if c.dataset in opts.clean_datasets and worth_cleaning(c)]
    calls: list[Call] = []
    where: list[tuple[int, int, int]] = []
    for i in todo:
        c = conversations[i]
        for a, b in chunks(c.turns, opts.clean_turns_per_call, opts.clean_max_chars):
            system, user = prompt.render(n=b - a, transcript=numbered_transcript(c.turns[a:b]))
            calls.append(
                Call(
                    model=opts.clean,
                    stage="clean",
                    tag=f"{c.dataset}/{c.id}/{a}-{b - 1}",
                    request=GenerateRequest(
                        messages=[Message(role="system", content=system), Message(role="user", content=user)],
                        max_tokens=opts.clean_max_tokens,
                        temperature=0,
                        reasoning_effort=opts.reasoning_effort,
                        json_schema=CLEAN_SCHEMA,
                        schema_name="transcript",
                    ),
                )
            )
            where.append((i, a, b))
    return todo, calls, where


def clean_conversations(
    conversations: list[Conversation],
    opts: LLMContextOptions,
    runner: Runner,
    worth_cleaning: Callable[[Conversation], bool],
) -> tuple[list[Conversation], dict]:
    """Clean the conversations of ``opts.clean_datasets`` that ``worth_cleaning`` (long enough to
    give an instance); the others pass unchanged. Returns the conversations to build from (a
    failed one left out) and the report."""
    assert opts.clean
    prompt = load_prompt(opts.clean_prompt)
    report: dict[str, Any] = {
        "model": opts.clean,
        "prompt": prompt.ref,
        "datasets": list(opts.clean_datasets),
        "conversations_cleaned": 0,
        "turns_cleaned": 0,
        "turns_emptied": 0,
        "calls": 0,
        "failed": [],
    }
    todo, calls, where = clean_calls(conversations, opts, worth_cleaning)
    report["calls"] = len(calls)
    results = runner.run(calls) if calls else []
    new_turns: dict[int, list[Turn | None]] = {i: list(conversations[i].turns) for i in todo}
    failed: dict[int, str] = {}
    for (i, a, b), res in zip(where, results, strict=True):
        if i in failed:
            continue
        cleaned, why = _apply(res, conversations[i].turns[a:b])
        if why:
            failed[i] = f"LLM clean-up failed on turns {a}-{b - 1}: {why}"
            continue
        new_turns[i][a:b] = cleaned
    out: list[Conversation] = []
    meta = {"method": "llm", "model": opts.clean, "prompt": prompt.ref}
    for i, c in enumerate(conversations):
        if i in failed:
            report["failed"].append(
                {"dataset": c.dataset, "conversation": c.id, "file": c.source_file, "reason": failed[i]}
            )
            continue
        if i not in new_turns:
            out.append(c)
            continue
        kept = [t for t in new_turns[i] if t is not None]
        report["conversations_cleaned"] += 1
        report["turns_cleaned"] += len(kept)
        report["turns_emptied"] += len(c.turns) - len(kept)
        out.append(
            c.model_copy(
                update={
                    "turns": kept,
                    "meta": {**c.meta, "text_cleaning": meta, "turns_emptied_by_clean_up": len(c.turns) - len(kept)},
                }
            )
        )
    return out, report

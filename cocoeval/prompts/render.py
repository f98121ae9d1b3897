"""Prompt rendering: the one place where an instance (M, S, x), the turns written so far and a
target to judge become the messages a model is sent. Prompts are files loaded by name
(``prompts.py``); the functions here fill them. Simulation, judging, the SFT export, the forecast
and the LLM-made benchmark inputs all render through this module, so a training example, a
forecast request and the request a run sends are byte-identical where they should be.

Changing any text made here changes call-cache keys (and what a cached run reuses): the
cache-key invariance test (``tests/llm/test_prompt_cache.py``) checks that nothing changes by accident.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from cocoeval.core.schema import Instance, Metadata, Turn
from cocoeval.core.taxonomy import Taxonomy
from cocoeval.llm import Message

from .files import Prompt, load_prompt

FORMAT_RULE = (
    "One turn per line, as `Speaker: utterance`, with each speaker's name written exactly "
    "as in the participants list. Write only the turns."
)
CHATBOT_SYSTEM_PROMPT = "chatbot"
"""The prompt file of the assistant in a human–AI conversation."""
_TARGET_MARK = "\x00target\x00"


# ---------------------------------------------------------------- building blocks


def format_turns(turns: Sequence[Turn]) -> str:
    return "\n".join(f"{t.speaker}: {t.text}" for t in turns) or "(none)"


def format_metadata(m: Metadata) -> str:
    lines = ["Goals:"] + [f"- {g}" for g in m.goals or ["(not stated)"]]
    lines.append("Participants:")
    for p in m.participants:
        extra = ", ".join(x for x in (p.role, p.stance and f"stance: {p.stance}") if x)
        lines.append(f"- {p.name}" + (f" ({extra})" if extra else ""))
    topics = m.extra.get("topics_in_history")
    if topics:
        lines.append("Topics under discussion: " + "; ".join(topics))
    return "\n".join(lines)


def format_behaviours(tax: Taxonomy) -> str:
    """The behaviours by category, as the taxonomy-guided simulation prompt lists them."""
    out = []
    for cat in ("inconsistent", "uncollaborative"):
        bs = tax.by_category(cat)
        if bs:
            out.append(f"{cat.capitalize()} behaviours:")
            out += [f"- {b.name}: {b.definition}" for b in bs]
    return "\n".join(out)


def behaviours_block(tax: Taxonomy) -> str:
    """The behaviours with their categories, as the judge prompts list them."""
    return "\n".join(f"- {b.name} ({b.category}): {b.definition}" for b in tax.behaviours)


def so_far_block(turns: Sequence[Turn]) -> str:
    """The block of turns a simulator has written so far ("" before the first)."""
    if not turns:
        return ""
    return f"# Turns you have written so far (they continue the history)\n{format_turns(turns)}\n\n"


def render_target(turns: list[Turn], judged: list[int]) -> str:
    """The conversation to judge: judged turns numbered from 1, the others marked context only."""
    pos = {i: n for n, i in enumerate(judged, start=1)}
    return "\n".join(
        f"[{pos[i]}] {t.speaker}: {t.text}" if i in pos else f"    ({t.speaker}, context only): {t.text}"
        for i, t in enumerate(turns)
    )


def _context(inst: Instance) -> dict[str, str]:
    """M, S and x as every simulation and judge prompt shows them."""
    return dict(
        metadata=format_metadata(inst.metadata),
        summary=inst.summary.text or "(none)",
        history=format_turns(inst.history),
    )


def _pair(system: str, user: str) -> list[Message]:
    return [Message(role="system", content=system), Message(role="user", content=user)]


# ---------------------------------------------------------------- simulation


def step_messages(
    prompt: Prompt, inst: Instance, so_far: Sequence[Turn], k: int, *, behaviours: str = "", n_copy: int = 5
) -> list[Message]:
    """The messages of one multiparty simulation step: a constant system part (instructions,
    M, S, x: an identical prefix across the calls of a conversation) and a varying user part
    (the turns written ``so_far`` and the request for the next k). SFT export uses the same."""
    system, user = prompt.render(
        **_context(inst),
        so_far=so_far_block(so_far),
        k=k,
        turn_word="turn" if k == 1 else "turns",
        format_rule=FORMAT_RULE,
        behaviours=behaviours,
        n_copy=n_copy,
    )
    return _pair(system, user)


def user_turn_messages(prompt: Prompt, inst: Instance, so_far: Sequence[Turn]) -> list[Message]:
    """The messages asking a simulated user of a human–AI conversation for its next turn."""
    return _pair(*prompt.render(**_context(inst), so_far=so_far_block(so_far)))


def chatbot_messages(inst: Instance, so_far: Sequence[Turn]) -> list[Message]:
    """The assistant's view of a human–AI conversation: the chatbot system prompt, then history
    and the turns written so far as alternating user/assistant messages."""
    system, _ = load_prompt(CHATBOT_SYSTEM_PROMPT).render()
    msgs: list[Message] = []
    for t in [*inst.history, *so_far]:
        role: Literal["user", "assistant"] = "assistant" if t.speaker == "assistant" else "user"
        if msgs and msgs[-1].role == role:  # providers want alternating roles
            msgs[-1] = Message(role=role, content=f"{msgs[-1].content}\n\n{t.text}")
        else:
            msgs.append(Message(role=role, content=t.text))
    if msgs and msgs[0].role == "assistant":
        msgs.insert(0, Message(role="user", content="(The conversation continues.)"))
    if not msgs or msgs[-1].role == "assistant":
        msgs.append(Message(role="user", content="(Please continue.)"))
    return [Message(role="system", content=system), *msgs]


# ---------------------------------------------------------------- one agent per participant


def _agents_context(inst: Instance, so_far: Sequence[Turn]) -> dict[str, str]:
    m = inst.metadata
    people = []
    for p in m.participants:
        extra = ", ".join(x for x in (p.role, p.stance and f"stance: {p.stance}") if x)
        people.append(f"- {p.name}" + (f" ({extra})" if extra else ""))
    return dict(
        goals="\n".join(f"- {g}" for g in m.goals or ["(not stated)"]),
        participants="\n".join(people) or "(not listed)",
        summary=inst.summary.text or "(none)",
        conversation=format_turns([*inst.history, *so_far]),
    )


def agent_messages(prompt: Prompt, inst: Instance, so_far: Sequence[Turn], speaker: str) -> list[Message]:
    """The messages asking one participant's agent (``simulator: agents``) for its next turn: a
    system part speaking to that participant alone (its name and role or stance from M, the goals,
    S), then the conversation so far (x and the turns written)."""
    me = next((p for p in inst.metadata.participants if p.name == speaker), None)
    extra = ", ".join(x for x in (me and me.role, me and me.stance and f"stance: {me.stance}") if x)
    return _pair(*prompt.render(**_agents_context(inst, so_far), name=speaker, role=f" ({extra})" if extra else ""))


def moderator_messages(
    prompt: Prompt, inst: Instance, so_far: Sequence[Turn], candidates: Sequence[str]
) -> list[Message]:
    """The messages asking the moderator of ``simulator: agents`` (policy ``moderator``) who speaks
    next, among ``candidates``."""
    return _pair(*prompt.render(**_agents_context(inst, so_far), candidates="; ".join(candidates)))


# ---------------------------------------------------------------- judging


def judge_messages(
    prompt: Prompt, inst: Instance, turns: list[Turn], judged: list[int], tax: Taxonomy
) -> tuple[list[Message], int | None]:
    """The messages of a judge prompt for one target (``turns``, of which ``judged`` are
    labelled), and where the target starts in the user message when everything before it is the
    same for every target of the instance (a shared prompt prefix; None otherwise)."""
    some = len(judged) < len(turns)
    values = dict(
        n_turns=len(judged),
        behaviours=behaviours_block(tax),
        only_some=" (only the numbered turns are annotated; the others are context)" if some else "",
        **_context(inst),
    )
    system, user = prompt.render(**values, target=render_target(turns, judged))
    marked = prompt.render(**values, target=_TARGET_MARK)[1]
    at = marked.find(_TARGET_MARK)
    shared = at if at >= 0 and marked[:at] == user[:at] else None
    return _pair(system, user), shared


# ---------------------------------------------------------------- transcripts (LLM-made M, S, clean-up)


def transcript_head(turns: Sequence[Turn], max_chars: int) -> tuple[str, int]:
    """``Speaker: text`` lines from the start, about ``max_chars`` at most (at least one line),
    and how many turns they are."""
    lines: list[str] = []
    size = 0
    for line in (f"{t.speaker}: {t.text}" for t in turns):
        if lines and size + len(line) > max_chars:
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines), len(lines)


def transcript_tail(turns: Sequence[Turn], max_chars: int) -> tuple[str, int]:
    """As ``transcript_head``, from the end."""
    text, n = transcript_head(list(reversed(turns)), max_chars)
    return "\n".join(reversed(text.split("\n"))) if n else "", n


def numbered_transcript(turns: Sequence[Turn]) -> str:
    """``[n] Speaker: source text`` lines, numbered from 1 (the clean-up prompt's input)."""
    return "\n".join(f"[{i}] {t.speaker}: {t.raw_text or t.text}" for i, t in enumerate(turns, start=1))

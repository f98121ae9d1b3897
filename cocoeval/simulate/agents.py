"""``simulator: agents`` (beyond the paper): one agent per participant.

Every participant is its own agent, with its own system prompt (its name and role or stance from
M, the goals, S: ``prompts/agent_participant.yaml``), that sees the conversation so far (x, then
the turns written) and writes only its own next turn: one call per turn. Who speaks next is a
policy:

- ``oracle``: the speakers of the human reference, in order (what is said is simulated;
  turn-taking is held fixed, so the behaviours measure content alone);
- ``moderator``: one call (``prompts/agent_moderator.yaml``) picks the next speaker among the
  participants from the conversation so far;
- ``history``: drawn from the speaker-transition frequencies of the history x (who spoke after
  whom), seeded; a speaker x never saw speak next is drawn by how often each spoke in x;
- ``round_robin``: the participants in a fixed order (M's participants, then the other speakers of
  x in order of first appearance), starting after the last speaker of x;
- ``addressee``: the participant the current speaker's last turn names, by name or first name as a
  word of its own, when it names exactly one other participant; otherwise the ``history`` policy;
- ``self_selection``: each participant's agent is asked, in a seeded random order, whether it
  takes the next turn (``prompts/agent_self_selection.yaml``): it writes its turn or answers
  ``PASS``; the first that does not pass speaks (its answer is the turn). Every pass is a call
  (cached as every call). An answer that is neither a usable turn nor exactly ``PASS`` is
  malformed: noted (``MALFORMED``) and asked again, never read as a pass; ``max_attempts``
  malformed answers in a row end the continuation invalid. When every agent passes, the
  ``history`` policy picks the speaker and its agent is asked for the turn as under ``oracle``.

The rules that need no model are ``core.speakers``' (the analysis of next-speaker accuracy measures
the same functions). Policies other than ``oracle`` are beyond the paper, as the simulator is.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cocoeval.core.schema import Turn
from cocoeval.core.speakers import MALFORMED_NOTE, PASSED_NOTE, history_weights, named_participant, round_robin_next
from cocoeval.llm import Call
from cocoeval.prompts.files import Prompt, load_prompt
from cocoeval.prompts.parse import REFUSAL, match_speaker
from cocoeval.prompts.render import agent_messages, moderator_messages

from .plugins import InvalidContinuation, PluginSetup, Reply, SimContext, Simulator, simulator

AGENT_PROMPT = "agent_participant"
MODERATOR_PROMPT = "agent_moderator"
MODERATOR_TAG = "moderator"
SELF_SELECTION_PROMPT = "agent_self_selection"
SELF_SELECTION_TAG = "self-selection"
MALFORMED, PASSED = MALFORMED_NOTE, PASSED_NOTE
_PASS = re.compile(r"^[\s*_\"'`(\[]*pass[\s.!*_\"'`)\]]*$", re.IGNORECASE)
"""A pass: the word PASS alone (any case), maybe in quotes, brackets or emphasis, maybe with a full stop."""
_PASS_AND_MORE = re.compile(r"^[\s*_\"'`(\[]*PASS\b")
"""An answer that begins with PASS (capitals) and goes on: malformed (neither a clean pass nor a turn)."""


class AgentOptions(BaseModel):
    """The options of ``simulator: agents``."""

    model_config = ConfigDict(extra="forbid")

    policy: Literal["oracle", "moderator", "history", "round_robin", "addressee", "self_selection"] = "oracle"
    """Who speaks next: oracle (the reference's speakers), moderator (an LLM call), history (drawn
    from x's speaker transitions, seeded), round_robin (the participants in a fixed order),
    addressee (the one participant the last turn names, else history) or self_selection (each agent
    may pass, asked in a seeded random order; all passing, history). See the module's text."""
    moderator_model: str | None = None
    """policy moderator: the model that picks the next speaker (None: the setup's model)."""
    temperature: float | None = Field(None, ge=0, le=2)
    """Sampling temperature of the agents' and the moderator's calls (None: the provider's default)."""
    max_tokens_per_turn: int = Field(120, ge=8, le=10_000, strict=True)
    """Output budget of one agent's turn (plus 60), 8 to 10,000."""
    max_attempts: int = Field(3, ge=1, le=100, strict=True)
    """Calls in a row that may yield no usable turn (or no known next speaker) before the
    continuation is invalid."""


_NAME_PREFIX = re.compile(r"^\s*[*_\"']*([^:\n]{1,80}?)[*_\"']*\s*:\s*")


def own_turn(text: str, speaker: str, participants: list[str]) -> tuple[str, list[str]]:
    """The agent's turn out of its answer, and notes: a leading ``Name:`` of its own is removed; lines
    where it starts writing another participant's turn (``Other: ...``) are cut off; an answer that
    begins as another participant is no turn of this agent ("" and a note "... wrote as Other")."""
    notes: list[str] = []
    lines = text.strip().splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        m = _NAME_PREFIX.match(line)
        who, how = match_speaker(m.group(1), participants) if m else ("", "unknown")
        if m and how != "unknown" and who == speaker:
            line = line[m.end() :]
        elif m and how != "unknown" and i > 0:
            notes.append(f"cut the answer where it went on as {who}")
            break
        elif m and how != "unknown":  # it answered as someone else: not this agent's turn
            notes.append(f"the agent of {speaker} wrote as {who}")
            return "", notes
        out.append(line)
    return " ".join(x.strip() for x in out if x.strip()).strip().strip('"').strip(), notes


@simulator("agents")
class Agents(Simulator):
    """One agent per participant (see the module's text)."""

    version = "1"
    Options = AgentOptions
    needs_model = True

    @classmethod
    def check_options(cls, setup: PluginSetup) -> dict[str, Any]:
        from cocoeval.core.errors import ConfigError

        if setup.kind == "human_ai":
            raise ConfigError(
                "simulator 'agents' writes multi-party conversations, not human–AI ones",
                hint="use kind: multiparty, or a setup with model: for the human–AI conversations",
            )
        return super().check_options(setup)

    @classmethod
    def prompt_refs(cls, setup: PluginSetup) -> dict[str, str]:
        refs = {AGENT_PROMPT: load_prompt(AGENT_PROMPT).ref}
        if setup.options.get("policy") == "moderator":
            refs[MODERATOR_PROMPT] = load_prompt(MODERATOR_PROMPT).ref
        if setup.options.get("policy") == "self_selection":
            refs[SELF_SELECTION_PROMPT] = load_prompt(SELF_SELECTION_PROMPT).ref
        return refs

    @classmethod
    def model_specs(cls, setup: PluginSetup) -> dict[str, str]:
        mod = setup.options.get("moderator_model")
        return {**super().model_specs(setup), **({"options.moderator_model": mod} if mod else {})}

    async def next_turns(self, ctx: SimContext) -> list[Turn]:
        opts: AgentOptions = ctx.options
        if opts.policy == "self_selection":
            if turn := await self.self_selected(ctx):
                return [turn]
            speaker = history_speaker(ctx)
            ctx.notes.append(f"every agent passed: the history policy chose {speaker}")
        else:
            speaker = await self.next_speaker(ctx)
        prompt = load_prompt(AGENT_PROMPT)
        why: str | None = None
        for attempt in range(opts.max_attempts):
            reply = await self._ask(ctx, prompt, speaker, attempt, f"agent {speaker}")
            text, notes = own_turn(reply.text, speaker, ctx.participants)
            ctx.notes += notes
            why = unusable(reply.truncated, reply.text, text, notes)
            if why is None:
                return [Turn(speaker=speaker, text=text)]
            ctx.notes.append(
                f"no usable turn from the agent of {speaker} (attempt {attempt + 1}: {why}): "
                f"{reply.text.strip()[:120]!r}"
            )
        raise InvalidContinuation(
            f"no usable turn from the agent of {speaker} in {opts.max_attempts} attempts at "
            f"turn {len(ctx.turns) + 1} (last answer: {why})"
        )

    @staticmethod
    async def _ask(ctx: SimContext, prompt: Prompt, speaker: str, attempt: int, tag: str) -> Reply:
        """One call of ``speaker``'s agent with ``prompt`` (its turn, or its turn or PASS)."""
        opts: AgentOptions = ctx.options
        req = ctx.llm.request(
            agent_messages(prompt, ctx.instance, ctx.turns, speaker),
            max_tokens=60 + opts.max_tokens_per_turn,
            temperature=opts.temperature,
            attempt=attempt,
        )
        return await ctx.llm.generate(req, tag=tag)

    async def next_speaker(self, ctx: SimContext) -> str:
        opts: AgentOptions = ctx.options
        if opts.policy == "oracle":
            return ctx.next_reference_speaker
        if opts.policy == "history":
            return history_speaker(ctx)
        if opts.policy == "round_robin":
            last = [*ctx.instance.history, *ctx.turns]
            return round_robin_next(ctx.participants, last[-1].speaker if last else None) or ctx.participants[0]
        if opts.policy == "addressee":
            return addressee_speaker(ctx)
        prompt = load_prompt(MODERATOR_PROMPT)
        named = ""
        for attempt in range(opts.max_attempts):
            req = ctx.llm.request(
                moderator_messages(prompt, ctx.instance, ctx.turns, ctx.participants),
                max_tokens=60,
                temperature=opts.temperature,
                attempt=attempt,
            )
            reply = await ctx.llm.generate(req, model=opts.moderator_model, tag=MODERATOR_TAG)
            who, how = moderator_pick(reply.text, ctx.participants)
            if how != "unknown":
                return who
            named = who
            ctx.notes.append(f"the moderator named no participant (attempt {attempt + 1}): {reply.text.strip()[:80]!r}")
        raise InvalidContinuation(
            f"the moderator named no participant in {opts.max_attempts} attempts at turn "
            f"{len(ctx.turns) + 1} (last answer: {named[:80]!r})"
        )

    async def self_selected(self, ctx: SimContext) -> Turn | None:
        """``self_selection``: the agents asked in a seeded random order whether they take the next
        turn; the turn of the first that does not pass, or None when every agent passes. A
        malformed answer is noted and asked again (a new sample), up to ``max_attempts`` in a row,
        then the continuation is invalid."""
        opts: AgentOptions = ctx.options
        prompt = load_prompt(SELF_SELECTION_PROMPT)
        order = list(ctx.participants)
        ctx.rng.shuffle(order)
        passed: list[str] = []
        for speaker in order:
            why = ""
            for attempt in range(opts.max_attempts):
                reply = await self._ask(ctx, prompt, speaker, attempt, f"{SELF_SELECTION_TAG} {speaker}")
                if _PASS.match(reply.text):
                    passed.append(speaker)
                    break
                text, notes = own_turn(reply.text, speaker, ctx.participants)
                ctx.notes += notes
                why = (
                    "PASS with more text after it"  # a pass or a turn? neither is guessed
                    if _PASS_AND_MORE.match(reply.text)
                    else unusable(reply.truncated, reply.text, text, notes) or ""
                )
                if not why:
                    ctx.notes.append(f"{PASSED} {len(passed)} passed ({', '.join(passed) or 'none'}); {speaker} spoke")
                    return Turn(speaker=speaker, text=text)
                ctx.notes.append(
                    f"{MALFORMED} from the agent of {speaker} (attempt {attempt + 1}: {why}): {reply.text.strip()[:120]!r}"
                )
            else:
                raise InvalidContinuation(
                    f"{opts.max_attempts} malformed self-selection answers in a row from the agent of {speaker} at "
                    f"turn {len(ctx.turns) + 1} (neither PASS nor a usable turn; last: {why})"
                )
        ctx.notes.append(f"{PASSED} {len(passed)} passed ({', '.join(passed)}); every agent passed")
        return None

    def forecast_reply(self, call: Call, ctx: SimContext) -> str:
        ref = ctx.instance.reference[len(ctx.turns)]
        if (call.tag or "").endswith(MODERATOR_TAG):
            return ref.speaker if ref.speaker in ctx.participants else ctx.participants[0]
        if SELF_SELECTION_TAG in (call.tag or ""):  # the reference's next speaker takes the turn, the others pass
            return ref.text if (call.tag or "").endswith(f"{SELF_SELECTION_TAG} {ref.speaker}") else "PASS"
        return ref.text


def moderator_pick(text: str, participants: list[str]) -> tuple[str, str]:
    """The participant the moderator's answer names, as ``match_speaker`` gives it: its first line,
    and when that is ``NAME: ...`` (a moderator that writes the turn it picks) or ``Next: NAME``,
    the name on either side of the colon."""
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    cands = [first.rstrip(".")]
    if m := _NAME_PREFIX.match(first):
        cands += [m.group(1), first[m.end() :].strip().rstrip(".")]
    for cand in cands:
        who, how = match_speaker(cand, participants)
        if how != "unknown":
            return who, how
    return first, "unknown"


def history_speaker(ctx: SimContext) -> str:
    """The next speaker drawn from the speaker transitions of x (seeded by ``ctx.rng``): after the
    last speaker, each speaker in proportion to how often it followed them in x; a last speaker x
    never saw followed, each speaker in proportion to its turns in x."""
    hist = [t.speaker for t in ctx.instance.history]
    turns = [*ctx.instance.history, *ctx.turns]
    weights = history_weights(hist, turns[-1].speaker if turns else None, ctx.participants)
    return ctx.rng.choices(list(weights), weights=list(weights.values()))[0]


def addressee_speaker(ctx: SimContext) -> str:
    """The participant the last turn (of x, then of the turns written) names, when it names exactly
    one other than its speaker (``core.speakers.named_participant``); otherwise the ``history``
    policy's draw."""
    turns = [*ctx.instance.history, *ctx.turns]
    if turns and (named := named_participant(turns[-1].text, turns[-1].speaker, ctx.participants)):
        return named
    return history_speaker(ctx)


def unusable(truncated: bool, raw: str, text: str, notes: list[str]) -> str | None:
    """Why an agent's answer is no turn of its own (None: it is one): cut off at max_tokens, a
    refusal, answered as another participant, empty, or no words of its own once the names are
    taken off (``own_turn`` gave ``text`` and ``notes``)."""
    as_other = next((n.rsplit(" wrote as ", 1)[1] for n in notes if " wrote as " in n), None)
    return (
        "cut off at max_tokens"
        if truncated
        else "refusal"
        if REFUSAL.search(raw)
        else None
        if text
        else f"answered as {as_other}"
        if as_other
        else "empty answer"
        if not raw.strip()
        else "no words of its own"
    )

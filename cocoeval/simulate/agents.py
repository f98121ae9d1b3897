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
  whom), seeded; a speaker x never saw speak next is drawn by how often each spoke in x.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cocoeval.core.schema import Turn
from cocoeval.llm import Call
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.parse import REFUSAL, match_speaker
from cocoeval.prompts.render import agent_messages, moderator_messages

from .plugins import InvalidContinuation, PluginSetup, SimContext, Simulator, simulator

AGENT_PROMPT = "agent_participant"
MODERATOR_PROMPT = "agent_moderator"
MODERATOR_TAG = "moderator"


class AgentOptions(BaseModel):
    """The options of ``simulator: agents``."""

    model_config = ConfigDict(extra="forbid")

    policy: Literal["oracle", "moderator", "history"] = "oracle"
    """Who speaks next: oracle (the reference's speakers), moderator (an LLM call) or history
    (drawn from x's speaker transitions, seeded)."""
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
        return refs

    @classmethod
    def model_specs(cls, setup: PluginSetup) -> dict[str, str]:
        mod = setup.options.get("moderator_model")
        return {**super().model_specs(setup), **({"options.moderator_model": mod} if mod else {})}

    async def next_turns(self, ctx: SimContext) -> list[Turn]:
        speaker = await self.next_speaker(ctx)
        opts: AgentOptions = ctx.options
        prompt = load_prompt(AGENT_PROMPT)
        why: str | None = None
        for attempt in range(opts.max_attempts):
            req = ctx.llm.request(
                agent_messages(prompt, ctx.instance, ctx.turns, speaker),
                max_tokens=60 + opts.max_tokens_per_turn,
                temperature=opts.temperature,
                attempt=attempt,
            )
            reply = await ctx.llm.generate(req, tag=f"agent {speaker}")
            text, notes = own_turn(reply.text, speaker, ctx.participants)
            ctx.notes += notes
            as_other = next((n.rsplit(" wrote as ", 1)[1] for n in notes if " wrote as " in n), None)
            why = (
                "cut off at max_tokens"
                if reply.truncated
                else "refusal"
                if REFUSAL.search(reply.text)
                else None
                if text
                else f"answered as {as_other}"
                if as_other
                else "empty answer"
                if not reply.text.strip()
                else "no words of its own"
            )
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

    async def next_speaker(self, ctx: SimContext) -> str:
        opts: AgentOptions = ctx.options
        if opts.policy == "oracle":
            return ctx.next_reference_speaker
        if opts.policy == "history":
            return history_speaker(ctx)
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

    def forecast_reply(self, call: Call, ctx: SimContext) -> str:
        ref = ctx.instance.reference[len(ctx.turns)]
        if (call.tag or "").endswith(MODERATOR_TAG):
            return ref.speaker if ref.speaker in ctx.participants else ctx.participants[0]
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
    last = turns[-1].speaker if turns else None
    after = Counter(b for a, b in itertools.pairwise(hist) if a == last)
    counts = after or Counter(hist) or Counter(ctx.participants)
    names = sorted(counts)
    return ctx.rng.choices(names, weights=[counts[n] for n in names])[0]

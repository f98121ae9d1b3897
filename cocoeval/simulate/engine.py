"""Simulation: a setup continues each instance's history until it has as many turns as the human
reference. The paper's setup (model × prompt × turns per call × sampling) is a ``SimTask`` per
continuation; a plugin setup a ``PluginTask`` (``plugins``); an imported setup reads its file
(``exchange``) and makes no call.

The loop runs in rounds: each unfinished continuation asks for its next calls (a ``SimTask`` its
next k turns), all calls of a round go through the runner together (cached, concurrent), answers
are parsed and appended. A killed run re-runs the same rounds from the cache, so no completed call
is repeated.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Mapping, Sequence

from cocoeval.core.schema import CallRecord, Continuation, Instance, Turn, participant_names
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.llm import Call, CallResult, GenerateRequest, Message, Runner
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.parse import REFUSAL, over_budget, parse_turns, strip_copied
from cocoeval.prompts.render import (
    chatbot_messages,
    format_behaviours,
    so_far_block,
    step_messages,
    user_turn_messages,
)

from .exchange import import_continuations
from .plugins import PluginTask, new_plugin
from .setup import ImportedSetup, PluginSetup, Setup, SetupBase
from .validity import continuation

# ---------------------------------------------------------------- one continuation


class SimTask:
    """One continuation's calls, planned one step at a time: ``next_call`` renders the request
    for the next turns (with its prompt-cache hints), ``apply`` takes its answer, ``result`` is
    the continuation. The forecast drives it with the reference standing in for the answers."""

    def __init__(self, setup: Setup, setup_id: str, inst: Instance, taxonomy: Taxonomy) -> None:
        self.setup, self.setup_id, self.inst = setup, setup_id, inst
        self.prompt = load_prompt(setup.prompt)
        self.participants = participant_names(inst)
        self.behaviours = format_behaviours(taxonomy)
        self.target = len(inst.reference)
        self.turns: list[Turn] = []
        self.calls: list[CallRecord] = []
        self.notes: list[str] = []
        self.unknown: list[str] = []
        self.attempt = 0
        self.invalid: str | None = None
        self._asked = 0
        self._max_tokens: int | None = None
        """The output budget of the call last made (an answer far longer is unusable: ``over_budget``)."""
        self._sent_at: int | None = None
        """Turns written so far when the previous call was made (its cache breakpoint)."""

    @property
    def done(self) -> bool:
        return self.invalid is not None or len(self.turns) >= self.target

    def next_calls(self) -> list[Call]:
        """The round's calls of this continuation (one), as ``PluginTask`` has them."""
        return [self.next_call()]

    def apply_results(self, results: list[CallResult]) -> None:
        [res] = results
        self.apply(res)

    def _request(self, messages: list[Message], max_tokens: int, presence: bool = True) -> GenerateRequest:
        points, group = self._cache_layout(messages)
        self._max_tokens = max_tokens
        return GenerateRequest(
            messages=messages,
            max_tokens=max_tokens,
            temperature=self.setup.temperature,
            presence_penalty=self.setup.presence_penalty if presence else None,
            sample=self.setup.sample * 100 + self.attempt,
            cache_points=points,
            cache_group=group,
        )

    def _cache_layout(self, messages: list[Message]) -> tuple[list[tuple[int, int]], str | None]:
        """Prompt-cache hints (transport only): the calls of a continuation share the system
        message, then the turns written so far, which grow from call to call. Breakpoints: the
        end of the system message, where the previous call's "so far" turns end (read), and where
        this call's end (written for the next call; not on a call that should end the
        continuation). A continuation made in one call shares nothing: no breakpoint (a cache
        write costs extra)."""
        n = len(self.turns)
        asked = min(self.setup.turns_per_call, self.target - n)
        prev, self._sent_at = self._sent_at, n
        if self.setup.kind != "human_ai" and self.setup.turns_per_call >= self.target and not n and not self.attempt:
            return [], None
        system, user = messages[0].content, messages[-1].content
        points = [(0, len(system))]
        base = user.find(so_far_block(self.turns)) if n else -1
        if base >= 0:
            ends = {prev} if prev else set()
            if n + asked < self.target or self.attempt:
                ends.add(n)
            points += [
                (len(messages) - 1, base + len(so_far_block(self.turns[:p])) - 1) for p in sorted(ends) if p <= n
            ]
        return points, "cocoeval-" + hashlib.sha256(system.encode()).hexdigest()[:20]

    def next_call(self) -> Call:
        s, inst = self.setup, self.inst
        tag = f"{inst.id}|{s.name}|turn {len(self.turns) + 1}"
        # a step of a multi-step loop, or a re-ask, waits for an earlier answer: in batch mode
        # it runs live (or in rounds of batches); a whole continuation in one call does not
        dependent = s.kind == "human_ai" or s.turns_per_call < self.target or self.attempt > 0 or bool(self.turns)
        if s.kind == "human_ai":
            if inst.reference[len(self.turns)].speaker == "assistant":
                return Call(
                    model=s.chatbot or s.model, stage="simulate", tag=tag, request=self._chat_request(), dependent=True
                )
            self._asked = 1
            return Call(
                model=s.model,
                stage="simulate",
                tag=tag,
                dependent=True,
                request=self._request(
                    user_turn_messages(self.prompt, inst, self.turns), 60 + s.max_tokens_per_turn * 4
                ),
            )
        k = min(s.turns_per_call, self.target - len(self.turns))
        self._asked = k
        messages = step_messages(self.prompt, inst, self.turns, k, behaviours=self.behaviours, n_copy=s.n_copy)
        extra = s.copies
        return Call(
            model=s.model,
            stage="simulate",
            tag=tag,
            dependent=dependent,
            request=self._request(messages, 60 + s.max_tokens_per_turn * (k + extra)),
        )

    def _chat_request(self) -> GenerateRequest:
        self._asked = 1
        self._max_tokens = 60 + self.setup.max_tokens_per_turn * 4
        return GenerateRequest(
            messages=chatbot_messages(self.inst, self.turns),
            max_tokens=60 + self.setup.max_tokens_per_turn * 4,
            temperature=self.setup.temperature,
            sample=self.setup.sample * 100 + self.attempt,
        )

    def apply(self, res: CallResult) -> None:
        r = res.response
        self.calls.append(CallRecord.of(res))
        at = len(self.turns) + 1
        if res.status != "ok" or r is None:
            self.invalid = f"call failed at turn {at}: {res.reason}" + (f" ({res.detail})" if res.detail else "")
            return
        truncated = r.finish_reason in ("length", "max_tokens")
        too_long = over_budget(r.text, self._max_tokens)  # never stored as a turn: re-asked like the others
        if too_long:
            new, refused = [], False
        elif self.setup.kind == "human_ai":
            text = re.sub(r"^\s*(user|assistant|human)\s*:\s*", "", r.text.strip(), flags=re.I).strip()
            speaker = self.inst.reference[len(self.turns)].speaker
            new = [Turn(speaker=speaker, text=text)] if text else []
            if truncated and new and speaker == "assistant":  # the chatbot's answer: context, not judged
                self.notes.append(f"turn {at}: the answer was cut off at max_tokens")
            elif truncated and new:  # a simulated user turn is judged: a cut one is no usable turn
                self.notes.append(f"turn {at}: dropped the turn: the answer was cut off at max_tokens")
                new = []
            refused = not new and bool(REFUSAL.search(text))
        else:
            parsed = parse_turns(r.text, self.participants, truncated=truncated)
            new = parsed.turns
            refused = not new and (bool(parsed.refusals) or bool(REFUSAL.search(r.text)))
            self.notes += [f"turn {at}: {n}" for n in parsed.notes]
            if self.setup.copies:
                expected = [*self.inst.history, *self.turns][-self.setup.n_copy :]
                new, copied = strip_copied(new, expected)
                if copied < self.setup.n_copy:
                    self.notes.append(f"turn {at}: found {copied} of the {self.setup.n_copy} copied turns")
            for u in parsed.unknown_speakers:
                if u not in self.unknown and any(t.speaker == u for t in new):
                    self.unknown.append(u)
        if not new:
            self.attempt += 1
            why = too_long or (
                "empty answer"
                if not r.text.strip()
                else "refusal"
                if refused
                else "cut off at max_tokens"
                if truncated
                else "no turn in 'Speaker: text' form"
            )
            self.notes.append(
                f"turn {at}: no usable turn in the answer (attempt {self.attempt}: {why}): {r.text.strip()[:120]!r}"
            )
            if self.attempt >= self.setup.max_attempts:
                self.invalid = f"no usable turn in {self.attempt} attempts at turn {at} (last answer: {why})"
            return
        self.attempt = 0
        if len(new) > self._asked:
            self.notes.append(f"turn {at}: kept the first {self._asked} of {len(new)} turns")
            new = new[: self._asked]
        elif len(new) < self._asked:
            self.notes.append(f"turn {at}: asked for {self._asked} turns, got {len(new)}; asking for the rest")
        self.turns += new

    def result(self) -> Continuation:
        ok = self.invalid is None and len(self.turns) >= self.target
        return continuation(
            self.inst,
            self.setup_id,
            self.setup.name,
            self.turns[: self.target],
            None if ok else (self.invalid or f"stopped with {len(self.turns)} of {self.target} turns"),
            calls=self.calls,
            notes=self.notes,
            unknown_speakers=self.unknown,
            instance_hash=self.inst.content_hash(),
        )


Task = SimTask | PluginTask
"""One continuation being written, driven in rounds: ``done``, ``next_calls``, ``apply_results``,
``result``."""


def plan_continuations(
    instances: Sequence[Instance],
    setups: Sequence[SetupBase],
    taxonomy: Taxonomy,
    *,
    skip: Mapping[str, Collection[str]] | None = None,
) -> dict[str, list[Task]]:
    """{setup name: one task per instance the setup simulates}: the calls ``simulate`` makes,
    planned step by step (the forecast plans with the same). Imported setups make no calls and
    have no tasks; ``skip``: {setup name: ids of instances not to plan} (continuations kept)."""
    tasks: dict[str, list[Task]] = {}
    for s in setups:
        left_out = (skip or {}).get(s.name, ())
        chosen = [inst for inst in s.select(instances) if inst.id not in left_out]
        if isinstance(s, Setup):
            sid = s.setup_id(taxonomy)
            tasks[s.name] = [SimTask(s, sid, inst, taxonomy) for inst in chosen]
        elif isinstance(s, PluginSetup):
            sid = s.setup_id(taxonomy)
            tasks[s.name] = [PluginTask(s, sid, inst, new_plugin(s, taxonomy)) for inst in chosen]
    return tasks


def reusable(
    setup: SetupBase, setup_id: str, stored: Sequence[Continuation], instances: Sequence[Instance]
) -> list[Continuation]:
    """The continuations of a plugin setup from an earlier run that a re-run keeps instead of
    driving the plugin again: of this setup id, of an instance the setup selects with the same
    content hash, and finished without a failed call (a failed call is tried again, as for every
    simulator). A plugin need not be deterministic (its code is not ours), so a finished
    continuation driven again could make new calls and be paid twice. The paper's simulator is
    driven again from the call cache instead, which costs nothing and applies the current parser."""
    if not isinstance(setup, PluginSetup):
        return []
    hashes = {i.id: i.content_hash() for i in setup.select(instances)}
    return [
        c
        for c in stored
        if c.setup_id == setup_id
        and c.instance_hash == hashes.get(c.instance_id)
        and all(r.status == "ok" for r in c.calls)
    ]


def simulate(
    instances: Sequence[Instance],
    setups: Sequence[SetupBase],
    runner: Runner,
    *,
    taxonomy: Taxonomy | None = None,
    on_round: Callable[[int, dict[str, list[Continuation]]], None] | None = None,
    warn: Callable[[str], None] | None = None,
    stored: Mapping[str, Sequence[Continuation]] | None = None,
) -> dict[str, list[Continuation]]:
    """Simulate every setup on every instance it applies to; returns {setup name: continuations}.
    ``on_round`` receives the partial results after each round (to persist them): the finished
    continuations only. One still being written is left out, not stored invalid: a run killed
    before it ends has nothing invalid to show for it (the analyses count it missing, "not
    simulated"), and the re-run writes it from the cache. Imported setups are read from their
    files first (``warn`` says what a file lacks or holds beyond the setup's instances).
    ``stored``: {setup name: its continuations from an earlier run}; a plugin setup's finished ones
    are kept as they are (``reusable``), not driven again."""
    tax = taxonomy or load_taxonomy()
    imported = {
        s.name: import_continuations(s, s.setup_id(tax), instances, warn)
        for s in setups
        if isinstance(s, ImportedSetup)
    }
    kept = {s.name: reusable(s, s.setup_id(tax), (stored or {}).get(s.name, []), instances) for s in setups}
    tasks = plan_continuations(
        instances, setups, tax, skip={name: {c.instance_id for c in cs} for name, cs in kept.items()}
    )
    order = {s.name: {inst.id: n for n, inst in enumerate(s.select(instances))} for s in setups}

    def written(name: str, finished: list[Continuation]) -> list[Continuation]:
        return sorted([*kept.get(name, []), *finished], key=lambda c: order[name].get(c.instance_id, -1))

    def partial() -> dict[str, list[Continuation]]:
        return {**imported, **{name: written(name, [t.result() for t in ts if t.done]) for name, ts in tasks.items()}}

    rnd = 0
    while True:
        pending = [(t, t.next_calls()) for ts in tasks.values() for t in ts if not t.done]
        pending = [(t, cs) for t, cs in pending if cs]  # a plugin may finish while it plans its calls
        if not pending:
            break
        results = runner.run([c for _, cs in pending for c in cs])
        at = 0
        for t, cs in pending:
            t.apply_results(results[at : at + len(cs)])
            at += len(cs)
        rnd += 1
        if on_round is not None:
            on_round(rnd, partial())
    return {
        s.name: imported[s.name] if s.name in imported else written(s.name, [t.result() for t in tasks.get(s.name, [])])
        for s in setups
    }

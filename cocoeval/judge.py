"""Judging: the same judge configuration judges the human reference r and every simulated
continuation y of an instance, seeing the same context (M, S, x).

Overall: consistency and collaborativeness (1-10) with a rationale. Fine-grained: for each
judged turn, the behaviours of the taxonomy it shows, with evidence. Answers are validated
(``judge_parse``); an unusable answer is re-asked at most ``max_attempts - 1`` times with the
validation error, then stored invalid with its reason and the raw text: never as zero behaviours.
An answer cut off at its output budget (a reasoning judge can spend it all on reasoning) is
asked again with twice the budget, up to ``max_tokens_cap``: dropping cut-off answers would bias
which conversations count (long ones are cut off more often).
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .judge_parse import Verdict, validate_fine, validate_overall
from .llm import Call, CallResult, GenerateRequest, Message, Runner
from .llm.base import canonical_json
from .prompts import load_prompt
from .render import judge_messages
from .schema import (
    CallRecord,
    Continuation,
    Instance,
    Judgment,
    Turn,
    first_per_dataset,
    is_human_ai,
)
from .taxonomy import Taxonomy, load_taxonomy

Kind = Literal["overall", "fine_grained"]
PROMPTS: dict[str, str] = {"overall": "judge_overall", "fine_grained": "judge_fine_grained"}
TRUNCATED = ("length", "max_tokens")
"""Finish reasons of an answer cut off at its output budget (OpenAI, Anthropic)."""
NO_TURNS = "no turns to judge"
"""The reason recorded for a target with no turn the judge should judge (an empty continuation,
or a chat window without a user turn): never sent to the judge, stored invalid with this reason
(``frames`` counts it as ``skipped``), never a valid all-zero judgment."""


class JudgeConfig(BaseModel):
    """One judge. Its id hashes model, prompt, taxonomy and parameters: changing any of them
    never reuses stale judgments."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Label used in files (judgments/<name>.jsonl) and tables; in a params file a safe file name
    (``cocoeval.names``), not 'human'."""
    model: str
    """Judge model spec, e.g. openai/o4-mini."""
    kind: list[Kind] = Field(default_factory=lambda: ["overall", "fine_grained"])
    """Which evaluations this judge makes."""
    temperature: float | None = Field(0.0, ge=0, le=2)
    """Sampling temperature (dropped for reasoning models)."""
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    """For reasoning models (o4-mini, gpt-5.1)."""
    max_attempts: int = Field(3, ge=1)
    """First answer plus re-asks with the validation error."""
    max_tokens_overall: int = Field(600, ge=1)
    """Output budget of an overall judgment (reasoning models need more)."""
    max_tokens_per_turn: int = Field(80, ge=1)
    """Output budget per judged turn of a fine-grained judgment (plus 200)."""
    max_tokens_cap: int = Field(32_000, ge=1)
    """Largest output budget. An answer cut off at its budget (finish_reason length/max_tokens)
    is asked again with twice the budget, up to this cap (32,000: Claude Opus 4's output limit;
    o4-mini and gpt-5.1 allow more); cut off at the cap, or cut off short of its budget (the
    model's context is full, a larger budget cannot help), the judgment is invalid with the
    reason "truncated at N tokens". Each call records its budget (``CallRecord.max_tokens``)."""
    max_behaviours_per_turn: int | None = Field(None, ge=1)
    """Cap on behaviours listed per turn in the answer schema (None: the taxonomy's size). For
    small local models that otherwise list everything and run out of tokens."""
    datasets: list[str] | None = None
    """Only judge instances of these datasets (their reference and every continuation; None: all).
    Chooses what is judged, so it is not part of the judge id."""
    max_per_dataset: int | None = Field(None, ge=1)
    """Only the first N instances of each dataset (in the run's order; None: all), as a setup's
    ``max_per_dataset`` chooses them. Not part of the judge id."""

    def select(self, instances: Sequence[Instance]) -> list[Instance]:
        """The instances this judge judges."""
        return first_per_dataset([i for i in instances if self.datasets is None or i.dataset in self.datasets],
                                 self.max_per_dataset)

    def judge_id(self, kind: Kind, taxonomy: Taxonomy) -> str:
        data = self.model_dump(exclude={"name", "kind", "datasets", "max_per_dataset"})
        data.update(kind=kind, prompt=load_prompt(PROMPTS[kind]).ref, taxonomy=taxonomy.hash)
        return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:12]


@dataclass
class Target:
    instance: Instance
    name: str
    """'reference' or the setup name."""
    target_id: str
    """'reference' or the setup id."""
    turns: list[Turn]
    judged: list[int]
    """0-based indices of the turns to label."""


def targets_for(instances: Sequence[Instance], continuations: dict[str, list[Continuation]]) -> list[Target]:
    """The reference of every instance and every ok continuation. In chats only user turns are
    judged. Invalid continuations have nothing to judge; they count in the invalid rates."""
    out = []
    by_id = {i.id: i for i in instances}
    for inst in instances:
        out.append(Target(inst, "reference", "reference", inst.reference, judged_turns(inst, inst.reference)))
    for name, conts in continuations.items():
        for c in conts:
            if c.status == "ok" and c.instance_id in by_id:
                inst = by_id[c.instance_id]
                out.append(Target(inst, name, c.setup_id, c.turns, judged_turns(inst, c.turns)))
    return out


def judged_turns(inst: Instance, turns: list[Turn]) -> list[int]:
    """0-based indices of the turns of a target (``turns``) that a judge labels: every turn, or
    in chats only the user turns. Empty: the target has nothing to judge (``NO_TURNS``)."""
    if is_human_ai(inst):
        return [i for i, t in enumerate(turns) if t.speaker == "user"]
    return list(range(len(turns)))


def fine_schema(tax: Taxonomy, n_turns: int | None = None, max_per_turn: int | None = None) -> dict[str, Any]:
    """The fine-grained answer's JSON schema: behaviour names from the taxonomy; with
    ``n_turns`` exactly that many turn entries (grammar-constrained models then cannot stop
    early); ``max_per_turn`` caps the behaviours listed per turn."""
    item = {"type": "object", "properties": {
        "behaviour": {"type": "string", "enum": [b.name for b in tax.behaviours]},
        "evidence": {"type": "string", "maxLength": 60}}, "required": ["behaviour", "evidence"],
        "additionalProperties": False}
    turn = {"type": "object", "properties": {"turn": {"type": "integer"},
                                             "behaviours": {"type": "array", "items": item,
                                                            "maxItems": max_per_turn or len(tax.behaviours)}},
            "required": ["turn", "behaviours"], "additionalProperties": False}
    turns: dict[str, Any] = {"type": "array", "items": turn}
    if n_turns:
        turns.update(minItems=n_turns, maxItems=n_turns)
    return {"type": "object", "properties": {"turns": turns}, "required": ["turns"], "additionalProperties": False}


OVERALL_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"consistency": {"type": "integer"}, "collaborativeness": {"type": "integer"},
                                     "rationale": {"type": "string", "maxLength": 300}},
    "required": ["consistency", "collaborativeness", "rationale"], "additionalProperties": False}


class JudgeTask:
    """One judgment's calls (one judge, kind and target): ``next_call`` renders the request,
    ``apply`` takes its answer (re-asking or doubling the budget where needed), ``result`` is the
    judgment once final. ``shared``: other targets of the instance are judged too, so the prompt
    prefix before the target gets prompt-cache hints."""

    def __init__(self, judge: JudgeConfig, kind: Kind, target: Target, tax: Taxonomy, *, shared: bool = True) -> None:
        self.judge, self.kind, self.target, self.tax = judge, kind, target, tax
        self.judge_id = judge.judge_id(kind, tax)
        self.messages, at = judge_messages(load_prompt(PROMPTS[kind]), target.instance, target.turns, target.judged,
                                           tax)
        system, user = self.messages[0].content, self.messages[1].content
        self.cache_points: list[tuple[int, int]] = []
        self.cache_group: str | None = None
        if shared and at is not None:  # the targets of an instance share everything up to the target
            self.cache_points = [(0, len(system)), (1, at)]
            self.cache_group = "cocoeval-" + hashlib.sha256(f"{system}\x00{user[:at]}".encode()).hexdigest()[:20]
        self.calls: list[CallRecord] = []
        self.attempts = 0
        self.answers = 0
        """Answers validated (cut-off answers are asked again with a larger budget instead)."""
        self.budget = (200 + judge.max_tokens_per_turn * len(target.judged)) if kind == "fine_grained" \
            else judge.max_tokens_overall
        self.result: Judgment | None = None
        self._last_raw = ""
        if not target.judged:  # nothing to judge: recorded as skipped, no call is made
            self._finish(Verdict.fail(NO_TURNS, retryable=False), "")

    def next_call(self) -> Call:
        fine = self.kind == "fine_grained"
        req = GenerateRequest(messages=self.messages, max_tokens=self.budget, temperature=self.judge.temperature,
                              reasoning_effort=self.judge.reasoning_effort,
                              json_schema=fine_schema(self.tax, len(self.target.judged),
                                                      self.judge.max_behaviours_per_turn) if fine else OVERALL_SCHEMA,
                              schema_name="judgment", cache_points=self.cache_points,
                              cache_group=self.cache_group)
        tag = f"{self.target.instance.id}|{self.target.name}|{self.judge.name}|{self.kind}"
        # a re-ask follows an invalid or cut-off answer: in batch mode it runs live unless batch
        # rounds are asked for
        return Call(model=self.judge.model, stage="judge", tag=tag, request=req, dependent=self.attempts > 0)

    def apply(self, res: CallResult) -> None:
        self.attempts += 1
        r = res.response
        self.calls.append(CallRecord.of(res, max_tokens=self.budget))
        if res.status != "ok" or r is None:
            self._finish(Verdict.fail(f"call failed: {res.reason}", retryable=False), self._last_raw)
            return
        self._last_raw = r.text
        if r.finish_reason in TRUNCATED:
            written = r.usage.output_tokens
            if self.budget < self.judge.max_tokens_cap and not 0 < written < self.budget:
                self.budget = min(2 * self.budget, self.judge.max_tokens_cap)
                return  # the same question again, with twice the budget
            why = "" if self.budget >= self.judge.max_tokens_cap else \
                f" (cut off after {written}: the model's context is full)"
            self._finish(Verdict.fail(f"truncated at {self.budget} tokens{why}", retryable=False), r.text)
            return
        self.answers += 1
        v = (validate_fine(r.text, r.finish_reason, len(self.target.judged), self.tax)
             if self.kind == "fine_grained" else validate_overall(r.text, r.finish_reason))
        if v.status == "error" and v.retryable and self.answers < self.judge.max_attempts:
            self.messages = [*self.messages, Message(role="assistant", content=r.text or "(empty)"),
                             Message(role="user", content=f"Your answer could not be used: {v.error}. "
                                     "Answer again with the complete JSON only, as specified.")]
            return
        self._finish(v, r.text)

    def _finish(self, v: Verdict, raw: str) -> None:
        t = self.target
        labels = [lb.model_copy(update={"turn": t.judged[lb.turn]}) for lb in v.labels]
        self.result = Judgment(
            instance_id=t.instance.id, target=t.target_id, target_name=t.name, judge_id=self.judge_id,
            judge_name=self.judge.name, kind=self.kind, taxonomy_hash=self.tax.hash,
            consistency=v.consistency, collaborativeness=v.collaborativeness, rationale=v.rationale,
            labels=labels, judged_turns=t.judged,
            status="invalid" if v.status == "error" else v.status,  # type: ignore[arg-type]
            reason=v.error if v.status == "error" else None, repairs=v.repairs,
            raw=raw if v.status != "ok" else None, calls=self.calls, attempts=self.attempts,
            max_tokens=self.budget)


def plan_judgments(instances: Sequence[Instance], continuations: dict[str, list[Continuation]],
                   judges: Sequence[JudgeConfig], tax: Taxonomy) -> dict[str, list[JudgeTask]]:
    """{judge name: one task per (target, kind) the judge judges}: the calls ``judge`` makes
    (``send_order`` gives their sending order; the forecast plans with the same)."""
    targets = targets_for(instances, continuations)
    per_instance = collections.Counter(t.instance.id for t in targets)
    chosen = {j.name: {i.id for i in j.select(instances)} for j in judges}
    tasks = {j.name: [JudgeTask(j, k, t, tax, shared=per_instance[t.instance.id] > 1) for t in targets for k in j.kind
                      if t.instance.id in chosen[j.name]]
             for j in judges}
    return tasks


def judge(instances: Sequence[Instance], continuations: dict[str, list[Continuation]],
          judges: Sequence[JudgeConfig], runner: Runner, *, taxonomy: Taxonomy | None = None,
          on_round: Callable[[int, dict[str, list[Judgment]]], None] | None = None) -> dict[str, list[Judgment]]:
    """Judge every reference and ok continuation with every judge; {judge name: judgments}. A
    target with no turn to judge is not sent: its judgments are invalid with reason ``NO_TURNS``."""
    tasks = plan_judgments(instances, continuations, judges, taxonomy or load_taxonomy())

    def collect() -> dict[str, list[Judgment]]:
        return {n: [t.result for t in ts if t.result is not None] for n, ts in tasks.items()}

    rnd = 0
    while pending := [t for ts in tasks.values() for t in ts if t.result is None]:
        pending = send_order(pending, judges)
        for t, r in zip(pending, runner.run([t.next_call() for t in pending]), strict=True):
            t.apply(r)
        rnd += 1
        if on_round is not None:
            on_round(rnd, collect())
    return collect()


def send_order(tasks: list[JudgeTask], judges: Sequence[JudgeConfig]) -> list[JudgeTask]:
    """The order judge calls are sent in: the calls that share a prompt prefix (one instance,
    judge and kind: every target) one after another, so that the provider's prompt cache still
    holds the prefix (the runner sends the first alone before the rest). Results do not depend
    on it; judgments are stored in target order."""
    first: dict[str, int] = {}
    for t in tasks:
        first.setdefault(t.target.instance.id, len(first))
    rank = {j.name: n for n, j in enumerate(judges)}
    kinds = {"overall": 0, "fine_grained": 1}
    return sorted(tasks, key=lambda t: (first[t.target.instance.id], rank.get(t.judge.name, 0), kinds[t.kind]))


def behaviour_counts(j: Judgment, tax: Taxonomy) -> dict[str, int] | None:
    """Occurrences of each behaviour in a fine-grained judgment; None when it is invalid
    (an invalid judgment is never a zero count)."""
    if j.kind != "fine_grained" or j.status == "invalid":
        return None
    counts = dict.fromkeys(tax.ids, 0)
    for lb in j.labels:
        for b in lb.behaviours:
            if b in counts:
                counts[b] += 1
    return counts

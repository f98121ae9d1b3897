"""Judging: the same judge configuration judges the human reference r and every simulated
continuation y of an instance, seeing the same context (M, S, x).

Overall: consistency and collaborativeness (1-10) with a rationale. Fine-grained: for each
judged turn, the behaviours of the taxonomy it shows, with evidence. Answers are validated
(``judge.parse``); an unusable answer is re-asked at most ``max_attempts - 1`` times with the
validation error, then stored invalid with its reason and the raw text: never as zero behaviours.
An answer cut off at its output budget (a reasoning judge can spend it all on reasoning) is
asked again with twice the budget, up to ``max_tokens_cap``: dropping cut-off answers would bias
which conversations count (long ones are cut off more often).
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Callable, Sequence

from cocoeval.core.schema import CallRecord, Continuation, Instance, Judgment
from cocoeval.core.targets import NO_TURNS, Target, targets_for
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.llm import Call, CallResult, GenerateRequest, Message, Runner
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.render import judge_messages

from .config import OVERALL_SCHEMA, PROMPTS, JudgeConfig, Kind, fine_schema
from .parse import Verdict, validate_fine, validate_overall
from .samples import combine_samples

TRUNCATED = ("length", "max_tokens")
"""Finish reasons of an answer cut off at its output budget (OpenAI, Anthropic)."""


class JudgeTask:
    """One judgment's calls (one judge, kind and target): ``next_call`` renders the request,
    ``apply`` takes its answer (re-asking or doubling the budget where needed), ``result`` is the
    judgment once final. ``shared``: other targets of the instance are judged too, so the prompt
    prefix before the target gets prompt-cache hints. ``sample``: which of the judge's ``samples``
    answers this is (the request's sample index: each is cached apart; 0 is a one-sample judge's)."""

    def __init__(
        self, judge: JudgeConfig, kind: Kind, target: Target, tax: Taxonomy, *, shared: bool = True, sample: int = 0
    ) -> None:
        self.judge, self.kind, self.target, self.tax, self.sample = judge, kind, target, tax, sample
        self.judge_id = judge.judge_id(kind, tax)
        self.messages, at = judge_messages(
            load_prompt(PROMPTS[kind]), target.instance, target.turns, target.judged, tax
        )
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
        self.budget = (
            (200 + judge.max_tokens_per_turn * len(target.judged))
            if kind == "fine_grained"
            else judge.max_tokens_overall
        )
        self.result: Judgment | None = None
        self._last_raw = ""
        if not target.judged:  # nothing to judge: recorded as skipped, no call is made
            self._finish(Verdict.fail(NO_TURNS, retryable=False), "")

    def next_call(self) -> Call:
        fine = self.kind == "fine_grained"
        req = GenerateRequest(
            messages=self.messages,
            max_tokens=self.budget,
            temperature=self.judge.temperature,
            reasoning_effort=self.judge.reasoning_effort,
            json_schema=fine_schema(self.tax, len(self.target.judged), self.judge.max_behaviours_per_turn)
            if fine
            else OVERALL_SCHEMA,
            schema_name="judgment",
            cache_points=self.cache_points,
            cache_group=self.cache_group,
            sample=self.sample,
        )
        tag = f"{self.target.instance.id}|{self.target.name}|{self.judge.name}|{self.kind}"
        if self.sample:
            tag += f"|sample {self.sample}"
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
            why = (
                ""
                if self.budget >= self.judge.max_tokens_cap
                else f" (cut off after {written}: the model's context is full)"
            )
            self._finish(Verdict.fail(f"truncated at {self.budget} tokens{why}", retryable=False), r.text)
            return
        self.answers += 1
        v = (
            validate_fine(r.text, r.finish_reason, len(self.target.judged), self.tax)
            if self.kind == "fine_grained"
            else validate_overall(r.text, r.finish_reason)
        )
        if v.status == "error" and v.retryable and self.answers < self.judge.max_attempts:
            self.messages = [
                *self.messages,
                Message(role="assistant", content=r.text or "(empty)"),
                Message(
                    role="user",
                    content=f"Your answer could not be used: {v.error}. "
                    "Answer again with the complete JSON only, as specified.",
                ),
            ]
            return
        self._finish(v, r.text)

    def _finish(self, v: Verdict, raw: str) -> None:
        t = self.target
        labels = [lb.model_copy(update={"turn": t.judged[lb.turn]}) for lb in v.labels]
        self.result = Judgment(
            instance_id=t.instance.id,
            target=t.target_id,
            target_name=t.name,
            judge_id=self.judge_id,
            judge_name=self.judge.name,
            kind=self.kind,
            taxonomy_hash=self.tax.hash,
            consistency=v.consistency,
            collaborativeness=v.collaborativeness,
            rationale=v.rationale,
            labels=labels,
            judged_turns=t.judged,
            status="invalid" if v.status == "error" else v.status,  # type: ignore[arg-type]
            reason=v.error if v.status == "error" else None,
            repairs=v.repairs,
            raw=raw if v.status != "ok" else None,
            calls=self.calls,
            attempts=self.attempts,
            max_tokens=self.budget,
            instance_hash=t.instance.content_hash(),
        )


def plan_judgments(
    instances: Sequence[Instance],
    continuations: dict[str, list[Continuation]],
    judges: Sequence[JudgeConfig],
    tax: Taxonomy,
) -> dict[str, list[JudgeTask]]:
    """{judge name: one task per (target, kind) the judge judges, and per sample of a judge with
    ``samples: k > 1`` (one after another)}: the calls ``judge`` makes (``send_order`` gives their
    sending order; the forecast plans with the same)."""
    targets = targets_for(instances, continuations)
    per_instance = collections.Counter(t.instance.id for t in targets)
    chosen = {j.name: {i.id for i in j.select(instances)} for j in judges}
    tasks = {
        j.name: [
            JudgeTask(j, k, t, tax, shared=per_instance[t.instance.id] > 1, sample=s)
            for t in targets
            for k in j.kind
            if t.instance.id in chosen[j.name]
            for s in range(j.samples)
        ]
        for j in judges
    }
    return tasks


def judge(
    instances: Sequence[Instance],
    continuations: dict[str, list[Continuation]],
    judges: Sequence[JudgeConfig],
    runner: Runner,
    *,
    taxonomy: Taxonomy | None = None,
    on_round: Callable[[int, dict[str, list[Judgment]]], None] | None = None,
) -> dict[str, list[Judgment]]:
    """Judge every reference and ok continuation with every judge; {judge name: judgments}. A
    target with no turn to judge is not sent: its judgments are invalid with reason ``NO_TURNS``.
    A judge with ``samples: k > 1`` gives one judgment per target and kind, the majority of its
    samples (``samples.combine_samples``), once all k are final."""
    tax = taxonomy or load_taxonomy()
    tasks = plan_judgments(instances, continuations, judges, tax)

    def collect() -> dict[str, list[Judgment]]:
        return {n: _combined(ts, tax) for n, ts in tasks.items()}

    rnd = 0
    while pending := [t for ts in tasks.values() for t in ts if t.result is None]:
        pending = send_order(pending, judges)
        for t, r in zip(pending, runner.run([t.next_call() for t in pending]), strict=True):
            t.apply(r)
        rnd += 1
        if on_round is not None:
            on_round(rnd, collect())
    return collect()


def _combined(tasks: Sequence[JudgeTask], tax: Taxonomy) -> list[Judgment]:
    """The final judgments of one judge's tasks, in task order: a one-sample task's result; the
    samples of a (target, kind) combined once every one of them is final."""
    groups: dict[tuple[str, str, str], list[JudgeTask]] = {}
    for t in tasks:
        groups.setdefault((t.target.instance.id, t.target.target_id, t.kind), []).append(t)
    out = []
    for g in groups.values():
        done = [t.result for t in g if t.result is not None]
        if len(done) < len(g):
            continue
        out.append(done[0] if g[0].judge.samples == 1 else combine_samples(done, tax.ids))
    return out


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

"""Forecast calls, tokens and cost of a params file before anything is sent.

The forecast builds the requests the run would send, with the same code: for a setup with k turns
per call, step j shows the turns "written so far", whose stand-in is the human reference (same
length and style), and each call is expected to output k reference-length turns; judge calls
render the actual judge prompts for every reference and for each setup's continuation (again
with the reference standing in). It then bills them in the order the run sends them (simulation
round by round; judge calls instance by instance, ``judge.send_order``) by each provider's own
prompt-cache rules (``llm/promptcache.py``: OpenAI's longest common prefix with a recent request
from 1,024 tokens in steps of 128; Anthropic's breakpoints, writes at 1.25x and reads at 0.1x),
on the wire bodies the providers would send. Assumed: every call of a round, and of an
instance's judge calls, comes within the providers' cache lifetime (minutes) of the one before.

Output tokens per call: a documented default (a simulator writes reference-length turns; a
fine-grained judge ``JUDGE_OUTPUT_PER_TURN`` per judged turn, an overall judge
``JUDGE_OUTPUT_OVERALL``), replaced, row by row, by the mean the run's own call records show when
there are any (``observed_output``: per turn written, per judged turn, per call). Reasoning
models bill their thinking as output too: ``REASONING_PER_CALL`` tokens per call by reasoning
effort, likewise replaced by the observed mean (``observed_reasoning``). A pilot run (a few
instances) therefore makes the forecast of the full grid bill-accurate.
Batch cost: half the naive price, with no prompt caching (a batch runs over hours; a cache hit
there is the provider's best effort, not counted on).

Judge probes (a params file's ``probes:`` section, ``cocoeval probe``; beyond the paper): one row
per judge, probe and kind (stage "probe"), the calls ``run.probes.plan_probes`` makes on the
targets the judge selects (the references standing in for continuations; the real draw is among
the judgments the run has), each billed as a judge call of the same kind, without re-asks.

Benchmark creation (a params file's ``build.context``): the clean-up, M and S requests the build
would send, made by the build's own code (``Experiment.build_plan``), one row per kind (stage
"build"); a kind the run's benchmark folder already holds is a row of no calls that says so.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from cocoeval.core.schema import CallRecord, Continuation, Instance, Turn
from cocoeval.judge.engine import plan_judgments, send_order
from cocoeval.llm import CallResult
from cocoeval.llm.base import GenerateRequest, GenerateResponse, Provider, get_provider
from cocoeval.llm.promptcache import AnthropicBreakpointCache, OpenAIPrefixCache
from cocoeval.llm.usage import Usage, count_tokens, token_method
from cocoeval.simulate.engine import SimTask, plan_continuations
from cocoeval.simulate.plugins import PluginTask
from cocoeval.simulate.setup import Setup

from .stages import Experiment

if TYPE_CHECKING:
    from cocoeval.bench.build import ContextPlan

    from . import Run

JUDGE_OUTPUT_PER_TURN = 50
"""Default visible fine-grained judge output per judged turn (the paper's appendix: ≈50 tokens
per generated turn, taken for a judged turn too), until the run's own records show the mean."""
JUDGE_OUTPUT_OVERALL = 120
"""Default visible output of an overall judgment (scores and a one- or two-sentence rationale),
until the run's own records show the mean."""
BUILD_OUTPUT_METADATA = 300
"""Default visible output of an M call (goals and each participant's role, as JSON)."""
BUILD_OUTPUT_SUMMARY = 200
"""Default visible output of an S call (one paragraph)."""
REASONING_PER_CALL: dict[str, int] = {"minimal": 0, "low": 300, "medium": 1000, "high": 3000}
"""Reasoning tokens per call of a reasoning model (o-series, gpt-5) by reasoning effort (unset:
medium), a documented guess until the run's own call records show the real mean."""

ROW_FIELDS = ("calls", "input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
"""The counts of a forecast row (``ForecastRow``), in its order."""


@dataclass(frozen=True)
class ForecastRow:
    """One row of a forecast (``forecast``): the calls of one (stage, name, model), their tokens
    and what they cost."""

    stage: str
    """simulate, judge, probe or build."""
    name: str
    """The setup (simulate); ``judge:kind`` (judge); ``judge:probe:kind`` (probe); clean,
    metadata or summary (build)."""
    model: str
    """The model the calls go to."""
    calls: int
    """Calls sent."""
    input_tokens: int
    """Input tokens, cached ones included."""
    cached_input_tokens: int
    """Input tokens the provider's prompt cache bills as read."""
    cache_write_tokens: int
    """Input tokens the provider's prompt cache bills as written (Anthropic's breakpoints)."""
    output_tokens: int
    """Output tokens, reasoning ones included."""
    reasoning_tokens: int
    """Reasoning tokens (of a reasoning model; billed as output)."""
    output_source: Literal["observed", "default"]
    """Where the visible output per call came from: a run's observed mean or the default."""
    note: str | None
    """Why a row counts no calls (a build kind the benchmark already holds), else None."""
    cost_naive_usd: float | None
    """Cost with no prompt caching, every call live; None: unknown price."""
    cost_cached_usd: float | None
    """Cost with prompt caching, every call live; None: unknown price."""
    cost_batch_usd: float | None
    """Cost at the batch price (no cache credit); None: unknown price."""
    mode: Literal["batch", "live"]
    """How the params file's ``llm`` settings (``batch``, ``batch_dependent``) would send the row."""
    cost_planned_usd: float | None
    """Cost as ``mode`` sends it; None: unknown price."""
    cost_if_batch_usd: float | None
    """Cost under ``--batch``: the batch price where the row can go through a batch API, else
    live with caching; None: unknown price."""


@dataclass(frozen=True)
class PlanTotals:
    """The totals of a forecast over the rows with known prices (``plan_totals``); a total over
    no known price is None (unknown), never 0."""

    naive: float | None
    """Every call live, no prompt caching (``cost_naive_usd``)."""
    live: float | None
    """Every call live, with prompt caching (``cost_cached_usd``)."""
    batch: float | None
    """Every call at the batch price (``cost_batch_usd``)."""
    planned: float | None
    """As the params file sends them (``cost_planned_usd``)."""
    with_batch: float | None
    """``--batch``: every row that can go through a batch API at the batch price, the rest live
    with caching (``cost_if_batch_usd``)."""
    unknown: int
    """Rows at unknown prices, left out of the totals."""


@dataclass(frozen=True)
class RunComparison:
    """Forecast vs actual for one (stage, model) of a run (``compare_with_run``)."""

    stage: str
    """simulate or judge."""
    model: str
    """The model the calls went to."""
    forecast_calls: int
    """Calls forecast."""
    actual_calls: int
    """Calls recorded (cache hits and calls of unknown usage included)."""
    forecast_input: int
    """Input tokens forecast."""
    actual_input: int
    """Input tokens recorded (calls of unknown usage left out)."""
    input_ratio: float
    """``actual_input / forecast_input``; NaN when nothing was forecast."""
    forecast_cached_share: float
    """Share of the forecast input billed as cached; NaN without input."""
    actual_cached_share: float
    """Share of the recorded input billed as cached; NaN without input."""
    forecast_output: int
    """Output tokens forecast (reasoning included)."""
    actual_output: int
    """Output tokens recorded (reasoning included; calls of unknown usage left out)."""
    actual_usage_unknown_calls: int
    """Recorded calls of unknown usage, whose tokens are not summed (never read as 0)."""


@dataclass
class _Tally:
    """A row's counts while they are summed."""

    calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    output_source: Literal["observed", "default"] = "default"
    note: str | None = None
    usage_unknown_calls: int = 0


def is_reasoning(prov: Provider) -> bool:
    return bool(getattr(prov, "reasoning", False))


class _Biller:
    """Cached input of each planned request by its provider's rules, in sending order."""

    def __init__(self) -> None:
        self.openai = OpenAIPrefixCache(self._tokens, clock=lambda: 0.0)
        self.anthropic = AnthropicBreakpointCache(self._tokens, clock=lambda: 0.0)
        self.providers: dict[str, Provider] = {}

    @staticmethod
    def _tokens(text: str) -> int:
        return count_tokens(text)

    def provider(self, model: str) -> Provider:
        if model not in self.providers:
            self.providers[model] = get_provider(model)
        return self.providers[model]

    def bill(self, model: str, request: GenerateRequest, distinct: str | None = None) -> tuple[int, int, int]:
        """(input, cached, cache-write) tokens of one request. ``distinct``: a judge target's
        name, marked (for billing only) where the target starts, since the stand-in (the
        reference) would otherwise make every target's request identical."""
        prov = self.provider(model)
        prepared = prov.prepare(request)[0]
        tokens = sum(count_tokens(m.content) + 4 for m in prepared.messages)
        if distinct is not None and prepared.cache_points:
            i, at = prepared.cache_points[-1]
            msgs = list(prepared.messages)
            msgs[i] = msgs[i].model_copy(
                update={"content": f"{msgs[i].content[:at]}\x00{distinct}{msgs[i].content[at:]}"}
            )
            prepared = prepared.model_copy(update={"messages": msgs})
        if prov.prompt_caching == "openai_prefix":
            return tokens, min(self.openai.bill(prov.kwargs(prepared)), tokens), 0  # type: ignore[attr-defined]
        if prov.prompt_caching == "anthropic_breakpoints":
            read, write = self.anthropic.bill(prov.kwargs(prepared))  # type: ignore[attr-defined]
            return tokens, min(read, tokens), min(write, tokens - min(read, tokens))
        return tokens, 0, 0


def clean_output(turns: Sequence[Turn]) -> int:
    """Default visible output of a clean-up call: the chunk's turns as the answer's JSON with
    their source text (an upper bound: the clean-up only removes words)."""
    return count_tokens(
        json.dumps({"turns": [{"speaker": t.speaker, "text": t.raw_text or t.text} for t in turns]}, ensure_ascii=False)
    )


def forecast(
    exp: Experiment,
    instances: list[Instance],
    observed: dict[tuple[str, str], float] | None = None,
    observed_out: dict[tuple[str, str, str], float] | None = None,
    build: ContextPlan | None = None,
) -> list[ForecastRow]:
    """Rows per (stage, name, model): calls, input/cached/cache-write/output/reasoning tokens;
    cost naive, with prompt caching and through a batch API; and ``mode``/``cost_planned_usd``:
    how the params file's ``llm`` settings (``batch``, ``batch_dependent``) would send the row,
    and what that costs; ``cost_if_batch_usd``: its cost under ``--batch`` (the batch price where
    the row can go through a batch API, else live with caching). ``observed``: mean reasoning tokens per call by (stage, model), from
    a run's records (``observed_reasoning``), in place of ``REASONING_PER_CALL``;
    ``observed_out``: mean visible output tokens per unit by row (``observed_output``), in place
    of the defaults (simulation: per turn written, instead of the reference's turns; fine-grained
    judging: per judged turn; overall judging: per call). ``output_source`` in each row says
    which was used ("observed" or "default"). ``build``: the benchmark-creation calls of the
    params' ``build.context`` (``Experiment.build_plan``), one row per kind (stage "build", name
    clean, metadata or summary; output ``clean_output``, ``BUILD_OUTPUT_METADATA``,
    ``BUILD_OUTPUT_SUMMARY``); a kind the benchmark already holds is a row of no calls whose
    ``note`` says why."""
    prices = exp.llm_config().price_table()  # the table with the params' own llm.price on top
    tax = exp.taxonomy
    biller = _Biller()
    rows: dict[tuple[str, str, str], _Tally] = defaultdict(_Tally)

    def reasoning(stage: str, model: str, effort: str | None) -> int:
        if not is_reasoning(biller.provider(model)):
            return 0
        if observed and (stage, model) in observed:
            return round(observed[(stage, model)])
        return REASONING_PER_CALL[effort or "medium"]

    def visible(key: tuple[str, str, str], units: int, default: int) -> int:
        """Visible output of one call: the row's observed mean per unit times ``units``, else the default."""
        if observed_out and key in observed_out:
            rows[key].output_source = "observed"
            return round(observed_out[key] * units)
        rows[key].output_source = "default"
        return default

    def add(
        key: tuple[str, str, str],
        request: GenerateRequest,
        output: int,
        effort: str | None = None,
        distinct: str | None = None,
    ) -> None:
        r = rows[key]
        tin, cached, write = biller.bill(key[2], request, distinct)
        think = reasoning(key[0], key[2], effort)
        r.calls += 1
        r.input_tokens += tin
        r.cached_input_tokens += cached
        r.cache_write_tokens += write
        r.output_tokens += output + think
        r.reasoning_tokens += think

    # benchmark creation, in the order the build sends it: clean-up, then M and S per split
    if build is not None:
        opts = build.options
        for kind, why in build.cached.items():
            r = rows[("build", kind, getattr(opts, kind))]
            r.note, r.output_source = why, "default"
        for pc in build.calls:
            key = ("build", pc.kind, pc.call.model)
            rows[key].output_source = "default"
            out_tokens = {
                "clean": clean_output(pc.turns) if pc.kind == "clean" else 0,
                "metadata": BUILD_OUTPUT_METADATA,
                "summary": BUILD_OUTPUT_SUMMARY,
            }[pc.kind]
            add(key, pc.call.request, out_tokens, opts.reasoning_effort)

    # simulation, round by round as simulate() sends it (imported setups send nothing)
    conts: list[tuple[Setup, SimTask]] = []
    plugins: list[PluginTask] = []
    planned = plan_continuations(instances, exp.params.setups, tax)
    for s in exp.params.setups:
        for task in planned.get(s.name, []):
            if isinstance(task, PluginTask):
                plugins.append(task)
                continue
            inst = task.inst
            if task.setup.kind == "human_ai":  # approximate: no prompt-cache credit
                ref = inst.reference
                r = rows[("simulate", s.name, task.setup.model)]
                r.calls += sum(1 for t in ref if t.speaker == "user")
                r.input_tokens += sum(count_tokens(t.text) for t in [*inst.history, *ref]) * 2
                r.output_tokens += sum(count_tokens(t.text) for t in ref)
                continue
            conts.append((task.setup, task))
    while conts:
        for st, task in conts:
            ref, j = task.inst.reference, len(task.turns)
            call = task.next_call()
            k = min(st.turns_per_call, len(ref) - j)
            copies = st.copies
            key = ("simulate", st.name, st.model)
            add(
                key,
                call.request,
                visible(
                    key, k, sum(count_tokens(f"{t.speaker}: {t.text}") + 1 for t in ref[max(0, j - copies) : j + k])
                ),
            )
            task.turns = list(ref[: j + k])
        conts = [(st, t) for st, t in conts if len(t.turns) < len(t.inst.reference)]
    # a plugin's calls, driven by its own coroutine with its forecast_reply standing in for answers
    while plugins:
        for pt in plugins:
            calls = pt.next_calls()
            replies = pt.forecast_replies(calls)
            for c, text in zip(calls, replies, strict=True):
                key = ("simulate", pt.setup.name, c.model)
                add(key, c.request, visible(key, 1, count_tokens(text) + 1))
            if calls:
                pt.apply_results(
                    [
                        CallResult(
                            key="forecast",
                            model=c.model,
                            stage="simulate",
                            status="ok",
                            response=GenerateResponse(text=text),
                        )
                        for c, text in zip(calls, replies, strict=True)
                    ]
                )
        plugins = [pt for pt in plugins if not pt.done]

    # judging, in the order judge() sends it
    proxies = {
        s.name: [
            Continuation(instance_id=i.id, setup_id=s.name, setup_name=s.name, turns=i.reference)
            for i in s.select(instances)
        ]
        for s in exp.params.setups
    }
    tasks = [t for ts in plan_judgments(instances, proxies, exp.params.llm_judges, tax).values() for t in ts]
    for jt in send_order(tasks, exp.params.llm_judges):  # an ensemble makes no call
        if jt.result is not None:  # a target with no turn to judge is never sent
            continue
        jc, t = jt.judge, jt.target
        key = ("judge", f"{jc.name}:{jt.kind}", jc.model)
        n_out = (
            visible(key, len(t.judged), JUDGE_OUTPUT_PER_TURN * len(t.judged))
            if jt.kind == "fine_grained"
            else visible(key, 1, JUDGE_OUTPUT_OVERALL)
        )
        add(key, jt.next_call().request, n_out, jc.reasoning_effort, distinct=t.name)

    # judge probes (``probes:``; cocoeval probe), as plan_probes draws them, the references standing in
    if exp.params.probes is not None:
        from cocoeval.core.targets import targets_for

        from .probes import plan_probes

        sec = exp.params.probes
        probed = [j for j in exp.params.llm_judges if sec.judges is None or j.name in sec.judges]
        for name, pts in plan_probes(sec, probed, targets_for(instances, proxies), tax).items():
            for item in pts:
                jt, t = item.task, item.task.target
                if jt.result is not None:
                    continue
                key = ("probe", f"{name}:{item.probe}:{jt.kind}", jt.judge.model)
                rows[key].output_source = "default"
                n_out = JUDGE_OUTPUT_PER_TURN * len(t.judged) if jt.kind == "fine_grained" else JUDGE_OUTPUT_OVERALL
                add(key, item.next_call().request, n_out, jt.judge.reasoning_effort, distinct=f"{t.name}|{item.probe}")

    cfg = exp.llm_config()
    multi_step = {
        s.name
        for s in exp.params.setups
        if not isinstance(s, Setup)
        or s.kind == "human_ai"
        or any(s.turns_per_call < len(i.reference) for i in instances)
    }
    out = []
    for (stage, name, model), r in sorted(rows.items(), key=lambda kv: kv[0]):
        plain = Usage(input_tokens=r.input_tokens, output_tokens=r.output_tokens)
        naive = prices.cost(model, plain)
        cached = prices.cost(
            model,
            Usage(
                input_tokens=r.input_tokens,
                cached_input_tokens=r.cached_input_tokens,
                cache_write_tokens=r.cache_write_tokens,
                output_tokens=r.output_tokens,
            ),
        )
        batch = prices.cost(model, plain, batch=True)
        # how the params file's llm settings would send this row: batch only where the provider has
        # a batch API and the calls do not wait for earlier answers (or rounds are asked for)
        batchable = biller.provider(model).batch and (
            stage != "simulate" or name not in multi_step or cfg.batch_dependent == "rounds"
        )
        mode: Literal["batch", "live"] = "batch" if cfg.batch and batchable else "live"
        out.append(
            ForecastRow(
                stage=stage,
                name=name,
                model=model,
                calls=r.calls,
                input_tokens=r.input_tokens,
                cached_input_tokens=r.cached_input_tokens,
                cache_write_tokens=r.cache_write_tokens,
                output_tokens=r.output_tokens,
                reasoning_tokens=r.reasoning_tokens,
                output_source=r.output_source,
                note=r.note,
                cost_naive_usd=naive,
                cost_cached_usd=cached,
                cost_batch_usd=batch,
                mode=mode,
                cost_planned_usd=batch if mode == "batch" else cached,
                cost_if_batch_usd=batch if batchable else cached,
            )
        )
    return out


PLAN_TOTALS = {
    "naive": "cost_naive_usd",
    "live": "cost_cached_usd",
    "batch": "cost_batch_usd",
    "planned": "cost_planned_usd",
    "with_batch": "cost_if_batch_usd",
}
"""The totals of a forecast (``plan_totals``) and the row column each sums."""


def plan_totals(rows: Sequence[ForecastRow]) -> PlanTotals:
    """Totals over the rows with known prices: ``naive``, ``live`` (every call live, with prompt
    caching), ``batch`` (every call at the batch price), ``planned`` (as the params file sends
    them) and ``with_batch`` (``--batch``: every row that can go through a batch API at the batch
    price, the rest live with caching); ``unknown``: the rows at unknown prices, left out. A total
    over no known price is None (unknown), never 0."""
    known = [r for r in rows if r.cost_cached_usd is not None]
    out: dict[str, float | None] = {
        k: sum(getattr(r, col) for r in known) if known or not rows else None for k, col in PLAN_TOTALS.items()
    }
    return PlanTotals(**out, unknown=len(rows) - len(known))


def _records(run: Run) -> Iterable[tuple[str, CallRecord]]:
    yield from (("simulate", c) for cs in run.continuations.values() for x in cs for c in x.calls)
    yield from (("judge", c) for js in run.all_judgments.values() for j in js for c in j.calls)


def observed_reasoning(run: Run) -> dict[tuple[str, str], float]:
    """Mean reasoning tokens per answered call by (stage, model) in a run's call records (only
    models whose records report any; calls of unknown usage are left out, never read as 0)."""
    sums: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for stage, c in _records(run):
        if c.status == "ok" and c.reasoning_tokens is not None:
            s = sums[(stage, c.model)]
            s[0] += c.reasoning_tokens
            s[1] += 1
    return {k: v[0] / v[1] for k, v in sums.items() if v[1] and v[0]}


def observed_output(run: Run) -> dict[tuple[str, str, str], float]:
    """Mean visible output tokens (output minus reasoning) per unit, by forecast row (stage, name,
    model), over a run's answered calls (cache hits included: they keep their usage): simulation
    per turn of the setup's continuations (the calls' output, copied turns included, over the
    turns they gave), fine-grained judging per judged turn, overall judging per call. Calls of
    unknown usage are left out, never read as 0 tokens: a judge's call alone, a continuation whole
    for that model (which of its turns the call gave is not known)."""
    sums: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for name, conts in run.continuations.items():
        for x in conts:
            ok = [c for c in x.calls if c.status == "ok"]
            for model in {c.model for c in ok}:
                visible = [_visible_output(c) for c in ok if c.model == model]
                if None in visible:
                    continue
                s = sums[("simulate", x.setup_name or name, model)]
                s[0] += sum(v for v in visible if v is not None)
                s[1] += len(x.turns)
    for name, js in run.all_judgments.items():
        for j in js:
            for c in (c for c in j.calls if c.status == "ok"):
                if (v := _visible_output(c)) is None:
                    continue
                s = sums[("judge", f"{j.judge_name or name}:{j.kind}", c.model)]
                s[0] += v
                s[1] += len(j.judged_turns) if j.kind == "fine_grained" else 1
    return {k: v[0] / v[1] for k, v in sums.items() if v[1]}


def _visible_output(c: CallRecord) -> int | None:
    """A call's output tokens less its reasoning ones; None when its usage is unknown."""
    if c.output_tokens is None or c.reasoning_tokens is None:
        return None
    return c.output_tokens - c.reasoning_tokens


def compare_with_run(rows: Sequence[ForecastRow], run: Run) -> list[RunComparison]:
    """Forecast vs actual calls, tokens and cached share per (stage, model), the actual ones
    summed from the call records of the run's continuations and judgments (cache hits included:
    a cached call keeps the usage it had). The tokens of calls of unknown usage are not summed
    (never read as 0): ``actual_usage_unknown_calls`` counts those calls."""
    fc: dict[tuple[str, str], _Tally] = defaultdict(_Tally)
    for r in rows:
        f = fc[(r.stage, r.model)]
        for k in ROW_FIELDS:
            setattr(f, k, getattr(f, k) + getattr(r, k))
    actual: dict[tuple[str, str], _Tally] = defaultdict(_Tally)
    for stage, c in _records(run):
        a = actual[(stage, c.model)]
        a.calls += 1
        if c.usage_unknown is not None:
            a.usage_unknown_calls += 1
            continue
        for k in ROW_FIELDS[1:]:
            setattr(a, k, getattr(a, k) + getattr(c, k))  # known: the record's validator says so
    out = []
    for key in sorted(set(fc) & set(actual)):
        f, a = fc[key], actual[key]
        out.append(
            RunComparison(
                stage=key[0],
                model=key[1],
                forecast_calls=f.calls,
                actual_calls=a.calls,
                forecast_input=f.input_tokens,
                actual_input=a.input_tokens,
                input_ratio=a.input_tokens / f.input_tokens if f.input_tokens else math.nan,
                forecast_cached_share=_share(f),
                actual_cached_share=_share(a),
                forecast_output=f.output_tokens,
                actual_output=a.output_tokens,
                actual_usage_unknown_calls=a.usage_unknown_calls,
            )
        )
    return out


def judge_cache_bounds(instructions: Mapping[str, int], context: int, targets: Sequence[int]) -> dict[str, int]:
    """The most of one instance's judge input that a provider's prompt cache can bill as cached,
    with one target per request, in tokens: ``total`` and the cached tokens of three layouts.
    ``instructions``: each kind's instruction tokens (its system message), ``context``: M, S and
    x, ``targets``: each target's tokens; every kind judges every target.

    ``paper``: the paper's order, instructions, then M, S, x, then the target. A kind's calls share
    instructions and context, nothing with the other kind: every call reads its instructions
    (the previous instance wrote them) and all but the first its context.
    ``reordered``: the same words with M, S, x and the target first and each kind's instructions
    last. The kinds of a target share context and target: a target's first call reads the
    context (not the instance's very first call), its other kinds context and target; the
    instructions, after the divergence, are never read.
    ``free``: as if instructions cost nothing, only the context once and each target once
    unread: the limit of any layout, words or instructions, with one target per request.
    OpenAI's 1,024-token minimum and 128-token steps are left out, so these are upper bounds."""
    n, kinds, tsum = len(targets), len(instructions), sum(targets)
    if not n or not kinds:
        return dict(total=0, paper=0, reordered=0, free=0)
    total = sum(n * (i + context) for i in instructions.values()) + kinds * tsum
    paper = sum(n * (i + context) - context for i in instructions.values())
    reordered = kinds * n * context - context + (kinds - 1) * tsum
    return dict(total=total, paper=paper, reordered=reordered, free=total - context - tsum)


def _share(r: _Tally) -> float:
    return r.cached_input_tokens / r.input_tokens if r.input_tokens else math.nan


def describe(rows: Sequence[ForecastRow] = ()) -> str:
    """How the tokens were counted, and the build rows' output defaults when there are any."""
    out = f"tokens counted with {token_method()}"
    if any(r.stage == "build" and r.calls for r in rows):
        out += (
            f"; build output: clean-up the chunk's source turns as JSON, M {BUILD_OUTPUT_METADATA}, "
            f"S {BUILD_OUTPUT_SUMMARY} tokens per call, windows of the uncleaned conversations"
        )
    return out


def assumed_counts(instances: Sequence[Instance], build: ContextPlan | None = None) -> list[str]:
    """Per dataset, what the forecast assumed: the eval instances simulated and judged, and with a
    build plan the windows of both splits, the summaries (S), the conversations (M) and the
    clean-up chunks it prices."""
    sim: dict[str, int] = defaultdict(int)
    for i in instances:
        sim[i.dataset] += 1
    per = build.datasets if build is not None else {}
    out = []
    for ds in sorted(set(sim) | set(per)):
        line = f"{ds}: {sim.get(ds, 0)} eval instance(s) simulated"
        if ds in per:
            c = per[ds]
            line += (
                f"; build windows {c['eval_instances']} eval, {c['train_instances']} train; "
                f"summaries (S) {c['eval_summaries']} eval, {c['train_summaries']} train; "
                f"metadata (M) {c['metadata_conversations']} conversation(s); "
                f"clean-up {c['clean_chunks']} chunk(s)"
            )
        out.append(line)
    return out

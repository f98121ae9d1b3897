"""Forecasts: prefix stability of the prompt layout, and forecast vs a run through the test server."""

from __future__ import annotations

import itertools

import yaml

from cocoeval.cli import main
from cocoeval.core.jsonio import write_jsonl
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.llm.base import Usage
from cocoeval.llm.usage import PriceTable, count_tokens
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.render import format_behaviours, step_messages
from cocoeval.run import Run, load_params
from cocoeval.run.estimate import (
    ForecastRow,
    compare_with_run,
    forecast,
    judge_cache_bounds,
    observed_output,
    observed_reasoning,
    plan_totals,
)

from ..conftest import ROOT
from ..sim_helpers import SPEAKERS, instance


def test_prefix_stability_of_one_turn_per_call():
    inst = instance()
    tax = load_taxonomy()
    for name in ("vanilla", "taxonomy"):
        prompt = load_prompt(name)
        calls = [
            "\n".join(
                m.content for m in step_messages(prompt, inst, inst.reference[:j], 1, behaviours=format_behaviours(tax))
            )
            for j in range(30)
        ]
        shared = total = 0
        for a, b in itertools.pairwise(calls):
            prefix = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            shared += count_tokens(a[:prefix])
            total += count_tokens(a)
        share = shared / total
        print(f"{name}: {share:.1%} of each call's input tokens is a prefix of the next call's")
        assert share >= 0.90


def test_forecast_matches_a_run_through_the_test_server(srv, tmp_path, capsys):
    insts = [instance(f"d/c{i}/0") for i in range(3)]
    bench = tmp_path / "bench"
    write_jsonl(bench / "eval.jsonl", insts)
    write_jsonl(bench / "train.jsonl", [])
    # the fake simulator answers with reference-like turns (same speakers, similar length)
    line = "\n".join(f"{SPEAKERS[i % 3]}: utterance {40 + i} of d/c1/0" for i in range(30))
    fine = '{"turns": [' + ", ".join(f'{{"turn": {i}, "behaviours": []}}' for i in range(1, 31)) + "]}"
    srv.configure(
        answers=[
            {"match": "Continuation to annotate", "text": fine},
            {
                "match": "Continuation to evaluate",
                "text": '{"consistency": 7, "collaborativeness": 7, "rationale": "fine"}',
            },
            *({"match": f"next {k} turn", "text": "\n".join(line.splitlines()[:k])} for k in (1, 5, 30)),
        ],
        reasoning_tokens=120,
    )
    p = tmp_path / "p.yaml"
    url = srv.openai_base
    p.write_text(
        yaml.safe_dump(
            {
                "name": "f",
                "out": "run",
                "bench": "bench",
                "setups": [
                    {"name": "k1", "model": f"openai/gpt-4.1@{url}", "turns_per_call": 1},
                    {"name": "k5", "model": f"openai/gpt-4.1@{url}", "turns_per_call": 5, "prompt": "taxonomy"},
                    {"name": "k30", "model": f"openai/gpt-4.1@{url}", "turns_per_call": 30},
                ],
                "judges": [{"name": "j", "model": f"openai/o4-mini@{url}"}],
                "llm": {"cache": "c.sqlite", "progress": False},
            }
        )
    )
    exp = load_params(p)
    rows = forecast(exp, exp.prepare_instances(write=False))
    exp.run()
    cmp = compare_with_run(rows, Run.open(tmp_path / "run"))
    assert {c.stage for c in cmp} == {"simulate", "judge"}
    for c in cmp:
        assert c.actual_calls == c.forecast_calls, c
        assert abs(c.input_ratio - 1) <= 0.15, c  # the fake server counts ~4 characters per token too
    # the run as a pilot: with its observed output and reasoning means, the judges' output is the bill's
    run = Run.open(tmp_path / "run")
    judged = [c for c in cmp if c.stage == "judge"]
    assert judged and all(c.forecast_output > 2 * c.actual_output for c in judged)  # the defaults
    again = forecast(
        exp, exp.prepare_instances(write=False), observed=observed_reasoning(run), observed_out=observed_output(run)
    )
    for c in compare_with_run(again, run):
        assert abs(c.actual_output / c.forecast_output - 1) <= (0.01 if c.stage == "judge" else 0.15), c
    capsys.readouterr()
    assert main(["estimate", str(p), "--run", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "output tokens: the run's observed means for 5 of 5 rows" in out  # k1, k5, k30, the judge's two kinds
    tot = plan_totals(again)
    assert tot.with_batch < tot.live  # the judge and the 30-turn setup at half price
    assert (
        f"choice: every call live (with prompt caching) ${tot.live:,.2f}; with --batch" in out
        and f"dependent steps live, llm.batch_dependent) ${tot.with_batch:,.2f}" in out
    ), out


def test_forecast_says_how_the_params_llm_settings_send_each_row(tmp_path):
    from cocoeval import build
    from cocoeval.sources.demo import write_demo_data

    paths = write_demo_data(tmp_path / "demo")
    build([f"{k}:{p}" for k, p in paths.items()], tmp_path / "bench")
    exp = load_params(ROOT / "params" / "paper.yaml")
    exp.params = exp.params.model_copy(update={"bench": str(tmp_path / "bench")})
    insts = exp.prepare_instances(write=False)

    def modes(**llm) -> dict[str, str]:
        exp.params = exp.params.model_copy(update={"llm": exp.params.llm.model_copy(update=llm)})
        rows = forecast(exp, insts)
        for r in rows:
            assert r.cost_planned_usd == (r.cost_batch_usd if r.mode == "batch" else r.cost_cached_usd)
        return {r.name: r.mode for r in rows}

    assert set(modes(batch=False).values()) == {"live"}
    m = modes(batch=True, batch_dependent="live")
    assert m["gpt41-vanilla-30"] == m["o4-mini:fine_grained"] == m["o4-mini:overall"] == "batch"
    assert m["gpt41-vanilla-1"] == m["opus4-taxonomy-5"] == m["gpt41-user-sim"] == "live"
    m = modes(batch=True, batch_dependent="rounds")
    assert m["gpt41-vanilla-1"] == m["opus4-taxonomy-5"] == "batch"

    # the choice printed beside the plan: every call live, or --batch as the params' dependent mode says
    for dependent in ("live", "rounds"):
        exp.params = exp.params.model_copy(
            update={"llm": exp.params.llm.model_copy(update={"batch": False, "batch_dependent": dependent})}
        )
        rows = forecast(exp, insts)
        exp.params = exp.params.model_copy(update={"llm": exp.params.llm.model_copy(update={"batch": True})})
        batched = {r.name: r.cost_planned_usd for r in forecast(exp, insts)}
        tot = plan_totals(rows)
        assert tot.planned == tot.live == sum(r.cost_cached_usd for r in rows)
        assert tot.with_batch == sum(batched.values())
        assert all(r.cost_if_batch_usd == batched[r.name] for r in rows)
        assert tot.with_batch < tot.live if dependent == "live" else tot.with_batch > tot.live


def test_observed_output_replaces_the_default_per_row_by_hand(tmp_path):
    """A pilot's records: the mean visible output per unit of each row replaces the default."""
    from cocoeval.core.schema import CallRecord, Continuation, Judgment
    from cocoeval.run.estimate import JUDGE_OUTPUT_OVERALL, JUDGE_OUTPUT_PER_TURN, observed_output

    def rec(model: str, out: int, think: int = 0, status: str = "ok") -> CallRecord:
        return CallRecord(
            request_hash="h",
            model=model,
            status=status,
            input_tokens=1000,
            output_tokens=out + think,
            reasoning_tokens=think,
        )

    inst = instance("d/c/0", n_ref=4)
    sim, oai_j, ant_j = "openai/gpt-4.1", "openai/o4-mini", "anthropic/claude-sonnet-4-20250514"
    run = Run(
        instances=[inst],
        continuations={
            "k2": [
                # 4 turns from 2 answered calls (30 + 50 visible) and a failed call: 80 / 4 = 20 per turn
                Continuation(
                    instance_id=inst.id,
                    setup_id="s",
                    setup_name="k2",
                    turns=inst.reference,
                    calls=[rec(sim, 30), rec(sim, 50), rec(sim, 999, status="failed")],
                ),
                # an invalid continuation's calls count too: 20 visible for 1 turn -> (80 + 20) / 5 = 20
                Continuation(
                    instance_id="d/c/1",
                    setup_id="s",
                    setup_name="k2",
                    turns=inst.reference[:1],
                    calls=[rec(sim, 20)],
                    status="invalid",
                    reason="stopped",
                ),
            ]
        },
        judgments={
            "j": [
                # fine-grained: 4 judged turns, visible 40 (+ 400 reasoning) and, re-asked, 24 -> (40 + 24) / 8 = 8
                Judgment(
                    instance_id=inst.id,
                    target="reference",
                    judge_id="x",
                    judge_name="j",
                    kind="fine_grained",
                    taxonomy_hash="t",
                    judged_turns=[0, 1, 2, 3],
                    calls=[rec(oai_j, 40, 400), rec(oai_j, 24, 300)],
                ),
                # overall: per call, 90 and 30 -> 60
                Judgment(
                    instance_id=inst.id,
                    target="reference",
                    judge_id="y",
                    judge_name="j",
                    kind="overall",
                    taxonomy_hash="t",
                    consistency=5,
                    collaborativeness=5,
                    calls=[rec(oai_j, 90, 500)],
                ),
                Judgment(
                    instance_id=inst.id,
                    target="s",
                    judge_id="y",
                    judge_name="j",
                    kind="overall",
                    taxonomy_hash="t",
                    consistency=5,
                    collaborativeness=5,
                    calls=[rec(oai_j, 30, 100)],
                ),
            ],
            "a": [
                Judgment(
                    instance_id=inst.id,
                    target="reference",
                    judge_id="z",
                    judge_name="a",
                    kind="overall",
                    taxonomy_hash="t",
                    consistency=5,
                    collaborativeness=5,
                    calls=[rec(ant_j, 70)],
                )
            ],
        },
    )
    assert observed_output(run) == {
        ("simulate", "k2", sim): 20.0,
        ("judge", "j:fine_grained", oai_j): 8.0,
        ("judge", "j:overall", oai_j): 60.0,
        ("judge", "a:overall", ant_j): 70.0,
    }

    # the forecast: 2 instances of 4 reference turns, one 2-turns-per-call setup, one judge of both kinds
    insts = [instance(f"d/c{i}/0", n_ref=4) for i in range(2)]
    write_jsonl(tmp_path / "bench" / "eval.jsonl", insts)
    write_jsonl(tmp_path / "bench" / "train.jsonl", [])
    (tmp_path / "p.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "f",
                "out": "run",
                "bench": "bench",
                "setups": [{"name": "k2", "model": sim, "turns_per_call": 2}],
                "judges": [{"name": "j", "model": oai_j, "reasoning_effort": "low"}],
            }
        )
    )
    exp = load_params(tmp_path / "p.yaml")

    def by_name(**kw) -> dict[str, ForecastRow]:
        return {r.name: r for r in forecast(exp, exp.prepare_instances(write=False), **kw)}

    default = by_name()
    # default: the references' own turns for the simulator; 50 per judged turn, 120 per overall call, 300 reasoning
    ref_out = sum(count_tokens(f"{t.speaker}: {t.text}") + 1 for i in insts for t in i.reference)
    assert default["k2"].output_tokens == ref_out and default["k2"].output_source == "default"
    # 2 targets per instance (reference, k2), 4 judged turns each
    assert default["j:fine_grained"].output_tokens == 4 * (JUDGE_OUTPUT_PER_TURN * 4 + 300)
    assert default["j:overall"].output_tokens == 4 * (JUDGE_OUTPUT_OVERALL + 300)
    seen = by_name(observed={("judge", oai_j): 250.0}, observed_out=observed_output(run))
    # 2 calls of 2 turns per instance at 20 per turn
    assert seen["k2"].calls == 4 and seen["k2"].output_tokens == 4 * 2 * 20
    assert seen["j:fine_grained"].output_tokens == 4 * (8 * 4 + 250)
    assert seen["j:fine_grained"].reasoning_tokens == 4 * 250
    assert seen["j:overall"].output_tokens == 4 * (60 + 250)
    assert {r.output_source for r in seen.values()} == {"observed"}
    for k in ("input_tokens", "cached_input_tokens", "calls"):  # only the output changes
        assert all(getattr(seen[n], k) == getattr(default[n], k) for n in seen)
    # the output price applies to the observed tokens: the fine-grained cost falls by exactly
    # the output difference (visible and reasoning) at o4-mini's output price
    prices = PriceTable.load()
    diff = default["j:fine_grained"].output_tokens - seen["j:fine_grained"].output_tokens
    assert (
        abs(
            default["j:fine_grained"].cost_naive_usd
            - seen["j:fine_grained"].cost_naive_usd
            - prices.cost(oai_j, Usage(output_tokens=diff))
        )
        < 1e-12
    )


def _cached_by_prefix(requests: list[tuple[str, ...]]) -> list[int]:
    """Per request, its longest common prefix (in tokens) with any earlier request: an ideal
    prefix cache, with no minimum length and no steps."""
    out = []
    for n, r in enumerate(requests):
        out.append(
            max(
                (
                    next((i for i, (x, y) in enumerate(zip(r, e, strict=False)) if x != y), min(len(r), len(e)))
                    for e in requests[:n]
                ),
                default=0,
            )
        )
    return out


def test_judge_cache_bounds_by_hand_and_against_an_ideal_prefix_cache():
    instr, context, targets = {"fine_grained": 100, "overall": 50}, 1000, [500, 700]
    b = judge_cache_bounds(instr, context, targets)
    # total 2*(100+1000) + 2*(50+1000) + 2*(500+700) = 6700; paper: per kind n*(I+C) - C;
    # reordered: kinds*n*C - C + (kinds-1)*sum(T); free: total - C - sum(T)
    assert b == {"total": 6700, "paper": 2300, "reordered": 4200, "free": 4500}

    def toks(tag: str, n: int) -> tuple[str, ...]:
        return tuple(f"{tag}{i}" for i in range(n))

    def requests(inst: str, reordered: bool) -> list[tuple[str, ...]]:
        ctx = toks(f"{inst}-ctx", context)
        out = []
        for t, size in enumerate(targets):
            tgt = toks(f"{inst}-t{t}", size)
            for kind, size_i in instr.items():
                ins = toks(kind, size_i)
                out.append(ctx + tgt + ins if reordered else ins + ctx + tgt)
        return out

    for layout in ("paper", "reordered"):
        before = requests("a", layout == "reordered")  # an earlier instance: the paper layout reads its instructions
        mine = requests("b", layout == "reordered")
        cached = _cached_by_prefix(before + mine)[len(before) :]
        assert sum(len(r) for r in mine) == b["total"]
        assert sum(cached) == b[layout], layout
    assert judge_cache_bounds({}, 10, [5]) == {"total": 0, "paper": 0, "reordered": 0, "free": 0}


O4 = "openai/o4-mini-2025-04-16"


def _context_params(tmp_path, **context):
    p = tmp_path / "ctx.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "ctx",
                "out": "run",
                "build": {"demo_data": True, "context": {"metadata": O4, "summary": O4, "clean": O4, **context}},
                "setups": [{"name": "k30", "model": "openai/gpt-4.1", "turns_per_call": 30}],
                "judges": [{"name": "j", "model": O4}],
            }
        )
    )
    return p


def test_build_context_calls_are_forecast_by_the_builds_own_code(tmp_path, capsys):
    """build.context on the demo data: one M call per conversation with an instance, one S call per
    instance of both splits, one clean-up call per chunk of QMSum Product and Academic; priced,
    and in the totals."""
    from cocoeval import build
    from cocoeval.bench.clean import chunks
    from cocoeval.bench.config import BuildConfig
    from cocoeval.bench.store import load_instances
    from cocoeval.sources import SourceReport, load_conversations, parse_source_spec
    from cocoeval.sources.demo import demo_sources, sample_dir

    p = _context_params(tmp_path)
    exp = load_params(p)
    insts = exp.prepare_instances(write=False)
    plan = exp.build_plan()
    assert plan is not None and not plan.cached
    rows = forecast(exp, insts, build=plan)
    by = {r.name: r for r in rows if r.stage == "build"}
    assert set(by) == {"clean", "metadata", "summary"} and all(r.model == O4 for r in by.values())

    # what the extractive build of the same sources gives, counted apart
    ref = tmp_path / "ref"
    build(demo_sources(tmp_path / "demo"), ref)
    both = load_instances(ref, None)
    convs = {(i.dataset, i.provenance.conversation_id) for i in both}
    cfg = BuildConfig()
    qmsum = load_conversations(parse_source_spec(f"qmsum:{sample_dir()}"), SourceReport())
    n_chunks = sum(
        len(chunks(c.turns, 30, 12_000))
        for c in qmsum
        if c.dataset in ("qmsum_product", "qmsum_academic") and len(c.turns) >= cfg.need(c)
    )
    assert by["metadata"].calls == len(convs) == 11
    assert by["summary"].calls == sum(i.provenance.start_index > 0 for i in both) == len(both) == 18
    assert sum(i.split == "train" for i in both) == 6  # the train windows are summarised too
    # by hand: Bed017 299 turns, Bro008 244, ES2005a 94, IS1004a 78, TS3010a 121; 30 turns per call
    assert by["clean"].calls == n_chunks == 10 + 9 + 4 + 3 + 5
    prices = PriceTable.load(None)
    for r in by.values():
        assert r.reasoning_tokens == 1000 * r.calls  # o4-mini, effort unset: medium
        assert r.note is None and r.input_tokens > 0
        assert r.cost_naive_usd == prices.cost(O4, Usage(input_tokens=r.input_tokens, output_tokens=r.output_tokens))
        assert abs(r.cost_naive_usd - (r.input_tokens * 1.10 + r.output_tokens * 4.40) / 1e6) < 1e-9
    assert by["metadata"].output_tokens == 11 * (300 + 1000)
    assert by["summary"].output_tokens == 18 * (200 + 1000)
    tot, without = plan_totals(rows), plan_totals([r for r in rows if r.stage != "build"])
    for k in ("naive", "live", "batch", "planned", "with_batch"):
        build_col = {
            "naive": "cost_naive_usd",
            "live": "cost_cached_usd",
            "batch": "cost_batch_usd",
            "planned": "cost_planned_usd",
            "with_batch": "cost_if_batch_usd",
        }[k]
        assert abs(getattr(tot, k) - getattr(without, k) - sum(getattr(r, build_col) for r in by.values())) < 1e-9
        assert getattr(tot, k) > getattr(without, k)
    counts = plan.datasets
    assert sum(c["eval_summaries"] + c["train_summaries"] for c in counts.values()) == 18
    assert counts["qmsum_academic"]["clean_chunks"] == 19 and counts["qmsum_product"]["clean_chunks"] == 12

    capsys.readouterr()
    assert main(["estimate", str(p)]) == 0
    out = capsys.readouterr().out
    assert "build     clean" in out and "build     metadata" in out and "build     summary" in out
    assert f"total: {sum(r.calls for r in rows):,} calls" in out
    assert (
        "qmsum_academic: 3 eval instance(s) simulated; build windows 3 eval, 4 train; summaries (S) 3 eval, "
        "4 train; metadata (M) 2 conversation(s); clean-up 19 chunk(s)" in out
    ), out


def test_build_context_already_made_is_not_counted(tmp_path, capsys):
    """A benchmark folder whose instances were made with the params' models: those calls come
    from the call cache; the row says so and counts nothing. A kind made otherwise is counted."""
    from cocoeval import build
    from cocoeval.bench.store import load_instances
    from cocoeval.core.schema import Metadata, Summary
    from cocoeval.sources.demo import demo_sources

    p = _context_params(tmp_path)
    exp = load_params(p)
    bench = exp.bench_dir()
    build(demo_sources(tmp_path / "demo"), bench)
    for split in ("eval", "train"):
        made = [
            i.model_copy(
                update={
                    "metadata": Metadata.model_validate({**i.metadata.model_dump(), "method": "llm", "model": O4}),
                    "summary": Summary.model_validate({**i.summary.model_dump(), "method": "llm", "model": O4}),
                    "provenance": i.provenance.model_copy(update={"text_method": "llm", "text_model": O4}),
                }
            )
            for i in load_instances(bench, split)
        ]
        write_jsonl(bench / f"{split}.jsonl", made)
    plan = exp.build_plan()
    assert plan is not None and set(plan.cached) == {"clean", "metadata", "summary"} and not plan.calls
    rows = [r for r in forecast(exp, exp.prepare_instances(write=False), build=plan) if r.stage == "build"]
    assert len(rows) == 3
    for r in rows:
        assert r.calls == r.input_tokens == r.output_tokens == 0 and r.cost_cached_usd == 0
        assert "already made by openai/o4-mini-2025-04-16" in r.note and "not counted" in r.note
    capsys.readouterr()
    assert main(["estimate", str(p)]) == 0
    assert "answered from the call cache, not counted" in capsys.readouterr().out

    # asked for another summary model: S is counted again (18 instances), M and the clean-up stay cached
    exp = load_params(_context_params(tmp_path, summary="openai/gpt-4.1"))
    plan = exp.build_plan()
    assert plan is not None and set(plan.cached) == {"clean", "metadata"}
    by = {r.name: r for r in forecast(exp, exp.prepare_instances(write=False), build=plan) if r.stage == "build"}
    assert by["summary"].calls == 18 and by["summary"].model == "openai/gpt-4.1"
    assert by["metadata"].calls == by["clean"].calls == 0


def test_unknown_usage_is_null_in_call_records_and_left_out_of_observations():
    """Issue #24: a call whose usage the provider did not say records null tokens, never 0, and
    every reader of the records leaves it out instead of reading 0 tokens."""
    import pytest
    from pydantic import ValidationError

    from cocoeval.core.schema import TOKEN_FIELDS, CallRecord, Continuation, Judgment
    from cocoeval.llm import CallResult
    from cocoeval.llm.base import GenerateResponse

    sim, oai_j = "openai/gpt-4.1", "openai/o4-mini"
    why = "the provider reported no usage"

    def unknown(model: str) -> CallRecord:
        return CallRecord.of(
            CallResult(
                key="u",
                model=model,
                stage="x",
                status="ok",
                response=GenerateResponse(text="a", usage=Usage(unknown=why)),
            )
        )

    def rec(model: str, out: int, think: int = 0) -> CallRecord:
        return CallRecord(
            request_hash="h", model=model, input_tokens=1000, output_tokens=out + think, reasoning_tokens=think
        )

    u = unknown(sim)
    assert u.usage_unknown == why and all(getattr(u, k) is None for k in TOKEN_FIELDS)
    # written without the null counts, read back null (not the 0 default), nested in a record too
    assert CallRecord.model_validate_json(u.to_json()) == u and '"output_tokens"' not in u.to_json()
    x = Continuation(instance_id="i", setup_id="s", calls=[u])
    assert Continuation.model_validate_json(x.to_json()).calls[0].output_tokens is None
    with pytest.raises(ValidationError, match="need usage_unknown"):
        CallRecord(request_hash="h", model=sim, output_tokens=None)
    with pytest.raises(ValidationError, match="has null token counts"):
        CallRecord(request_hash="h", model=sim, output_tokens=5, usage_unknown=why)

    inst = instance("d/c/0", n_ref=4)
    run = Run(
        instances=[inst],
        continuations={
            "k2": [
                Continuation(
                    instance_id=inst.id,
                    setup_id="s",
                    setup_name="k2",
                    turns=inst.reference,
                    calls=[rec(sim, 30), rec(sim, 50)],
                ),
                # which turns the unknown call gave is not known: the whole continuation is left
                # out (80 / 4 = 20 per turn; read as 0 it would be (80 + 100) / 8 = 22.5)
                Continuation(
                    instance_id="d/c/1",
                    setup_id="s",
                    setup_name="k2",
                    turns=inst.reference,
                    calls=[rec(sim, 100), unknown(sim)],
                ),
            ]
        },
        judgments={
            "j": [
                Judgment(
                    instance_id=inst.id,
                    target="reference",
                    judge_id="y",
                    judge_name="j",
                    kind="overall",
                    taxonomy_hash="t",
                    consistency=5,
                    collaborativeness=5,
                    calls=[rec(oai_j, 90, 500), unknown(oai_j)],
                )
            ]
        },
    )
    assert observed_output(run) == {("simulate", "k2", sim): 20.0, ("judge", "j:overall", oai_j): 90.0}
    assert observed_reasoning(run) == {("judge", oai_j): 500.0}
    row = ForecastRow(
        stage="judge",
        name="j:overall",
        model=oai_j,
        calls=2,
        input_tokens=2000,
        cached_input_tokens=0,
        cache_write_tokens=0,
        output_tokens=1200,
        reasoning_tokens=1000,
        output_source="default",
        note=None,
        cost_naive_usd=None,
        cost_cached_usd=None,
        cost_batch_usd=None,
        mode="live",
        cost_planned_usd=None,
        cost_if_batch_usd=None,
    )
    [cmp] = compare_with_run([row], run)
    assert (cmp.actual_calls, cmp.actual_input, cmp.actual_output, cmp.actual_usage_unknown_calls) == (2, 1000, 590, 1)

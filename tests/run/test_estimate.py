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
        calls = ["\n".join(m.content for m in step_messages(prompt, inst, inst.reference[:j], 1,
                                                             behaviours=format_behaviours(tax))) for j in range(30)]
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
    srv.configure(answers=[{"match": "Continuation to annotate", "text": fine},
                           {"match": "Continuation to evaluate",
                            "text": '{"consistency": 7, "collaborativeness": 7, "rationale": "fine"}'},
                           *({"match": f"next {k} turn", "text": "\n".join(line.splitlines()[:k])} for k in (1, 5, 30))],
                  reasoning_tokens=120)
    p = tmp_path / "p.yaml"
    url = srv.openai_base
    p.write_text(yaml.safe_dump({
        "name": "f", "out": "run", "bench": "bench",
        "setups": [{"name": "k1", "model": f"openai/gpt-4.1@{url}", "turns_per_call": 1},
                   {"name": "k5", "model": f"openai/gpt-4.1@{url}", "turns_per_call": 5, "prompt": "taxonomy"},
                   {"name": "k30", "model": f"openai/gpt-4.1@{url}", "turns_per_call": 30}],
        "judges": [{"name": "j", "model": f"openai/o4-mini@{url}"}],
        "llm": {"cache": "c.sqlite", "progress": False}}))
    exp = load_params(p)
    rows = forecast(exp, exp.prepare_instances(write=False))
    exp.run()
    cmp = compare_with_run(rows, Run.open(tmp_path / "run"))
    assert {c["stage"] for c in cmp} == {"simulate", "judge"}
    for c in cmp:
        assert c["actual_calls"] == c["forecast_calls"], c
        assert abs(c["input_ratio"] - 1) <= 0.15, c  # the fake server counts ~4 characters per token too
    # the run as a pilot: with its observed output and reasoning means, the judges' output is the bill's
    run = Run.open(tmp_path / "run")
    judged = [c for c in cmp if c["stage"] == "judge"]
    assert judged and all(c["forecast_output"] > 2 * c["actual_output"] for c in judged)  # the defaults
    again = forecast(exp, exp.prepare_instances(write=False), observed=observed_reasoning(run),
                     observed_out=observed_output(run))
    for c in compare_with_run(again, run):
        assert abs(c["actual_output"] / c["forecast_output"] - 1) <= (0.01 if c["stage"] == "judge" else 0.15), c
    capsys.readouterr()
    assert main(["estimate", str(p), "--run", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "output tokens: the run's observed means for 5 of 5 rows" in out  # k1, k5, k30, the judge's two kinds
    tot = plan_totals(again)
    assert tot["with_batch"] < tot["live"]  # the judge and the 30-turn setup at half price
    assert (f"choice: every call live (with prompt caching) ${tot['live']:,.2f}; with --batch" in out
            and f"dependent steps live, llm.batch_dependent) ${tot['with_batch']:,.2f}" in out), out


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
            assert r["cost_planned_usd"] == (r["cost_batch_usd"] if r["mode"] == "batch" else r["cost_cached_usd"])
        return {r["name"]: r["mode"] for r in rows}

    assert set(modes(batch=False).values()) == {"live"}
    m = modes(batch=True, batch_dependent="live")
    assert m["gpt41-vanilla-30"] == m["o4-mini:fine_grained"] == m["o4-mini:overall"] == "batch"
    assert m["gpt41-vanilla-1"] == m["opus4-taxonomy-5"] == m["gpt41-user-sim"] == "live"
    m = modes(batch=True, batch_dependent="rounds")
    assert m["gpt41-vanilla-1"] == m["opus4-taxonomy-5"] == "batch"

    # the choice printed beside the plan: every call live, or --batch as the params' dependent mode says
    for dependent in ("live", "rounds"):
        exp.params = exp.params.model_copy(update={"llm": exp.params.llm.model_copy(
            update={"batch": False, "batch_dependent": dependent})})
        rows = forecast(exp, insts)
        exp.params = exp.params.model_copy(update={"llm": exp.params.llm.model_copy(update={"batch": True})})
        batched = {r["name"]: r["cost_planned_usd"] for r in forecast(exp, insts)}
        tot = plan_totals(rows)
        assert tot["planned"] == tot["live"] == sum(r["cost_cached_usd"] for r in rows)
        assert tot["with_batch"] == sum(batched.values())
        assert all(r["cost_if_batch_usd"] == batched[r["name"]] for r in rows)
        assert tot["with_batch"] < tot["live"] if dependent == "live" else tot["with_batch"] > tot["live"]


def test_observed_output_replaces_the_default_per_row_by_hand(tmp_path):
    """A pilot's records: the mean visible output per unit of each row replaces the default."""
    from cocoeval.core.schema import CallRecord, Continuation, Judgment
    from cocoeval.run.estimate import JUDGE_OUTPUT_OVERALL, JUDGE_OUTPUT_PER_TURN, observed_output

    def rec(model: str, out: int, think: int = 0, status: str = "ok") -> CallRecord:
        return CallRecord(request_hash="h", model=model, status=status, input_tokens=1000,
                          output_tokens=out + think, reasoning_tokens=think)

    inst = instance("d/c/0", n_ref=4)
    sim, oai_j, ant_j = "openai/gpt-4.1", "openai/o4-mini", "anthropic/claude-sonnet-4-20250514"
    run = Run(instances=[inst],
              continuations={"k2": [
                  # 4 turns from 2 answered calls (30 + 50 visible) and a failed call: 80 / 4 = 20 per turn
                  Continuation(instance_id=inst.id, setup_id="s", setup_name="k2", turns=inst.reference,
                               calls=[rec(sim, 30), rec(sim, 50), rec(sim, 999, status="failed")]),
                  # an invalid continuation's calls count too: 20 visible for 1 turn -> (80 + 20) / 5 = 20
                  Continuation(instance_id="d/c/1", setup_id="s", setup_name="k2", turns=inst.reference[:1],
                               calls=[rec(sim, 20)], status="invalid", reason="stopped")]},
              judgments={"j": [
                  # fine-grained: 4 judged turns, visible 40 (+ 400 reasoning) and, re-asked, 24 -> (40 + 24) / 8 = 8
                  Judgment(instance_id=inst.id, target="reference", judge_id="x", judge_name="j", kind="fine_grained",
                           taxonomy_hash="t", judged_turns=[0, 1, 2, 3], calls=[rec(oai_j, 40, 400), rec(oai_j, 24, 300)]),
                  # overall: per call, 90 and 30 -> 60
                  Judgment(instance_id=inst.id, target="reference", judge_id="y", judge_name="j", kind="overall",
                           taxonomy_hash="t", consistency=5, collaborativeness=5, calls=[rec(oai_j, 90, 500)]),
                  Judgment(instance_id=inst.id, target="s", judge_id="y", judge_name="j", kind="overall",
                           taxonomy_hash="t", consistency=5, collaborativeness=5, calls=[rec(oai_j, 30, 100)])],
                  "a": [Judgment(instance_id=inst.id, target="reference", judge_id="z", judge_name="a", kind="overall",
                                 taxonomy_hash="t", consistency=5, collaborativeness=5, calls=[rec(ant_j, 70)])]})
    assert observed_output(run) == {("simulate", "k2", sim): 20.0, ("judge", "j:fine_grained", oai_j): 8.0,
                                    ("judge", "j:overall", oai_j): 60.0, ("judge", "a:overall", ant_j): 70.0}

    # the forecast: 2 instances of 4 reference turns, one 2-turns-per-call setup, one judge of both kinds
    insts = [instance(f"d/c{i}/0", n_ref=4) for i in range(2)]
    write_jsonl(tmp_path / "bench" / "eval.jsonl", insts)
    write_jsonl(tmp_path / "bench" / "train.jsonl", [])
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({
        "name": "f", "out": "run", "bench": "bench",
        "setups": [{"name": "k2", "model": sim, "turns_per_call": 2}],
        "judges": [{"name": "j", "model": oai_j, "reasoning_effort": "low"}]}))
    exp = load_params(tmp_path / "p.yaml")

    def by_name(**kw) -> dict[str, dict]:
        return {r["name"]: r for r in forecast(exp, exp.prepare_instances(write=False), **kw)}

    default = by_name()
    # default: the references' own turns for the simulator; 50 per judged turn, 120 per overall call, 300 reasoning
    ref_out = sum(count_tokens(f"{t.speaker}: {t.text}") + 1 for i in insts for t in i.reference)
    assert default["k2"]["output_tokens"] == ref_out and default["k2"]["output_source"] == "default"
    # 2 targets per instance (reference, k2), 4 judged turns each
    assert default["j:fine_grained"]["output_tokens"] == 4 * (JUDGE_OUTPUT_PER_TURN * 4 + 300)
    assert default["j:overall"]["output_tokens"] == 4 * (JUDGE_OUTPUT_OVERALL + 300)
    seen = by_name(observed={("judge", oai_j): 250.0}, observed_out=observed_output(run))
    # 2 calls of 2 turns per instance at 20 per turn
    assert seen["k2"]["calls"] == 4 and seen["k2"]["output_tokens"] == 4 * 2 * 20
    assert seen["j:fine_grained"]["output_tokens"] == 4 * (8 * 4 + 250)
    assert seen["j:fine_grained"]["reasoning_tokens"] == 4 * 250
    assert seen["j:overall"]["output_tokens"] == 4 * (60 + 250)
    assert {r["output_source"] for r in seen.values()} == {"observed"}
    for k in ("input_tokens", "cached_input_tokens", "calls"):  # only the output changes
        assert all(seen[n][k] == default[n][k] for n in seen)
    # the output price applies to the observed tokens: the fine-grained cost falls by exactly
    # the output difference (visible and reasoning) at o4-mini's output price
    prices = PriceTable.load()
    diff = default["j:fine_grained"]["output_tokens"] - seen["j:fine_grained"]["output_tokens"]
    assert abs(default["j:fine_grained"]["cost_naive_usd"] - seen["j:fine_grained"]["cost_naive_usd"]
               - prices.cost(oai_j, Usage(output_tokens=diff))) < 1e-12


def _cached_by_prefix(requests: list[tuple[str, ...]]) -> list[int]:
    """Per request, its longest common prefix (in tokens) with any earlier request: an ideal
    prefix cache, with no minimum length and no steps."""
    out = []
    for n, r in enumerate(requests):
        out.append(max((next((i for i, (x, y) in enumerate(zip(r, e, strict=False)) if x != y), min(len(r), len(e)))
                        for e in requests[:n]), default=0))
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
        cached = _cached_by_prefix(before + mine)[len(before):]
        assert sum(len(r) for r in mine) == b["total"]
        assert sum(cached) == b[layout], layout
    assert judge_cache_bounds({}, 10, [5]) == {"total": 0, "paper": 0, "reordered": 0, "free": 0}

"""Forecasts: prefix stability of the prompt layout, and forecast vs a run through the test server."""

from __future__ import annotations

import itertools

import yaml

from cocoeval.estimate import compare_with_run, forecast
from cocoeval.experiment import load_params
from cocoeval.jsonio import write_jsonl
from cocoeval.llm.usage import count_tokens
from cocoeval.prompts import load_prompt
from cocoeval.render import format_behaviours, step_messages
from cocoeval.run import Run
from cocoeval.taxonomy import load_taxonomy

from .conftest import ROOT
from .sim_helpers import SPEAKERS, instance


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


def test_forecast_matches_a_run_through_the_test_server(srv, tmp_path):
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
                           *({"match": f"next {k} turn", "text": "\n".join(line.splitlines()[:k])} for k in (1, 5, 30))])
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


def test_forecast_says_how_the_params_llm_settings_send_each_row(tmp_path):
    from cocoeval import build
    from cocoeval.demo import write_demo_data

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

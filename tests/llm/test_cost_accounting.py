"""What a run paid, through the real SDKs against the fake provider server: every billed answer
counted once (refusals and unreadable answers included), nothing counted that was not billed."""

from __future__ import annotations

import json

import pytest
import yaml

from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner

WIRES = ["openai", "anthropic"]
MODES = ["live", "processes", "batch"]


def model(srv, wire: str) -> str:
    return (
        f"openai/gpt-4.1@{srv.openai_base}"
        if wire == "openai"
        else f"anthropic/claude-opus-4-20250514@{srv.anthropic_base}"
    )


def calls(m: str, prompts: list[str]) -> list[Call]:
    return [
        Call(
            model=m,
            stage="test",
            tag=p,
            request=GenerateRequest(
                messages=[Message(role="system", content="Be brief."), Message(role="user", content=p)], max_tokens=20
            ),
        )
        for p in prompts
    ]


def runner(tmp_path, name: str, mode: str = "live") -> Runner:
    kw = {"processes": 2} if mode == "processes" else {"batch": True, "batch_poll_s": 0.01} if mode == "batch" else {}
    return Runner(LLMConfig(cache=str(tmp_path / name), progress=False, **kw))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
def test_a_refused_answer_is_billed_so_its_tokens_and_cost_count(srv, tmp_path, wire, mode):
    prompt = "refuse this " + "x" * 400
    r = runner(tmp_path, "answered.sqlite", mode)
    [ok] = r.run(calls(model(srv, wire), [prompt]))
    paid = r.ledger.totals()
    r.close()
    srv.reset()
    srv.configure(faults=[{"match": "refuse", "kind": "content_filter", "times": -1}])
    r = runner(tmp_path, "refused.sqlite", mode)
    [res] = r.run(calls(model(srv, wire), [prompt]))
    t = r.ledger.totals()
    assert r.batched == (1 if mode == "batch" else 0) and r.sent == (0 if mode == "batch" else 1)
    r.close()
    assert res.status == "failed" and res.reason == "content_filter" and ok.status == "ok"
    # the same prompt: the same input tokens billed, answered or refused (the refusal wrote no text)
    assert t["failed"] == 1 and t["input_tokens"] == paid["input_tokens"] > 100
    assert 0 < res.cost_usd == pytest.approx(t["cost_usd"]) and t["cost_usd"] <= paid["cost_usd"]
    assert t["lost_attempts"] == 0  # counted once: as its usage, not also as a lost attempt
    assert res.usage.input_tokens == t["input_tokens"] and res.response is None  # what the records get


@pytest.mark.parametrize("wire", WIRES)
def test_an_unreadable_answer_is_counted_as_paid_with_its_input_estimated(srv, tmp_path, wire):
    srv.configure(faults=[{"match": "garbled", "kind": "malformed", "times": -1}])
    r = runner(tmp_path, "c.sqlite")
    [res] = r.run(calls(model(srv, wire), ["garbled " + "y" * 400]))
    t = r.ledger.totals()
    assert res.status == "failed" and res.reason == "malformed_response"
    assert srv.stats()["prompts"]["garbled " + "y" * 400] == 1  # one attempt, answered: billed by the provider
    assert t["lost_attempts"] == 1 and t["lost_input_tokens"] > 100
    assert 0 < t["lost_cost_usd"] == pytest.approx(t["cost_usd"]) == pytest.approx(res.cost_usd)


@pytest.mark.parametrize("wire", WIRES)
def test_a_call_refused_before_any_work_costs_zero_not_unknown(srv, tmp_path, wire):
    srv.configure(faults=[{"match": "huge", "kind": "context_length", "times": -1}])
    r = runner(tmp_path, "c.sqlite")
    [res] = r.run(calls(model(srv, wire), ["huge prompt"]))
    t = r.ledger.totals()
    assert res.status == "failed" and res.reason == "context_length"
    assert res.cost_usd == 0.0 and t["cost_usd"] == 0.0 and t["cost_unknown_calls"] == 0
    assert t["input_tokens"] == 0 and t["lost_attempts"] == 0


def test_an_answer_paid_once_is_counted_once_however_often_it_is_used(srv, tmp_path):
    m = model(srv, "openai")
    r = runner(tmp_path, "c.sqlite")
    first = r.run(calls(m, ["a", "b", "a"]))  # "a" twice in one run: sent and paid once
    again = r.run(calls(m, ["a", "c"]))  # the same runner: "a" is its own answer, not one re-used
    t = r.ledger.totals()
    assert srv.stats()["requests"] == 3 and t["cache_hits"] == 2 and t["reused_calls"] == 0
    assert t["cost_usd"] > 0 and t["cost_usd"] == pytest.approx(sum(x.cost_usd for x in first + again))
    r.close()
    # another runner (a later invocation): the cached answers are re-used, paid 0 now, and say
    # what they cost when they were paid
    r2 = runner(tmp_path, "c.sqlite")
    out = r2.run(calls(m, ["a", "b", "c", "a"]))
    t2 = r2.ledger.totals()
    assert srv.stats()["requests"] == 3 and all(x.cache_hit and x.cost_usd == 0 for x in out)
    assert t2["cost_usd"] == 0 and t2["input_tokens"] == 0
    assert t2["cache_hits"] == 4 and t2["reused_calls"] == 3  # the second "a" is the run's own duplicate
    assert t2["reused_cost_usd"] == pytest.approx(t["cost_usd"])
    assert t2["reused_input_tokens"] == t["input_tokens"] and t2["reused_output_tokens"] == t["output_tokens"]


@pytest.mark.parametrize("wire", WIRES)
def test_answers_from_a_batch_are_valued_at_the_batch_price_when_re_used(srv, tmp_path, wire):
    m = model(srv, wire)
    r = runner(tmp_path, "c.sqlite", "batch")
    r.run(calls(m, ["p", "q", "p"]))  # "p" twice in one batch: paid once
    t = r.ledger.totals()
    assert r.batched == 2 and t["cache_hits"] == 1 and t["reused_calls"] == 0 and t["cost_usd"] > 0
    r.close()
    r2 = runner(tmp_path, "c.sqlite")  # live now: the batch answers come from the cache
    r2.run(calls(m, ["p", "q"]))
    t2 = r2.ledger.totals()
    assert t2["cost_usd"] == 0 and t2["reused_calls"] == 2
    assert t2["reused_cost_usd"] == pytest.approx(t["cost_usd"])  # half the live price, as paid


def _paper_like(tmp_path, m: str, judge: str | None = None):
    from cocoeval import build

    from ..conftest import qmsum_meeting, write_json

    for i in range(2):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "runs/p",
                "bench": "bench",
                "setups": [{"name": "k30", "model": m, "turns_per_call": 30}],
                **({"judges": [{"name": "j", "model": judge, "kind": ["overall"]}]} if judge else {}),
                "llm": {"cache": "cache.sqlite", "progress": False},
            }
        )
    )
    return params


def test_the_call_records_of_a_refused_call_keep_the_tokens_it_was_billed(srv, tmp_path):
    from cocoeval.run import Run, load_params

    srv.configure(faults=[{"match": "Continuation to evaluate", "kind": "content_filter", "times": -1}])
    exp = load_params(_paper_like(tmp_path, model(srv, "openai"), judge=model(srv, "anthropic")))
    exp.run()
    run = Run.open(tmp_path / "runs" / "p")
    judged = [j for js in run.all_judgments.values() for j in js]
    refused = [c for j in judged for c in j.calls if c.status == "failed"]
    assert refused and all("content_filter" in c.error and c.input_tokens > 100 for c in refused)
    usage = json.loads((tmp_path / "runs" / "p" / "usage.json").read_text())
    row = next(r for r in usage["rows"] if r["stage"] == "judge")
    assert row["failed"] == len(refused) and row["input_tokens"] == sum(c.input_tokens for c in refused)


def test_usage_json_and_the_run_summary_say_what_was_paid_now_before_and_in_all(srv, tmp_path, capsys, monkeypatch):
    from cocoeval.cli import main

    params = _paper_like(tmp_path, model(srv, "openai"))
    monkeypatch.chdir(tmp_path)
    usage_path = tmp_path / "runs" / "p" / "usage.json"

    assert main(["run", str(params), "--stage", "simulate", "--no-progress"]) in (0, 3)
    first = json.loads(usage_path.read_text())
    paid = first["totals"]["cost_usd"]
    sent = srv.stats()["requests"]
    assert sent == first["requests_sent"] > 0 and paid > 0 and first["totals"]["reused_calls"] == 0
    assert first["all_invocations"]["invocations"] == 1 and first["all_invocations"]["cost_usd"] == paid
    assert f"paid by this run: ${paid:.4f}" in capsys.readouterr().out

    assert main(["run", str(params), "--stage", "simulate", "--no-progress"]) in (0, 3)  # again: all cached
    second = json.loads(usage_path.read_text())
    t = second["totals"]
    assert srv.stats()["requests"] == sent and second["requests_sent"] == 0
    assert t["cost_usd"] == 0 and t["input_tokens"] == 0 and t["cache_hits"] == t["calls"] == sent
    assert t["reused_calls"] == sent and t["reused_cost_usd"] == pytest.approx(paid)
    assert second["earlier_invocations"][0]["totals"]["cost_usd"] == paid
    assert second["all_invocations"]["invocations"] == 2 and second["all_invocations"]["cost_usd"] == pytest.approx(
        paid
    )
    printed = capsys.readouterr().out
    assert "paid by this run: $0.0000" in printed
    assert f"re-used from the call cache, not paid again: {sent} answer(s)" in printed
    assert f"the answers this run used cost ${paid:.4f}" in printed
    assert f"all 2 invocations of cocoeval run: paid ${paid:.4f}" in printed


@pytest.mark.parametrize("mode", ["live", "batch"])
def test_a_request_asked_twice_that_fails_is_paid_once_and_both_calls_count_as_failed(srv, tmp_path, mode):
    srv.configure(faults=[{"match": "refuse", "kind": "content_filter", "times": -1}])
    r = runner(tmp_path, "c.sqlite", mode)
    out = r.run(calls(model(srv, "openai"), ["refuse twice " + "z" * 400, "refuse twice " + "z" * 400]))
    t = r.ledger.totals()
    assert [x.status for x in out] == ["failed", "failed"] and srv.stats()["requests"] == 1
    assert t["calls"] == t["failed"] == 2 and t["cost_usd"] > 0
    assert t["cost_usd"] == pytest.approx(out[0].cost_usd + out[1].cost_usd)
    assert out[1].cost_usd == 0 and t["reused_calls"] == 0


def test_estimate_totals_never_show_an_unknown_price_as_a_sum(tmp_path, capsys):
    from cocoeval.cli import main
    from cocoeval.core.jsonio import write_jsonl

    from ..sim_helpers import instance

    write_jsonl(tmp_path / "bench" / "eval.jsonl", [instance(f"d/c{i}/0") for i in range(2)])
    write_jsonl(tmp_path / "bench" / "train.jsonl", [])

    def estimate(setup_model: str, judge_model: str) -> str:
        p = tmp_path / "p.yaml"
        p.write_text(
            yaml.safe_dump(
                {
                    "name": "e",
                    "out": "run",
                    "bench": "bench",
                    "setups": [{"name": "k30", "model": setup_model, "turns_per_call": 30}],
                    "judges": [{"name": "j", "model": judge_model}],
                }
            )
        )
        capsys.readouterr()
        assert main(["estimate", str(p)]) == 0
        return capsys.readouterr().out

    out = estimate("openai/gpt-4.1", "openai/gpt-9")  # the judge's price is not in the table
    total, choice = (next(ln for ln in out.splitlines() if ln.startswith(w)) for w in ("total:", "choice:"))
    assert "unknown" in next(ln for ln in out.splitlines() if ln.startswith("judge"))
    assert "(+2 row(s) at unknown prices)" in total and "(+2 row(s) at unknown prices)" in choice
    out = estimate("openai/gpt-9", "openai/gpt-9")  # no known price at all: unknown, not $0.00
    total = next(ln for ln in out.splitlines() if ln.startswith("total:"))
    assert "naive unknown, with prompt caching unknown" in total and "$0.00" not in total


def test_an_unreadable_usage_json_from_before_is_named_not_a_crash_at_the_end_of_a_run(tmp_path):
    from cocoeval.run.rundir import write_usage

    (tmp_path / "usage.json").write_text("{not json")
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    write_usage(tmp_path, r)
    r.close()
    usage = json.loads((tmp_path / "usage.json").read_text())
    assert usage["earlier_invocations"] == [{"unreadable": str(tmp_path / "usage.json")}]
    assert usage["all_invocations"]["invocations"] == 1 and usage["all_invocations"]["cost_usd"] == 0


def test_the_run_summary_says_unknown_when_no_price_is_known_never_zero(srv, tmp_path, capsys, monkeypatch):
    from cocoeval.cli import main

    params = _paper_like(tmp_path, f"openai/gpt-9@{srv.openai_base}")  # not in the price table
    monkeypatch.chdir(tmp_path)
    printed = []
    for _ in range(2):
        assert main(["run", str(params), "--stage", "simulate", "--no-progress"]) in (0, 3)
        printed.append(capsys.readouterr().out)
    n = json.loads((tmp_path / "runs" / "p" / "usage.json").read_text())["totals"]["reused_calls"]
    assert n > 0 and f"paid by this run: unknown ({n} calls at unknown prices)" in printed[0]
    assert "paid by this run: $0.0000" in printed[1]  # nothing was paid: all from the cache
    assert f"unknown ({n} calls at unknown prices) when first paid" in printed[1]
    assert f"all 2 invocations of cocoeval run: paid unknown ({n} calls at unknown prices)" in printed[1]


def test_reasoning_tokens_are_billed_once_as_part_of_the_output(srv, tmp_path):
    srv.configure(reasoning_tokens=500)
    r = runner(tmp_path, "c.sqlite")
    [res] = r.run(calls(f"openai/o4-mini@{srv.openai_base}", ["think"]))
    u, t = res.response.usage, r.ledger.totals()
    assert u.reasoning_tokens == 500 and u.output_tokens >= 500  # the provider's output includes them
    assert t["reasoning_tokens"] == 500 and t["output_tokens"] == u.output_tokens
    assert res.cost_usd == pytest.approx((u.input_tokens * 1.10 + u.output_tokens * 4.40) / 1e6)


def test_anthropic_cache_writes_and_reads_are_billed_at_their_rates_not_also_at_the_input_rate(srv, tmp_path):
    system = "s" * 6000  # 1,500 fake tokens: over Opus 4's 1,024-token minimum
    reqs = [
        Call(
            model=model(srv, "anthropic"),
            stage="test",
            request=GenerateRequest(
                messages=[Message(role="system", content=system), Message(role="user", content=q)],
                max_tokens=20,
                cache_points=[(0, len(system))],
            ),
        )
        for q in ("first question", "second question")
    ]
    r = runner(tmp_path, "c.sqlite")
    first, second = (r.run([c])[0] for c in reqs)  # one after the other: the second reads what the first wrote
    for res, (read, written) in ((first, (0, 1500)), (second, (1500, 0))):
        u = res.response.usage
        assert (u.cached_input_tokens, u.cache_write_tokens) == (read, written)
        fresh = u.input_tokens - read - written
        assert res.cost_usd == pytest.approx((fresh * 15 + read * 1.50 + written * 18.75 + u.output_tokens * 75) / 1e6)
    assert r.ledger.totals()["cost_usd"] == pytest.approx(first.cost_usd + second.cost_usd)


def test_openai_cached_input_is_billed_at_the_cached_rate_only(srv, tmp_path):
    system = "s" * 6000
    reqs = [
        Call(
            model=model(srv, "openai"),
            stage="test",
            request=GenerateRequest(
                messages=[Message(role="system", content=system), Message(role="user", content=q)], max_tokens=20
            ),
        )
        for q in ("first question", "second question")
    ]
    r = runner(tmp_path, "c.sqlite")
    first, second = (r.run([c])[0] for c in reqs)
    assert first.response.usage.cached_input_tokens == 0 and second.response.usage.cached_input_tokens >= 1024
    for res in (first, second):
        u = res.response.usage
        fresh = u.input_tokens - u.cached_input_tokens
        assert res.cost_usd == pytest.approx((fresh * 2.0 + u.cached_input_tokens * 0.5 + u.output_tokens * 8.0) / 1e6)

"""A cost you can cap (#47 item 5), through ``cocoeval run`` against the loopback OpenAI-wire fake
server, which reports usage: ``llm.price`` prices a model the table does not name (an
openai-compatible server); without it the cost is unknown everywhere, never $0; ``--max-usd``
stops sending at the cap (the calls in flight finish and are kept), the manifest says why, and the
same command with a larger cap finishes the run without sending a completed call again."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from cocoeval import build
from cocoeval.cli import main
from cocoeval.llm.usage import journal_totals

from ..conftest import qmsum_meeting, write_json

N_INST, N_TURNS = 2, 30
TOTAL = N_INST * N_TURNS + N_INST * 2  # one call per simulated turn, then one judge call per target
CONCURRENCY = 2
PRICE = {"input": 100.0, "cached_input": 100.0, "output": 400.0}  # USD per 1M tokens: cents per call
ANSWERS = [
    {
        "match": "Continuation to evaluate",
        "text": json.dumps({"consistency": 7, "collaborativeness": 5, "rationale": "fine"}),
    },
    {"match": "", "text": "Marketing: one more point"},
]


@pytest.fixture
def bench(tmp_path):
    for i in range(4):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    return tmp_path


def params(tmp: object, srv, *, price: bool) -> str:
    model = f"openai-compatible/fake@{srv.openai_base}"
    llm: dict = {"cache": "cache.sqlite", "concurrency": CONCURRENCY, "progress": False}
    if price:
        llm["price"] = {"openai-compatible/fake": PRICE}
    path = tmp / "p.yaml"  # type: ignore[operator]
    path.write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "runs/p",
                "bench": "bench",
                "instances": {"per_dataset": N_INST},
                "setups": [{"name": "k1", "model": model, "turns_per_call": 1}],
                "judges": [{"name": "j", "model": model, "kind": ["overall"], "max_attempts": 1}],
                "llm": llm,
            }
        )
    )
    return str(path)


def test_max_usd_stops_at_the_cap_and_a_larger_cap_resumes_without_repeating_a_request(bench, srv, capsys):
    srv.configure(answers=ANSWERS)
    p = params(bench, srv, price=True)
    run = bench / "runs" / "p"
    cap = 0.5
    assert main(["run", p, "--no-progress", "--max-usd", str(cap)]) == 4
    out, err = capsys.readouterr()
    sent = srv.stats()["requests"]
    assert 0 < sent < TOTAL
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "stopped" and manifest["stopped_reason"].startswith("cost cap reached: $")
    assert manifest["stopped_reason"].endswith(f"of ${cap:.4f}") and manifest["cost_cap"]["not_sent"] > 0
    usage = json.loads((run / "usage.json").read_text())
    spent = usage["all_invocations"]["cost_usd"]
    assert usage["requests_sent"] == sent and usage["totals"]["cost_unknown_calls"] == 0
    # what each call paid, from the journal (a line per paid call): the cap is reached, and passed by
    # at most the calls in flight when it was (the concurrency), each finished and kept
    lines = [json.loads(x) for x in (run / "usage.journal.jsonl").read_text().splitlines()]
    per_call = [x["cost_usd"] for x in lines]
    assert len(per_call) == sent and sum(per_call) == pytest.approx(spent)
    assert spent >= cap and spent - cap < CONCURRENCY * max(per_call)
    assert "stopped: cost cap reached" in err and "exit status 4" in err and "larger --max-usd" in err
    assert "0.0000" not in out and "unknown" not in out

    # the same cap again: nothing is sent (the spend is the run directory's, across invocations)
    srv.reset()
    srv.configure(answers=ANSWERS)
    assert main(["run", p, "--no-progress", "--max-usd", str(cap)]) == 4
    assert srv.stats()["requests"] == 0
    capsys.readouterr()

    # a larger cap: the run completes, and no completed call is sent again
    assert main(["run", p, "--no-progress", "--max-usd", "1000"]) == 0
    assert srv.stats()["requests"] == TOTAL - sent
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["summary"]["judge"]["j"]["ok"] == 2 * N_INST
    every = json.loads((run / "usage.json").read_text())["all_invocations"]
    assert every["requests_sent"] == TOTAL
    assert sum(v["cost_usd"] for v in journal_totals(run / "usage.journal.jsonl").values()) == pytest.approx(
        every["cost_usd"]
    )


def test_a_cap_with_a_model_of_unknown_price_is_refused_before_anything_is_sent(bench, srv, capsys):
    srv.configure(answers=ANSWERS)
    p = params(bench, srv, price=False)
    assert main(["run", p, "--no-progress", "--max-usd", "1"]) == 2
    err = capsys.readouterr().err
    assert "openai-compatible/fake@" in err and "price of" in err and "unknown" in err
    assert "price: {MODEL_SPEC: {input:" in err and "docs/cost.md" in err
    assert srv.stats()["requests"] == 0 and not (bench / "runs" / "p" / "manifest.json").exists()
    # cocoeval check names it first: a problem under a cap, a note without one
    assert main(["check", p, "--set", "llm.max_usd=1"]) == 1
    assert "no price for openai-compatible/fake@" in capsys.readouterr().err
    assert main(["check", p]) == 0
    assert "note: no price for openai-compatible/fake@" in capsys.readouterr().out


def test_a_model_without_a_price_costs_unknown_in_the_summary_usage_json_and_estimate_never_zero(bench, srv, capsys):
    srv.configure(answers=ANSWERS)
    p = params(bench, srv, price=False)
    assert main(["run", p, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "paid by this run: unknown (" in out and "0.0000" not in out
    usage = json.loads((bench / "runs" / "p" / "usage.json").read_text())
    assert usage["totals"]["cost_usd"] is None and usage["totals"]["cost_unknown_calls"] == TOTAL
    assert usage["all_invocations"]["cost_usd"] is None
    assert all(r["cost_usd"] is None for r in usage["rows"])
    assert main(["estimate", p]) == 0
    est = capsys.readouterr().out
    assert "unknown" in est and "$0.00" not in est
    assert main(["estimate", p, "--set", "llm.max_usd=1"]) == 0
    assert "the price of some model is unknown, so cocoeval run refuses the cap" in capsys.readouterr().out
    # a run again sends nothing (it paid $0, truly); what its re-used answers cost when first paid is unknown
    assert main(["run", p, "--no-progress"]) == 0
    again = capsys.readouterr().out
    assert "paid by this run: $0.0000" in again and "0 sent live" in again
    assert f"unknown ({TOTAL} calls at unknown prices) when first paid" in again
    assert f"all 2 invocations of cocoeval run: paid unknown ({TOTAL} calls" in again


def test_a_price_given_in_llm_price_is_what_the_run_and_the_estimate_charge(bench, srv, capsys):
    srv.configure(answers=ANSWERS)
    p = params(bench, srv, price=True)
    assert main(["estimate", p]) == 0
    est = capsys.readouterr().out
    assert "unknown" not in est and "cost cap" not in est
    assert main(["estimate", p, "--set", "llm.max_usd=0.01"]) == 0
    assert re.search(
        r"cost cap \(llm.max_usd\) \$0\.01: below the planned \$[\d.]+; the run would stop", capsys.readouterr().out
    )
    assert main(["estimate", p, "--set", "llm.max_usd=100000"]) == 0
    assert "cost cap (llm.max_usd) $100,000.00: the planned $" in capsys.readouterr().out
    assert main(["run", p, "--no-progress"]) == 0
    usage = json.loads((bench / "runs" / "p" / "usage.json").read_text())
    t = usage["totals"]
    billed = (t["input_tokens"] * PRICE["input"] + t["output_tokens"] * PRICE["output"]) / 1e6
    assert t["cost_unknown_calls"] == 0 and t["cost_usd"] == pytest.approx(billed) and billed > 0


@pytest.mark.parametrize(
    "setting", ["llm.cache_policy='off'", "llm.cache_policy=read_only", "llm.cache_policy=refresh"]
)
def test_a_cap_without_a_read_write_call_cache_is_refused_before_anything_is_sent(bench, srv, capsys, setting):
    # going on after the cap takes every completed answer from the cache: without one it would pay them again
    srv.configure(answers=ANSWERS)
    p = params(bench, srv, price=True)
    assert main(["run", p, "--no-progress", "--max-usd", "0.5", "--set", setting]) == 2
    err = capsys.readouterr().err
    assert "max_usd" in err and setting.split("=")[1].strip("'") in err and "paid again" in err and "read_write" in err
    assert srv.stats()["requests"] == 0 and not (bench / "runs" / "p" / "manifest.json").exists()


def test_the_answers_of_the_round_that_reached_the_cap_are_cached_and_not_paid_again(bench, srv, capsys):
    from ..conftest import cached_keys

    srv.configure(answers=ANSWERS)
    p = params(bench, srv, price=True)
    assert main(["run", p, "--no-progress", "--max-usd", "0.5"]) == 4
    sent = srv.stats()["requests"]
    journal = (bench / "runs" / "p" / "usage.journal.jsonl").read_text().splitlines()
    assert len(cached_keys(bench / "cache.sqlite")) == sent == len(journal)  # every answer paid is cached
    srv.reset()
    srv.configure(answers=ANSWERS)
    assert main(["run", p, "--no-progress", "--max-usd", "1000"]) == 0
    assert srv.stats()["requests"] == TOTAL - sent
    capsys.readouterr()


def test_lost_attempts_at_an_unknown_price_cost_unknown_never_zero(bench, srv, capsys):
    # a judge answer whose body cannot be read: one attempt paid and lost, on a model with no price
    srv.configure(answers=ANSWERS, faults=[{"match": "Continuation to evaluate", "kind": "malformed", "times": 1}])
    p = params(bench, srv, price=False)
    assert main(["run", p, "--no-progress", "--allow-invalid"]) == 0
    out = capsys.readouterr().out
    assert "paid, answer lost or unreadable: 1 attempt(s)" in out
    assert "0.0000" not in out and re.search(
        r"input tokens, unknown \(\d+ calls at unknown prices\) \(in the cost\)", out
    )
    usage = json.loads((bench / "runs" / "p" / "usage.json").read_text())
    assert usage["totals"]["lost_attempts"] == 1 and usage["totals"]["lost_cost_usd"] is None
    assert usage["totals"]["lost_cost_unknown_calls"] == 1 and usage["all_invocations"]["lost_cost_usd"] is None


def test_a_cap_on_a_run_directory_that_paid_calls_of_unknown_cost_is_refused(bench, srv, capsys):
    # an earlier invocation without a price paid an unknown amount: never counted as $0 against a cap
    srv.configure(answers=ANSWERS)
    assert main(["run", params(bench, srv, price=False), "--no-progress", "--stage", "simulate"]) == 0
    before = srv.stats()["requests"]
    capsys.readouterr()
    p = params(bench, srv, price=True)
    assert main(["run", p, "--no-progress", "--max-usd", "1000"]) == 2
    err = capsys.readouterr().err
    assert (
        "usage journal" in err
        and f"made {N_INST * N_TURNS} call(s) of unknown cost" in err
        and "price: {MODEL_SPEC" in err
    )
    assert srv.stats()["requests"] == before
    assert json.loads((bench / "runs" / "p" / "manifest.json").read_text())["status"] == "complete"
    # the runner refuses it too (cocoeval probe and library use go through it)
    from cocoeval.core.errors import ConfigError
    from cocoeval.llm import Runner
    from cocoeval.llm._config import LLMConfig

    r = Runner(
        LLMConfig(max_usd=1000, cache=str(bench / "c2.sqlite"), progress=False),
        journal=bench / "runs" / "p" / "usage.journal.jsonl",
    )
    with pytest.raises(ConfigError, match="of unknown cost"):
        r.run([])
    r.close()


def test_probe_stopped_by_the_cap_exits_4_naming_the_flag_it_has(srv, tmp_path, capsys, monkeypatch):
    from ..run.test_probes import FINE_MARK, _params, fine

    srv.configure(answers=[{"match": FINE_MARK, "text": fine()}])
    p = _params(tmp_path, srv.openai_base, {"kinds": ["names", "stability"], "targets": 3})
    data = yaml.safe_load(p.read_text())
    data["llm"]["price"] = {"openai-compatible/fake": PRICE}
    data["llm"]["concurrency"] = 1
    p.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(p), "--stage", "judge", "--no-progress"]) == 0
    spent = json.loads((tmp_path / "runs" / "exp" / "usage.json").read_text())["all_invocations"]["cost_usd"]
    capsys.readouterr()
    before = srv.stats()["requests"]
    assert main(["probe", str(p), "--no-progress", "--set", f"llm.max_usd={spent * 1.0001}"]) == 4
    err = capsys.readouterr().err
    assert "stopped: cost cap reached" in err and "--set llm.max_usd=USD" in err and "exit status 4" in err
    assert "--max-usd" not in err
    assert 0 < srv.stats()["requests"] - before < 6  # the probe calls: 3 names + 3 stability


def test_invocations_counted_only_in_usage_json_count_against_the_cap(srv, tmp_path, capsys, monkeypatch):
    # a run directory from before the usage journal was kept: what usage.json says it paid counts,
    # as in all_invocations (cocoeval probe here; cocoeval run builds its Runner in run/stages.py)
    from cocoeval.run.rundir import spent_outside_journal

    from ..run.test_probes import FINE_MARK, _params, fine

    srv.configure(answers=[{"match": FINE_MARK, "text": fine()}])
    p = _params(tmp_path, srv.openai_base, {"kinds": ["names", "stability"], "targets": 3})
    data = yaml.safe_load(p.read_text())
    data["llm"]["price"] = {"openai-compatible/fake": PRICE}
    p.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(p), "--stage", "judge", "--no-progress"]) == 0
    run = tmp_path / "runs" / "exp"
    spent = json.loads((run / "usage.json").read_text())["all_invocations"]["cost_usd"]
    assert spent_outside_journal(run) == (0.0, 0)  # all of it is in the journal
    (run / "usage.journal.jsonl").unlink()
    assert spent_outside_journal(run) == (pytest.approx(spent), 0)
    capsys.readouterr()
    before = srv.stats()["requests"]
    assert main(["probe", str(p), "--no-progress", "--set", f"llm.max_usd={spent / 2}"]) == 4
    assert srv.stats()["requests"] == before
    assert "stopped: cost cap reached" in capsys.readouterr().err
    # and cocoeval run: with the call cache gone, its first request is refused by what usage.json says was paid
    cache = Path(data["llm"]["cache"])
    (cache if cache.is_absolute() else p.parent / cache).unlink()
    before = srv.stats()["requests"]
    code = main(["run", str(p), "--no-progress", "--set", f"llm.max_usd={spent / 2}"])
    out = capsys.readouterr()
    assert code == 4, out
    assert srv.stats()["requests"] == before
    assert "cost cap reached" in out.out + out.err

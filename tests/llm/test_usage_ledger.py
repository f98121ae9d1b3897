"""What a run reports of its usage when a provider's report is wrong (issue #24): usage that is
missing, negative or absurd is unknown, never a count or $0; the progress bar counts calls, not
attempts, of its own run; an unreadable usage.json from before is kept, never dropped."""

from __future__ import annotations

import json
import logging

import pytest

from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner


def calls(m: str, prompts: list[str]) -> list[Call]:
    return [
        Call(
            model=m,
            stage="test",
            tag=p,
            request=GenerateRequest(messages=[Message(role="user", content=p)], max_tokens=20),
        )
        for p in prompts
    ]


def model(srv, wire: str) -> str:
    return (
        f"openai/gpt-4.1@{srv.openai_base}"
        if wire == "openai"
        else f"anthropic/claude-opus-4-20250514@{srv.anthropic_base}"
    )


BAD = {  # prompt -> the usage the fake server reports instead of the real one (None: no usage at all)
    "openai": {
        "no usage": None,
        "no output count": {"completion_tokens": None},
        "negative": {"completion_tokens": -7},
        "absurd": {"prompt_tokens": 2 * 10**9},
        "negative cached": {"prompt_tokens_details": {"cached_tokens": -1}},
    },
    "anthropic": {
        "no usage": None,
        "no output count": {"output_tokens": None},
        "negative": {"output_tokens": -7},
        "absurd": {"input_tokens": 2 * 10**9},
        "negative cached": {"cache_read_input_tokens": -1},
    },
}


@pytest.mark.parametrize("mode", ["live", "batch"])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_missing_negative_or_absurd_usage_is_unknown_never_zero(srv, tmp_path, caplog, wire, mode):
    bad = BAD[wire]
    srv.configure(faults=[{"match": p, "kind": "usage", "usage": u, "times": -1} for p, u in bad.items()])
    kw = {"batch": True, "batch_poll_s": 0.01} if mode == "batch" else {}
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, **kw))
    good_prompt = "a valid answer " + "v" * 200
    with caplog.at_level(logging.WARNING):
        out = r.run(calls(model(srv, wire), [*(f"{p}!" for p in bad), good_prompt]))
    t = r.ledger.totals()
    *wrong, good = out
    assert all(x.status == "ok" and x.cost_usd is None for x in wrong)  # unknown, not $0
    assert all(x.response.usage.unknown and x.response.usage.input_tokens == 0 for x in wrong)
    assert [x.response.usage.unknown.split(" (")[0] for x in wrong][:4] == [
        "the provider reported no usage",
        f"the provider reported no {'completion' if wire == 'openai' else 'output'}_tokens",
        f"the provider reported a negative {'completion' if wire == 'openai' else 'output'}_tokens",
        f"the provider reported an absurd {'prompt' if wire == 'openai' else 'input'}_tokens",
    ]
    assert good.response.usage.unknown is None and good.cost_usd > 0
    assert t["usage_unknown_calls"] == len(bad) and t["cost_unknown_calls"] == len(bad)
    # the valid answer's counts and cost, and nothing of the others
    assert t["input_tokens"] == good.response.usage.input_tokens > 40
    assert t["output_tokens"] == good.response.usage.output_tokens
    assert t["cost_usd"] == pytest.approx(good.cost_usd)
    assert sum("its cost is unknown" in m for m in caplog.messages) == 1  # once per stage and model
    r.close()
    again = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    again.run(calls(model(srv, wire), [*(f"{p}!" for p in bad), good_prompt]))  # cached: re-used
    t = again.ledger.totals()
    assert t["reused_calls"] == len(bad) + 1 and t["reused_cost_unknown_calls"] == len(bad)
    again.close()


def test_the_progress_bar_counts_this_runs_calls_and_failures_never_more_failures_than_calls(srv, tmp_path, capsys):
    srv.configure(
        faults=[
            {"match": "refuse", "kind": "content_filter", "times": -1},
            {"match": "flaky", "kind": "500", "times": 2},
        ]
    )  # retried by the SDK: one call
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=True))
    m = model(srv, "openai")
    r.run(calls(m, ["refuse one", "refuse two", "refuse three", "refuse three", "fine"]))
    assert r.progress == {"calls": 5, "hits": 1, "failed": 4}  # the duplicate: a hit of the same failure
    capsys.readouterr()
    out = r.run(calls(m, ["refuse four", "flaky"]))  # a second run (a judge's next round) of the same Runner
    err = capsys.readouterr().err
    assert [x.status for x in out] == ["failed", "ok"] and srv.stats()["requests"] >= 5
    assert r.progress == {"calls": 2, "hits": 0, "failed": 1}
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert "2/2" in last and "failed=1" in last and "hits=0" in last, last
    assert r.ledger.totals()["failed"] == 5  # the ledger still has every run's
    r.close()


def test_an_unreadable_usage_json_is_kept_aside_and_named(tmp_path, caplog):
    from cocoeval.run.rundir import write_usage

    for before in ("{not json", '["a list"]'):
        (tmp_path / "usage.json").write_text(before)
        r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            write_usage(tmp_path, r)
        r.close()
        usage = json.loads((tmp_path / "usage.json").read_text())
        kept = usage["unreadable_kept_as"]
        assert kept.startswith(str(tmp_path / "usage.json.unreadable-"))
        with open(kept) as f:
            assert f.read() == before  # the earlier totals are not lost
        assert any("could not be read" in m and kept in m for m in caplog.messages)
    assert len(list(tmp_path.glob("usage.json.unreadable-*"))) == 2
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    write_usage(tmp_path, r)  # a readable one is followed as before, nothing set aside
    r.close()
    usage = json.loads((tmp_path / "usage.json").read_text())
    assert "unreadable_kept_as" not in usage and usage["all_invocations"]["invocations"] == 2


KILLED = """
import os, signal, sys
from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner
r = Runner(LLMConfig(cache=sys.argv[2], progress=False), journal=sys.argv[3])
r.run([Call(model=sys.argv[1], stage="test", request=GenerateRequest(messages=[Message(role="user", content=f"q{i} " + "w" * 300)]))
       for i in range(5)])
print(r.ledger.totals()["cost_usd"], r.ledger.totals()["input_tokens"], flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # killed before anything writes usage.json
"""


def test_what_a_killed_invocation_paid_is_counted_by_the_next_from_the_usage_journal(srv, tmp_path):
    import subprocess
    import sys

    from cocoeval.run.rundir import USAGE_JOURNAL, write_usage

    cache, journal = tmp_path / "c.sqlite", tmp_path / USAGE_JOURNAL
    out = subprocess.run(
        [sys.executable, "-c", KILLED, model(srv, "openai"), str(cache), str(journal)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == -9, out.stderr
    paid, tokens = float(out.stdout.split()[0]), int(out.stdout.split()[1])
    assert paid > 0 and not (tmp_path / "usage.json").exists()
    with open(journal, "a") as f:
        f.write('{"invocation": "cut sh')  # a line the kill cut short is skipped
    for n in (1, 2):  # the next invocations count it, once
        r = Runner(LLMConfig(cache=str(cache), progress=False), journal=journal)
        [res] = r.run(calls(model(srv, "openai"), [f"another {n}"]))
        write_usage(tmp_path, r)
        r.close()
        usage = json.loads((tmp_path / "usage.json").read_text())
        every = usage["all_invocations"]
        assert every["invocations"] == n + 1
        assert every["cost_usd"] == pytest.approx(
            paid
            + sum(e["totals"]["cost_usd"] for e in usage["earlier_invocations"] if not e.get("not_in_usage_json"))
            + res.cost_usd
        )
        killed = [e for e in usage["earlier_invocations"] if e.get("not_in_usage_json")]
        assert len(killed) == 1 and killed[0]["totals"]["input_tokens"] == tokens
        assert killed[0]["totals"]["calls"] == 5 and killed[0]["requests_sent"] is None


# ------------------------------------------------------------------ the usage journal's unreadable lines
def _journal_line(inv: str, **counts) -> str:
    return json.dumps({"invocation": inv, "stage": "simulate", "model": "m/x", "at": 1.0, "calls": 1, **counts}) + "\n"


def test_only_a_torn_last_journal_line_is_skipped_silently(tmp_path, caplog):
    from cocoeval.llm.usage import journal_totals

    journal = tmp_path / "usage.journal.jsonl"
    journal.write_text(_journal_line("a", input_tokens=10) + '{"invocation": "a", "input_tok')  # a kill mid-write
    unreadable: list[int] = []
    with caplog.at_level(logging.WARNING):
        got = journal_totals(journal, unreadable)
    assert got == {"a": {"calls": 1, "input_tokens": 10}} and unreadable == [] and not caplog.records


@pytest.mark.parametrize(
    "bad",
    [
        "not json at all",
        '{"invocation": "b", "input_tok',
        "[1, 2]",
        '{"calls": 1}',
        '{"invocation": "b", "input_tokens": -5}',
        '{"invocation": "b", "calls": true}',
        '{"invocation": "b", "output_tokens": 1e20}',
        '{"invocation": "b", "calls": "1"}',
        "",
    ],
)
def test_an_unreadable_journal_line_elsewhere_is_reported_by_file_and_line_never_dropped_silently(
    tmp_path, caplog, bad
):
    from cocoeval.llm.usage import journal_totals

    journal = tmp_path / "usage.journal.jsonl"
    journal.write_text(_journal_line("a", input_tokens=10) + bad + "\n" + _journal_line("a", input_tokens=5))
    unreadable: list[int] = []
    with caplog.at_level(logging.WARNING):
        got = journal_totals(journal, unreadable)
    assert got == {"a": {"calls": 2, "input_tokens": 15}}  # the readable lines are counted
    assert unreadable == [2]
    [rec] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert str(journal) in rec.getMessage() and "line 2" in rec.getMessage() and "not counted" in rec.getMessage()


def test_a_ledger_appending_after_a_torn_line_marks_it_and_its_own_lines_count(tmp_path, caplog):
    from cocoeval.llm.base import Usage
    from cocoeval.llm.usage import Ledger, journal_totals

    journal = tmp_path / "usage.journal.jsonl"
    journal.write_text(_journal_line("a", input_tokens=10) + '{"invocation": "a", "inp')  # killed mid-write
    ledger = Ledger(journal=journal)
    for _ in range(2):
        ledger.add("simulate", "openai/gpt-4.1", Usage(input_tokens=7, output_tokens=3), cache_hit=False)
    lines = journal.read_text().splitlines()
    assert lines[1] == '{"invocation": "a", "inp' and json.loads(lines[2])["torn_line_above"] is True
    unreadable: list[int] = []
    with caplog.at_level(logging.WARNING):
        got = journal_totals(journal, unreadable)
    assert got[ledger.invocation]["input_tokens"] == 14 and got[ledger.invocation]["calls"] == 2
    assert got["a"]["input_tokens"] == 10 and unreadable == [] and not caplog.records


def test_write_usage_lists_the_unreadable_journal_lines(tmp_path, caplog):
    from cocoeval.run.rundir import USAGE_JOURNAL, write_usage

    (tmp_path / USAGE_JOURNAL).write_text(_journal_line("k", input_tokens=4) + "garbage\n" + _journal_line("k"))
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    with caplog.at_level(logging.WARNING):
        write_usage(tmp_path, r)
    r.close()
    usage = json.loads((tmp_path / "usage.json").read_text())
    assert usage["journal_unreadable_lines"] == {"file": USAGE_JOURNAL, "lines": [2]}
    [killed] = [e for e in usage["earlier_invocations"] if e.get("not_in_usage_json")]
    assert killed["totals"] == {"calls": 2, "input_tokens": 4}
    assert any("line 2" in r.getMessage() and USAGE_JOURNAL in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "totals",
    [
        {"calls": 3, "input_tokens": -1},
        {"calls": True},
        {"cost_usd": 1e300},
        {"output_tokens": "12"},
        {"calls": 1, "failed": float("inf")},
    ],
)
def test_an_earlier_usage_json_with_a_total_that_is_no_count_is_kept_aside_never_summed(tmp_path, caplog, totals):
    from cocoeval.run.rundir import write_usage

    (tmp_path / "usage.json").write_text(json.dumps({"totals": totals, "earlier_invocations": []}))
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    with caplog.at_level(logging.WARNING):
        write_usage(tmp_path, r)
    r.close()
    usage = json.loads((tmp_path / "usage.json").read_text())
    assert usage["all_invocations"]["invocations"] == 1  # the earlier totals are not summed in
    assert all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < 10**15
        for v in usage["all_invocations"].values()
    )
    [aside] = tmp_path.glob("usage.json.unreadable-*")
    assert usage["unreadable_kept_as"] == str(aside) and json.loads(aside.read_text())["totals"] == totals
    assert any("not a count" in m for m in caplog.messages)

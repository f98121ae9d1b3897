"""Processes sharing one call cache pay for each call once (claims), and attempts that timed out
client-side are counted as paid. All against the loopback fake server, with real OS processes."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time

from cocoeval.llm import CallCache, LLMConfig, Runner
from cocoeval.llm._claims import Claims
from cocoeval.llm.base import request_key
from cocoeval.llm.usage import request_tokens

from ..conftest import ROOT
from .test_llm_runner import calls, oa

SHARER = """
import json, os, sys, time
from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner
cache, base, go, n, processes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
r = Runner(LLMConfig(cache=cache, progress=False, concurrency=4, processes=processes))
cs = [Call(model=f"openai/gpt-4.1@{base}", stage="t", tag=str(i),
           request=GenerateRequest(messages=[Message(role="user", content=f"shared prompt {i}")]))
      for i in range(n)]
while not os.path.exists(go):  # start together
    time.sleep(0.005)
out = r.run(cs)
t = r.ledger.totals()
print(json.dumps({"ok": sum(x.status == "ok" for x in out), "sent": r.sent, "hits": t["cache_hits"],
                  "texts": [x.response.text for x in out]}))
r.close()
"""


def _sharers(srv, tmp_path, n: int, processes: tuple[int, ...]) -> list[dict]:
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SHARER, str(tmp_path / "shared.sqlite"), srv.openai_base, str(go), str(n), str(p)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for p in processes
    ]
    time.sleep(1.0)  # both imported and waiting
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def test_two_processes_on_one_cache_pay_for_each_call_once(srv, tmp_path):
    srv.configure(latency_s=0.05)
    n = 40
    a, b = _sharers(srv, tmp_path, n, (1, 1))
    prompts = srv.stats()["prompts"]
    assert sorted(prompts) == sorted(f"shared prompt {i}" for i in range(n))
    assert set(prompts.values()) == {1}  # the server received each call exactly once
    assert srv.stats()["requests"] == n == a["sent"] + b["sent"]
    assert a["ok"] == b["ok"] == n and a["texts"] == b["texts"]
    assert a["hits"] + b["hits"] == n  # what one sent, the other read from the cache
    assert sqlite3.connect(tmp_path / "shared.sqlite").execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


def test_a_process_with_workers_and_one_without_share_one_cache(srv, tmp_path):
    srv.configure(latency_s=0.05)
    n = 24
    a, b = _sharers(srv, tmp_path, n, (2, 1))
    assert set(srv.stats()["prompts"].values()) == {1} and len(srv.stats()["prompts"]) == n
    assert a["sent"] + b["sent"] == n and a["ok"] == b["ok"] == n


def _answer_later(cache_path, key: str, delay: float) -> threading.Thread:
    def put() -> None:
        time.sleep(delay)
        c = CallCache(cache_path)
        c.put(key, {"other": "process"}, {}, {"text": "answered by the other owner"})
        c.close()

    t = threading.Thread(target=put)
    t.start()
    return t


def test_a_call_held_by_a_live_owner_is_waited_for_not_sent(srv, tmp_path):
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    cs = calls(oa(srv), ["held elsewhere", "free one"])
    r.run(calls(oa(srv), ["probe"]))  # the cache and its tables exist
    prov_identity = {"provider": "openai", "model": "gpt-4.1", "base_url": srv.openai_base}
    key = request_key(prov_identity, cs[0].request)
    other = Claims(CallCache(tmp_path / "c.sqlite"))  # another owner (alive: this process)
    assert other.claim(key) == "mine"
    srv.reset()
    t = _answer_later(tmp_path / "c.sqlite", key, 1.0)
    held, free = r.run(cs)
    t.join()
    assert held.status == "ok" and held.cache_hit and held.response.text == "answered by the other owner"
    assert free.status == "ok" and not free.cache_hit
    assert srv.stats()["prompts"] == {"free one": 1}


def test_a_claim_whose_owner_is_gone_is_taken_over(srv, tmp_path):
    path = tmp_path / "c.sqlite"
    r = Runner(LLMConfig(cache=str(path), progress=False))
    r.run(calls(oa(srv), ["probe"]))
    cs = calls(oa(srv), ["dead owner", "stale other host", "fresh other host"])
    ident = {"provider": "openai", "model": "gpt-4.1", "base_url": srv.openai_base}
    keys = [request_key(ident, c.request) for c in cs]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid is not alive
    db = sqlite3.connect(path, isolation_level=None)
    now = time.time()
    db.executemany(
        "INSERT INTO owners VALUES (?,?,?,?)",
        [
            ("dead", socket.gethostname(), json.dumps([dead.pid]), now),
            ("stale", "elsewhere.example", "[1]", now - 3600),
            ("fresh", "elsewhere.example", "[1]", now),
        ],
    )
    db.executemany(
        "INSERT INTO claims VALUES (?,?,?)", [(keys[0], "dead", now), (keys[1], "stale", now), (keys[2], "fresh", now)]
    )
    srv.reset()
    out = r.run(cs[:2])
    assert [x.status for x in out] == ["ok", "ok"] and not any(x.cache_hit for x in out)
    assert srv.stats()["prompts"] == {"dead owner": 1, "stale other host": 1}
    assert r.claims().taken_over == 2
    assert r.claims().claim(keys[2]) == "held"  # another host's owner that beats recently: waited for
    left = {k for (k,) in db.execute("SELECT key FROM claims")}
    assert left == {keys[2]}  # answered calls' claims went with their answers


def test_a_failed_call_lets_its_claim_go(srv, tmp_path):
    srv.configure(faults=[{"match": "too long", "kind": "context_length"}])
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False))
    [res] = r.run(calls(oa(srv), ["too long"]))
    assert res.status == "failed" and res.reason == "context_length"
    assert r.cache.execute("SELECT COUNT(*) FROM claims")[0][0] == 0
    [res] = r.run(calls(oa(srv), ["too long"]))  # tried again, not waited for
    assert res.status == "ok" and srv.stats()["prompts"]["too long"] == 2


def test_an_attempt_that_timed_out_client_side_is_counted_as_paid(srv, tmp_path):
    srv.configure(faults=[{"match": "slow answer", "kind": "timeout", "delay_s": 3, "times": 1}])
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, timeout_s=1.0, max_retries=1))
    cs = calls(oa(srv), ["slow answer", "quick answer"])
    slow, quick = r.run(cs)
    assert slow.status == "ok" and quick.status == "ok"
    assert srv.stats()["prompts"]["slow answer"] == 2  # the server got (and would bill) both attempts
    rows = {row["stage"]: row for row in r.ledger.rows()}
    t = r.ledger.totals()
    assert t["lost_attempts"] == 1 and t["lost_input_tokens"] == request_tokens(cs[0].request)
    assert rows["test"]["lost_cost_usd"] > 0 and t["cost_usd"] > t["lost_cost_usd"]
    assert slow.cost_usd > quick.cost_usd  # the lost attempt is part of its call's cost


def test_a_call_that_timed_out_for_good_is_counted_as_paid_and_failed(srv, tmp_path):
    srv.configure(faults=[{"match": "never in time", "kind": "timeout", "delay_s": 3, "times": 2}])
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, timeout_s=1.0, max_retries=1))
    [res] = r.run(calls(oa(srv), ["never in time"]))
    assert res.status == "failed" and res.reason == "timeout"
    t = r.ledger.totals()
    assert t["failed"] == 1 and t["lost_attempts"] == 2 == srv.stats()["prompts"]["never in time"]
    assert t["cost_usd"] == t["lost_cost_usd"] > 0 and res.cost_usd == t["cost_usd"]


def test_connection_errors_are_not_counted_as_paid(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, max_retries=1))
    [res] = r.run(calls(f"openai/gpt-4.1@http://127.0.0.1:{port}/v1", ["nobody home"]))
    assert res.status == "failed"  # (the SDK reports a refused connection as a connect timeout)
    assert r.ledger.totals()["lost_attempts"] == 0


def test_worker_processes_count_timed_out_attempts_as_paid_too(srv, tmp_path):
    srv.configure(faults=[{"match": "slow in a worker", "kind": "timeout", "delay_s": 3, "times": 1}])
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, timeout_s=1.0, max_retries=1, processes=2))
    try:
        cs = calls(oa(srv), ["slow in a worker"])
        [res] = r.run(cs)
        assert res.status == "ok" and r.workers().pids()  # sent by a worker
        t = r.ledger.totals()
        assert t["lost_attempts"] == 1 == srv.stats()["prompts"]["slow in a worker"] - 1
        assert t["lost_input_tokens"] == request_tokens(cs[0].request)
    finally:
        r.close()

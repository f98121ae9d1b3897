"""The runner and providers through the real SDKs against the fake provider server."""

from __future__ import annotations

import json
import logging

import pytest

from cocoeval.core.errors import FatalLLMError
from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner

from ..conftest import TEST_KEY as KEY


def calls(model: str, prompts: list[str], **kw) -> list[Call]:
    return [
        Call(
            model=model,
            stage="test",
            tag=p,
            request=GenerateRequest(
                messages=[Message(role="system", content="Be brief."), Message(role="user", content=p)], **kw
            ),
        )
        for p in prompts
    ]


def runner(tmp_path, **kw) -> Runner:
    return Runner(LLMConfig(cache=str(tmp_path / "cache.sqlite"), progress=False, **kw))


def oa(srv, model="gpt-4.1") -> str:
    return f"openai/{model}@{srv.openai_base}"


def an(srv, model="claude-opus-4-20250514") -> str:
    return f"anthropic/{model}@{srv.anthropic_base}"


def test_both_wire_formats_and_normalised_responses(srv, tmp_path):
    srv.configure(answers=[{"match": "json please", "text": '{"a": 1}'}])
    r = runner(tmp_path)
    out = r.run(
        calls(oa(srv), ["hello there"])
        + calls(an(srv), ["hello anthropic"])
        + calls(an(srv), ["json please"], json_schema={"type": "object"})
    )
    assert [x.status for x in out] == ["ok", "ok", "ok"]
    o, a, j = (x.response for x in out)
    assert o.text == "echo: hello there" and o.finish_reason == "stop"
    assert o.usage.input_tokens > 0 and o.usage.output_tokens > 0 and o.request_id
    assert a.text == "echo: hello anthropic" and a.finish_reason == "end_turn"
    assert json.loads(j.text) == {"a": 1} and j.finish_reason == "tool_use"
    assert srv.stats()["requests"] == 3


def test_dropped_parameters_are_recorded_and_not_sent(srv, tmp_path):
    r = runner(tmp_path)
    [res] = r.run(calls(oa(srv, "o4-mini"), ["reason"], temperature=0.3, presence_penalty=2.0))
    assert res.response.dropped_params == ["temperature", "presence_penalty"]
    body = srv.stats()["bodies_last"]
    assert "temperature" not in body and "presence_penalty" not in body and body["max_completion_tokens"] == 1024
    [res] = r.run(calls(oa(srv, "gpt-4.1"), ["penalised"], presence_penalty=2.0))
    assert res.response.dropped_params == [] and srv.stats()["bodies_last"]["presence_penalty"] == 2.0
    [res] = r.run(calls(an(srv), ["anthropic penalised"], presence_penalty=2.0))
    assert res.response.dropped_params == ["presence_penalty"]
    assert "presence_penalty" not in srv.stats()["bodies_last"]


@pytest.mark.parametrize(
    "kind,extra",
    [("429", {"retry_after": 0.05, "times": 2}), ("500", {}), ("529", {}), ("drop", {}), ("slow", {"delay_s": 0.3})],
)
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_transient_faults_are_recovered_by_the_sdk_retries(srv, tmp_path, kind, extra, wire):
    srv.configure(faults=[{"match": "flaky", "kind": kind, **extra}])
    model = oa(srv) if wire == "openai" else an(srv)
    r = runner(tmp_path, max_retries=3)
    out = r.run(calls(model, ["flaky one", "steady two"]))
    assert [x.status for x in out] == ["ok", "ok"], [x.detail for x in out]
    expected = 2 + (0 if kind == "slow" else extra.get("times", 1))
    assert srv.stats()["prompts"]["flaky one"] == expected - 1
    assert srv.stats()["requests"] == expected


@pytest.mark.parametrize(
    "kind,needle", [("401", "API key"), ("403", "access"), ("404", "does not exist"), ("quota", "quota")]
)
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_fatal_errors_stop_the_run_with_a_fix(srv, tmp_path, kind, needle, wire):
    srv.configure(faults=[{"match": "", "kind": kind, "times": -1}])
    model = oa(srv) if wire == "openai" else an(srv)
    r = runner(tmp_path, concurrency=2)
    with pytest.raises(FatalLLMError) as e:
        r.run(calls(model, [f"p{i}" for i in range(40)]))
    assert needle in str(e.value) and "how to fix" in str(e.value)
    assert srv.stats()["requests"] < 40  # stopped, not ploughed through
    assert len(r.cache) == 0


@pytest.mark.parametrize(
    "kind,reason",
    [("context_length", "context_length"), ("content_filter", "content_filter"), ("malformed", "malformed_response")],
)
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_per_call_failures_are_recorded_not_retried_not_cached(srv, tmp_path, kind, reason, wire):
    srv.configure(faults=[{"match": "bad", "kind": kind, "times": -1}])
    model = oa(srv) if wire == "openai" else an(srv)
    r = runner(tmp_path, max_retries=3)
    out = r.run(calls(model, ["bad one", "good one"]))
    assert out[0].status == "failed" and out[0].reason == reason and out[0].response is None
    assert out[1].status == "ok"
    assert srv.stats()["prompts"]["bad one"] == 1  # not retried
    assert len(r.cache) == 1  # only the good call
    out = r.run(calls(model, ["bad one", "good one"]))
    assert out[0].status == "failed" and out[1].cache_hit
    assert srv.stats()["prompts"]["bad one"] == 2  # a re-run tries the failed call again


def test_timeouts_and_exhausted_retries_are_failed_calls(srv, tmp_path):
    srv.configure(
        faults=[
            {"match": "stuck", "kind": "timeout", "delay_s": 3, "times": -1},
            {"match": "limited", "kind": "429", "retry_after": 0.01, "times": -1},
        ]
    )
    r = runner(tmp_path, max_retries=1, timeout_s=0.5)
    out = r.run(calls(oa(srv), ["stuck", "limited", "fine"]))
    assert [(x.status, x.reason) for x in out] == [("failed", "timeout"), ("failed", "rate_limited"), ("ok", None)]
    assert srv.stats()["prompts"]["limited"] == 2  # one try + max_retries=1


def test_rerun_is_all_cache_hits_and_sends_nothing(srv, tmp_path):
    prompts = [f"q{i}" for i in range(30)]
    r = runner(tmp_path)
    first = r.run(calls(oa(srv), prompts))
    srv.reset()
    r2 = runner(tmp_path)
    second = r2.run(calls(oa(srv), prompts))
    assert srv.stats()["requests"] == 0
    assert all(x.cache_hit for x in second)
    assert [x.response.text for x in first] == [x.response.text for x in second]
    assert r2.ledger.totals()["cache_hits"] == 30 and r2.ledger.totals()["input_tokens"] == 0


def test_samples_are_not_collapsed_and_duplicates_are_sent_once(srv, tmp_path):
    r = runner(tmp_path)
    cs = calls(oa(srv), ["same"]) * 3 + [
        Call(
            model=oa(srv),
            request=GenerateRequest(
                messages=[Message(role="system", content="Be brief."), Message(role="user", content="same")], sample=1
            ),
        )
    ]
    out = r.run(cs)
    assert all(x.status == "ok" for x in out)
    assert srv.stats()["prompts"]["same"] == 2


def test_cache_off_and_read_only(srv, tmp_path):
    r = runner(tmp_path, cache_policy="off")
    r.run(calls(oa(srv), ["a"]))
    r.run(calls(oa(srv), ["a"]))
    assert srv.stats()["prompts"]["a"] == 2


def test_concurrency_limit(srv, tmp_path):
    srv.configure(latency_s=0.2)
    r = runner(tmp_path, concurrency=4)
    r.run(calls(oa(srv), [f"c{i}" for i in range(16)]))
    assert srv.stats()["max_in_flight"] == 4


def test_requests_per_minute_limit(srv, tmp_path):
    # rpm=60: the bucket holds 60 and refills one per second, so of 63 requests the last three wait
    # about 1, 2 and 3 s. Without the limit all 63 arrive within a fraction of a second. The margin
    # (>= 2 s of a ~3 s delay) absorbs the time the first connections take to open on a slow
    # machine, which delays the first arrival but not the limiter's clock (CI saw 0.6 s of it).
    r = runner(tmp_path, rpm=60, concurrency=64)
    r.run(calls(oa(srv), [f"r{i}" for i in range(63)]))
    times = sorted(srv.stats()["times"])
    assert len(times) == 63
    assert times[-1] - times[0] >= 2.0
    assert sum(1 for t in times if t - times[0] > 1.0) >= 2


def test_tokens_per_minute_limit(srv, tmp_path):
    # each call needs ~ (estimated input + max_tokens 100) tokens; 6000 TPM lets ~50 through at once
    r = runner(tmp_path, tpm=6000, concurrency=64)
    r.run(calls(oa(srv), [f"t{i}" for i in range(60)], max_tokens=100))
    times = sorted(srv.stats()["times"])
    assert times[-1] - times[0] >= 0.5


@pytest.mark.parametrize("processes", [1, 2])
def test_keys_never_reach_cache_logs_or_outputs(srv, tmp_path, processes, capfd):
    log = tmp_path / "run.log"
    handler = logging.FileHandler(log)
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        r = runner(tmp_path, processes=processes)  # 2: worker processes write the cache
        out = r.run(calls(oa(srv), ["secret test"]) + calls(an(srv), ["secret test 2"]))
        logging.getLogger("cocoeval").warning("using key %s", KEY)
        r.close()
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
        handler.close()
    assert out[0].status == "ok"
    assert "secret test" in log.read_text() or log.stat().st_size > 0
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in json.dumps([x.model_dump(mode="json") for x in out])
    printed = capfd.readouterr()  # this process's and its worker processes' output
    assert KEY not in printed.out + printed.err


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_retry_after_is_honoured(srv, tmp_path, wire):
    srv.configure(faults=[{"match": "wait", "kind": "429", "retry_after": 1.0}])
    model = oa(srv) if wire == "openai" else an(srv)
    [res] = runner(tmp_path, max_retries=2).run(calls(model, ["wait for me"]))
    assert res.status == "ok"
    t = srv.stats()["times"]
    assert len(t) == 2 and t[1] - t[0] >= 0.95


def test_azure_provider(srv, tmp_path, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", srv.url)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    [res] = runner(tmp_path).run(calls("azure/my-gpt41-deployment", ["hello azure"]))
    assert res.status == "ok" and res.response.text == "echo: hello azure"
    assert srv.stats()["bodies_last"]["model"] == "my-gpt41-deployment"
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT")
    from cocoeval import ConfigError

    with pytest.raises(ConfigError, match="AZURE_OPENAI_ENDPOINT"):
        runner(tmp_path / "b").run(calls("azure/x", ["no endpoint"]))

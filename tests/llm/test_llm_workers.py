"""Worker processes (``LLMConfig.processes`` > 1): the real SDKs in child processes, the fake
server counting what arrives, the parent keeping limits, cache lookups and accounting."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from cocoeval.core.errors import ConfigError, FatalLLMError
from cocoeval.llm import (
    Call,
    CallCache,
    GenerateRequest,
    GenerateResponse,
    LLMConfig,
    Message,
    Provider,
    Runner,
    Usage,
    get_provider,
    provider,
)
from cocoeval.llm.workers import WorkerError, worker_module

from .test_llm_runner import an, calls, oa


def runner(tmp_path, name="cache.sqlite", **kw) -> Runner:
    return Runner(LLMConfig(cache=str(tmp_path / name), progress=False, processes=2, **kw))


@provider("pid-test")
class PidProvider(Provider):
    """Answers with the id of the process that ran the call."""

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        return GenerateResponse(
            text=f"{os.getpid()}:{request.messages[-1].content}",
            finish_reason="stop",
            usage=Usage(input_tokens=1, output_tokens=1),
        )


@provider("start-fails-test")
class StartFails(PidProvider):
    async def start(self) -> None:
        raise ConfigError("this provider cannot start here", hint="set FAKE_SETTING")


@provider("crash-test")
class Crash(PidProvider):
    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        raise RuntimeError("boom")


def one_call(model: str, text: str = "a") -> Call:
    return Call(model=model, request=GenerateRequest(messages=[Message(role="user", content=text)]))


def test_a_workers_configuration_error_or_crash_stops_the_run_with_its_message(tmp_path):
    r = runner(tmp_path)
    try:
        with pytest.raises(ConfigError) as err:
            r.run([one_call("start-fails-test/x")])
        assert "cannot start here" in str(err.value) and err.value.hint == "set FAKE_SETTING"
        with pytest.raises(WorkerError) as crash:
            r.run([one_call("crash-test/x", "c")])
        assert "RuntimeError: boom" in str(crash.value) and "crash-test/x" in str(crash.value)
        assert r.run([one_call("pid-test/x")])[0].status == "ok"  # the workers are still fine
    finally:
        r.close()


def test_calls_run_in_the_workers_and_their_answers_are_cached(tmp_path):
    r = runner(tmp_path, concurrency=8)
    try:
        out = r.run(
            [
                Call(model="pid-test/x", request=GenerateRequest(messages=[Message(role="user", content=f"q{i}")]))
                for i in range(40)
            ]
        )
        pids = {int(x.response.text.split(":")[0]) for x in out}
        assert [x.response.text.split(":")[1] for x in out] == [f"q{i}" for i in range(40)]
        assert os.getpid() not in pids
        assert pids == {w.proc.pid for w in r.workers().workers}  # both workers took calls
        assert all(w.sent > 0 for w in r.workers().workers)
        assert len(CallCache(tmp_path / "cache.sqlite")) == 40 and r.cache.writes == 40
        again = r.run(
            [Call(model="pid-test/x", request=GenerateRequest(messages=[Message(role="user", content="q3")]))]
        )
        assert again[0].cache_hit and again[0].response.text == out[3].response.text
    finally:
        r.close()


def test_same_results_as_one_process_on_both_wire_formats(srv, tmp_path):
    srv.configure(answers=[{"match": "json please", "text": '{"a": 1}', "times": -1}])
    batch = (
        calls(oa(srv), [f"hello {i}" for i in range(30)])
        + calls(an(srv), [f"hi {i}" for i in range(30)])
        + calls(an(srv), ["json please"], json_schema={"type": "object"})
        + calls(oa(srv, "o4-mini"), ["reason"], temperature=0.3)
        + calls(oa(srv), ["hello 1"])
    )
    solo = Runner(LLMConfig(cache=str(tmp_path / "one.sqlite"), progress=False, concurrency=16))
    one = solo.run(batch)
    srv.reset()
    srv.configure(answers=[{"match": "json please", "text": '{"a": 1}', "times": -1}])
    r = runner(tmp_path, concurrency=16)
    try:
        two = r.run(batch)
        assert srv.stats()["requests"] == len(batch) - 1  # the duplicate is sent once
        assert [x.model_dump(exclude={"response"}) for x in two] == [x.model_dump(exclude={"response"}) for x in one]
        for a, b in zip(one, two, strict=True):
            assert (a.response.text, a.response.finish_reason, a.response.usage, a.response.dropped_params) == (
                b.response.text,
                b.response.finish_reason,
                b.response.usage,
                b.response.dropped_params,
            )
        assert two[-2].response.dropped_params == ["temperature"]
        totals, solo_totals = r.ledger.totals(), solo.ledger.totals()
        assert totals.pop("cost_usd") == pytest.approx(solo_totals.pop("cost_usd"))  # summed in another order
        assert totals == solo_totals
        srv.reset()
        assert all(x.cache_hit for x in r.run(batch)) and srv.stats()["requests"] == 0
    finally:
        r.close()


def test_failed_and_fatal_answers_from_a_worker(srv, tmp_path):
    r = runner(tmp_path)
    try:
        srv.configure(faults=[{"match": "too long", "kind": "context_length", "times": -1}])
        out = r.run(calls(oa(srv), ["fine", "too long"]))
        assert [x.status for x in out] == ["ok", "failed"] and out[1].reason == "context_length"
        assert len(r.cache) == 1  # failed calls are not cached: a re-run tries them again
        srv.configure(faults=[{"match": "refused", "kind": "401"}])
        with pytest.raises(FatalLLMError) as err:
            r.run(calls(oa(srv), ["refused"] + [f"other {i}" for i in range(10)]))
        assert "HTTP 401" in str(err.value) and "OPENAI_API_KEY" in (err.value.hint or "")
        # the same runner goes on (the workers' late answers of the stopped run are ignored)
        out = r.run(calls(oa(srv), ["refused", "after"]))
        assert [x.status for x in out] == ["ok", "ok"]
    finally:
        r.close()


def test_a_worker_killed_midway_stops_the_run_and_is_replaced(srv, tmp_path):
    srv.configure(latency_s=0.3)
    r = runner(tmp_path, concurrency=8)
    batch = calls(oa(srv), [f"k{i}" for i in range(40)])
    try:
        r.run(batch[:2])  # starts the workers
        victim = r.workers().workers[0].proc
        threading.Timer(0.5, os.kill, (victim.pid, signal.SIGKILL)).start()
        with pytest.raises(WorkerError) as err:
            r.run(batch)
        assert f"worker process {victim.pid} exited with code -9" in str(err.value)
        assert "re-run" in err.value.hint
        # the same runner goes on: the dead worker is replaced, the other one's calls are waited for
        assert all(x.status == "ok" for x in r.run(calls(oa(srv), ["after 1", "after 2"])))
        pids = {w.proc.pid for w in r.workers().workers}
        assert victim.pid not in pids and len(pids) == 2
    finally:
        r.close()  # waits for the workers to finish what they have: all of it is cached
    srv.reset()
    done = len(CallCache(tmp_path / "cache.sqlite")) - 2  # the batch's calls cached ("after" aside)
    fresh = runner(tmp_path, concurrency=8)
    try:
        assert all(x.status == "ok" for x in fresh.run(batch))
        assert srv.stats()["requests"] == len(batch) - done
    finally:
        fresh.close()


@pytest.mark.parametrize("processes", [1, 2])
def test_concurrency_limit_holds_across_workers(srv, tmp_path, processes):
    srv.configure(latency_s=0.2)
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, processes=processes, concurrency=5))
    try:
        r.run(calls(oa(srv), [f"c{i}" for i in range(20)]))
    finally:
        r.close()
    assert srv.stats()["max_in_flight"] == 5


def test_rate_limit_holds_across_workers(srv, tmp_path):
    r = runner(tmp_path, rpm=600, concurrency=64)
    try:
        r.run(calls(oa(srv), [f"r{i}" for i in range(620)]))
    finally:
        r.close()
    times = sorted(srv.stats()["times"])
    assert len(times) == 620
    assert times[-1] - times[0] >= 1.5  # see test_requests_per_minute_limit: one bucket, here
    assert sum(1 for t in times if t - times[0] > 1.0) >= 5


def test_which_providers_may_run_in_workers(tmp_path):
    assert worker_module(get_provider("openai/gpt-4.1")) == "cocoeval.llm.providers.openai"
    assert worker_module(get_provider("pid-test/x")) == __name__
    assert worker_module(get_provider("local/smollm2")) is None  # the model is loaded once, here

    class Main(PidProvider):
        pass

    Main.__module__ = "__main__"  # a provider defined in a script or notebook cannot be imported
    assert worker_module(Main(get_provider("pid-test/x").spec)) is None


def test_workers_exit_when_the_runner_closes(tmp_path):
    r = runner(tmp_path)
    r.run([Call(model="pid-test/x", request=GenerateRequest(messages=[Message(role="user", content="a")]))] * 2)
    procs = [w.proc for w in r.workers().workers]
    r.close()
    assert [p.returncode for p in procs] == [0, 0]  # end of input: they finished and exited


def test_workers_inside_a_running_event_loop_as_in_jupyter(tmp_path):
    r = runner(tmp_path)

    async def notebook_cell(text: str):
        return r.run([one_call("pid-test/x", f"{text} {i}") for i in range(6)])  # a thread of its own

    try:
        first = asyncio.run(notebook_cell("one"))
        second = asyncio.run(notebook_cell("two"))  # another loop: the same workers, re-attached
        pids = {int(x.response.text.split(":")[0]) for x in first + second}
        assert pids == {w.proc.pid for w in r.workers().workers}
        assert all(x.status == "ok" and not x.cache_hit for x in first + second)
    finally:
        r.close()


def stop_with_calls_in_flight(srv, r: Runner, prompts: list[str], latency_s: float) -> None:
    """Run ``prompts`` behind one answered 401: the run stops while the others are in flight."""
    srv.configure(latency_s=latency_s, faults=[{"match": "refused", "kind": "401"}])
    with pytest.raises(FatalLLMError):
        r.run(calls(oa(srv), ["refused", *prompts]))


def test_a_stopped_run_with_big_requests_leaves_no_cut_line_and_its_calls_are_accounted(srv, tmp_path):
    # 100 KB prompts (over a pipe's 64 KB) and a fatal answer while 7 calls are in flight
    r = runner(tmp_path, concurrency=8)
    big = [p + " " + "x" * 100_000 for p in (f"big {i}" for i in range(16))]
    try:
        stop_with_calls_in_flight(srv, r, big, latency_s=0.5)
        # the next run first waits for the calls the stopped one left in the workers: the
        # concurrency limit holds across the two runs, and those calls are counted
        out = r.run(calls(oa(srv), big[:4] + [f"small {i}" for i in range(20)]))
        assert all(x.status == "ok" for x in out)
        stats = srv.stats()
        assert stats["max_in_flight"] <= 8
        totals = r.ledger.totals()
        assert totals["calls"] - totals["cache_hits"] - totals["failed"] == len(r.cache) == stats["requests"] - 1
    finally:
        r.close()


def test_close_waits_for_calls_in_flight_and_every_sent_call_is_cached(srv, tmp_path):
    r = runner(tmp_path, concurrency=8)
    try:
        stop_with_calls_in_flight(srv, r, [f"late {i}" for i in range(30)], latency_s=1.0)
    except BaseException:
        r.close()
        raise
    t0 = time.monotonic()
    r.close()
    assert time.monotonic() - t0 < 8  # the calls in flight end within their 1 s latency
    sent = set(srv.stats()["prompts"]) - {"refused"}
    assert sent and len(CallCache(tmp_path / "cache.sqlite")) == len(sent)


def test_a_relative_cache_path_is_the_runners_file_after_a_chdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = Runner(LLMConfig(cache="cache.sqlite", progress=False, processes=2))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    try:
        r.run([one_call("pid-test/x", "here")])
    finally:
        r.close()
    assert len(CallCache(tmp_path / "cache.sqlite")) == 1
    assert not (tmp_path / "elsewhere" / "cache.sqlite").exists()


def test_workers_restart_when_the_environment_changes(tmp_path, monkeypatch):
    r = runner(tmp_path)
    try:
        first = {int(x.response.text.split(":")[0]) for x in r.run([one_call("pid-test/x", "a")] * 1)}
        before = {w.proc.pid for w in r.workers().workers}
        r.run([one_call("pid-test/x", "b")])
        assert {w.proc.pid for w in r.workers().workers} == before  # the same workers serve every run
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # e.g. a notebook sets a variable
        out = r.run([one_call("pid-test/x", "c")])
        after = {w.proc.pid for w in r.workers().workers}
        assert not after & before and int(out[0].response.text.split(":")[0]) in after
        assert first <= before
    finally:
        r.close()


def test_runs_on_one_event_loop_share_the_workers(tmp_path):
    r = runner(tmp_path, concurrency=4)

    async def both():
        return await asyncio.gather(
            r.arun([one_call("pid-test/x", f"a{i}") for i in range(10)]),
            r.arun([one_call("pid-test/x", f"b{i}") for i in range(10)]),
        )

    try:
        a, b = asyncio.run(both())
        assert [x.response.text.split(":")[1] for x in a + b] == [f"a{i}" for i in range(10)] + [
            f"b{i}" for i in range(10)
        ]
    finally:
        r.close()


def test_a_run_cancelled_while_waiting_for_a_stopped_runs_calls_leaves_the_runner_usable(srv, tmp_path):
    r = runner(tmp_path, concurrency=6)
    try:
        stop_with_calls_in_flight(srv, r, [f"slow {i}" for i in range(5)], latency_s=1.5)  # 5 left behind

        async def impatient():
            return await asyncio.wait_for(r.arun(calls(oa(srv), ["next"])), 0.3)

        with pytest.raises(TimeoutError):
            asyncio.run(impatient())  # cancelled while it waits for those 5
        srv.configure(latency_s=0.0)
        out = r.run(calls(oa(srv), ["next", "slow 0"]))
        assert [x.status for x in out] == ["ok", "ok"] and out[1].cache_hit
        assert r.ledger.totals()["calls"] - r.ledger.totals()["cache_hits"] == 6  # 5 left behind + next
    finally:
        r.close()


def test_one_of_two_runs_on_a_loop_stops_and_the_other_finishes(srv, tmp_path):
    srv.configure(latency_s=0.2, faults=[{"match": "refused", "kind": "401"}])
    r = runner(tmp_path, concurrency=4)

    async def both():
        return await asyncio.gather(
            r.arun(calls(oa(srv), ["refused", "x1", "x2"])),
            r.arun(calls(oa(srv), [f"y{i}" for i in range(12)])),
            return_exceptions=True,
        )

    try:
        bad, good = asyncio.run(both())
        assert isinstance(bad, FatalLLMError)
        assert [x.status for x in good] == ["ok"] * 12
        assert r.run(calls(oa(srv), ["z"]))[0].status == "ok"
    finally:
        r.close()


def test_a_runner_nobody_holds_ends_its_workers(tmp_path):
    import gc

    def use_and_drop():
        r = runner(tmp_path)
        r.run([one_call("pid-test/x", "gc")] * 2)
        return [w.proc for w in r.workers().workers]

    procs = use_and_drop()
    gc.collect()
    assert [p.poll() for p in procs] == [0, 0]  # collected: its finalizer closed the workers


@pytest.mark.parametrize("processes", [1, 2])
def test_interrupting_a_run_in_a_notebook_stops_it(srv, tmp_path, processes):
    """In Jupyter the run goes on in a thread of its own; Ctrl-C (SIGINT) there stops it too."""
    srv.configure(latency_s=0.2)
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, processes=processes, concurrency=2))

    async def cell():
        return r.run(calls(oa(srv), [f"n{i}" for i in range(100)]))  # 10 s uninterrupted

    loop = asyncio.new_event_loop()  # like a kernel's: SIGINT raises KeyboardInterrupt where it lands
    # as in a kernel, whatever this process inherited (started in the background, SIGINT is ignored)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell())
        sent = srv.stats()["requests"]
        time.sleep(1.0)
        # stopped, not going on behind the user's back: at most the calls already handed to a worker
        # (concurrency 2) reach the server after the interrupt (their answers are kept), nothing new
        after = srv.stats()["requests"]
        assert after <= sent + 2 and after < 40
        time.sleep(0.5)
        assert srv.stats()["requests"] == after
        assert r.run(calls(oa(srv), ["after"]))[0].status == "ok"
    finally:
        signal.signal(signal.SIGINT, before)
        loop.close()
        r.close()


@pytest.mark.parametrize("processes", [1, 2])
def test_close_during_a_run_is_refused_and_every_answer_is_cached(srv, tmp_path, processes, caplog):
    srv.configure(latency_s=0.2)
    r = Runner(LLMConfig(cache=str(tmp_path / "c.sqlite"), progress=False, processes=processes, concurrency=2))

    async def close_meanwhile():
        task = asyncio.ensure_future(r.arun(calls(oa(srv), [f"d{i}" for i in range(10)])))
        await asyncio.sleep(0.5)
        r.close()  # e.g. from another cell or task: the run still needs its cache
        return await task

    try:
        out = asyncio.run(close_meanwhile())
        assert [x.status for x in out] == ["ok"] * 10
        assert "left open" in caplog.text
        assert len(CallCache(tmp_path / "c.sqlite")) == 10
    finally:
        r.close()

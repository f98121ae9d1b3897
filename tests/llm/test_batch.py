"""Batch mode through the real SDKs against the fake server's OpenAI Batch and Anthropic Message
Batches endpoints: answers land in the cache as if live, chunking, partial failures, expired and
failed batches, dependent calls, resume after a failed submission and after SIGKILL."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cocoeval.core.errors import ConfigError
from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner
from cocoeval.run import Run
from tests.fakes.server import FakeServer

from ..conftest import TEST_KEY, qmsum_meeting, write_json

SCRIPT = Path(__file__).parents[1] / "scripts" / "run_batch.py"
WIRES = ["openai", "anthropic"]


def model(srv, wire: str) -> str:
    return (
        f"openai/gpt-4.1@{srv.openai_base}"
        if wire == "openai"
        else f"anthropic/claude-opus-4-20250514@{srv.anthropic_base}"
    )


def calls(m: str, prompts: list[str], **kw) -> list[Call]:
    return [
        Call(
            model=m,
            stage="test",
            tag=p,
            request=GenerateRequest(
                messages=[Message(role="system", content="Be brief."), Message(role="user", content=p)], max_tokens=20
            ),
            **kw,
        )
        for p in prompts
    ]


def runner(tmp_path, name="cache.sqlite", **kw) -> Runner:
    kw = {"batch": True, "batch_poll_s": 0.01, **kw}
    return Runner(LLMConfig(cache=str(tmp_path / name), progress=False, **kw))


def batches(srv) -> dict:
    return srv.stats()["batches"]


@pytest.mark.parametrize("wire", WIRES)
def test_batch_answers_equal_live_ones_are_cached_and_priced_at_the_batch_rate(srv, tmp_path, wire):
    prompts = [f"question {i}" for i in range(7)]
    live = Runner(LLMConfig(cache=str(tmp_path / "live.sqlite"), progress=False)).run(calls(model(srv, wire), prompts))
    srv.reset()
    r = runner(tmp_path, batch_max_requests=3)
    out = r.run(calls(model(srv, wire), prompts))
    assert [x.status for x in out] == ["ok"] * 7
    assert [x.response.text for x in out] == [x.response.text for x in live] == [f"echo: {p}" for p in prompts]
    assert [x.response.usage for x in out] == [x.response.usage for x in live]
    ids = {x.response.batch_id for x in out}
    assert len(ids) == 3 and None not in ids  # 3 + 3 + 1
    b = batches(srv)
    assert sorted(v["requests"] for v in b.values()) == [1, 3, 3]
    assert r.sent == 0 and r.batched == 7
    # half the live price, from the price table's batch discount
    assert sum(x.cost_usd for x in out) == pytest.approx(0.5 * sum(x.cost_usd for x in live))
    # the pipeline reads them as if live: a re-run (batch or not) is all cache hits, nothing sent
    srv.reset()
    for again in (runner(tmp_path), runner(tmp_path, batch=False)):
        res = again.run(calls(model(srv, wire), prompts))
        assert all(x.cache_hit for x in res) and [x.response.text for x in res] == [x.response.text for x in out]
    assert batches(srv) == {} and srv.stats()["requests"] == 0


@pytest.mark.parametrize("wire", WIRES)
def test_per_request_failures_are_failed_calls_and_a_rerun_sends_just_them(srv, tmp_path, wire):
    srv.configure(faults=[{"match": "question 2", "kind": "context_length", "times": -1}])
    out = runner(tmp_path).run(calls(model(srv, wire), [f"question {i}" for i in range(4)]))
    assert [x.status for x in out] == ["ok", "ok", "failed", "ok"]
    assert out[2].reason == "context_length" and out[2].response is None
    srv.reset()
    again = runner(tmp_path).run(calls(model(srv, wire), [f"question {i}" for i in range(4)]))
    assert [x.cache_hit for x in again] == [True, True, False, True] and again[2].status == "ok"
    assert [v["requests"] for v in batches(srv).values()] == [1]
    assert srv.stats()["prompts"] == {"question 2": 1}


@pytest.mark.parametrize("wire", WIRES)
def test_an_expired_batch_keeps_what_it_finished_and_fails_the_rest(srv, tmp_path, wire):
    srv.configure(batch_faults=[{"kind": "expire", "completed": 2}])
    prompts = [f"question {i}" for i in range(5)]
    out = runner(tmp_path).run(calls(model(srv, wire), prompts))
    assert [x.status for x in out] == ["ok", "ok", "failed", "failed", "failed"]
    assert {x.reason for x in out[2:]} == {"batch_expired"}
    srv.reset()  # the re-run submits the three that expired, in one new batch
    again = runner(tmp_path).run(calls(model(srv, wire), prompts))
    assert all(x.status == "ok" for x in again) and [x.cache_hit for x in again] == [True] * 2 + [False] * 3
    assert [v["requests"] for v in batches(srv).values()] == [3]


def test_a_failed_openai_batch_fails_every_call_with_the_providers_reason(srv, tmp_path):
    srv.configure(batch_faults=[{"kind": "fail", "provider": "openai"}])
    out = runner(tmp_path).run(calls(model(srv, "openai"), ["a", "b"]))
    assert [x.status for x in out] == ["failed", "failed"]
    assert {x.reason for x in out} == {"batch_failed"} and "Enqueued token limit" in out[0].detail


def test_anthropic_create_errors_are_retried_by_the_sdk(srv, tmp_path):
    srv.configure(batch_faults=[{"kind": "fail", "provider": "anthropic"}])
    out = runner(tmp_path).run(calls(model(srv, "anthropic"), ["a", "b"]))
    assert [x.status for x in out] == ["ok", "ok"]


def test_dependent_calls_run_live_unless_rounds_and_local_providers_always_live(srv, tmp_path):
    m = model(srv, "openai")
    mixed = calls(m, ["independent"]) + calls(m, ["step"], dependent=True)
    mixed += calls(f"openai-compatible/fake@{srv.openai_base}", ["self-hosted"])
    out = runner(tmp_path).run(mixed)
    assert [x.status for x in out] == ["ok"] * 3
    assert [x.response.batch_id is not None for x in out] == [True, False, False]
    srv.reset()
    out = runner(tmp_path, "rounds.sqlite", batch_dependent="rounds").run(mixed)
    assert [x.response.batch_id is not None for x in out] == [True, True, False]
    assert [v["requests"] for v in batches(srv).values()] == [2]


def test_duplicate_requests_are_batched_once(srv, tmp_path):
    out = runner(tmp_path).run(calls(model(srv, "openai"), ["same", "same", "other"]))
    assert [x.status for x in out] == ["ok"] * 3 and [x.cache_hit for x in out] == [False, True, False]
    assert [v["requests"] for v in batches(srv).values()] == [2]


def test_batch_mode_needs_a_writable_cache(srv, tmp_path):
    r = Runner(LLMConfig(cache=None, batch=True, progress=False))
    with pytest.raises(ConfigError, match="cache"):
        r.run(calls(model(srv, "openai"), ["a"]))


def _store(cache: Path) -> list[tuple]:
    if not cache.exists():
        return []
    try:
        return sqlite3.connect(cache).execute("SELECT ref, state FROM batches ORDER BY created").fetchall()
    except sqlite3.OperationalError:
        return []


def test_a_batch_whose_creation_failed_after_the_upload_is_created_from_that_file(srv, tmp_path):
    srv.configure(faults=[{"match": "", "path": "/v1/batches", "kind": "500", "times": -1}])
    m = model(srv, "openai")
    out = runner(tmp_path, max_retries=0).run(calls(m, ["a", "b"]))
    assert {x.reason for x in out} == {"batch_server_error"}
    [(ref, state)] = _store(tmp_path / "cache.sqlite")
    assert ref.startswith("upload:file-") and state == "staged"

    def inputs() -> list[str]:
        return [f for f, v in srv.stats()["files"].items() if v["purpose"] == "batch"]

    uploaded = inputs()
    srv.configure(faults=[])
    again = runner(tmp_path).run(calls(m, ["a", "b"]))
    assert [x.status for x in again] == ["ok", "ok"]
    assert len(uploaded) == 1 and inputs() == uploaded  # the uploaded file was used, not uploaded again
    [(ref, state)] = _store(tmp_path / "cache.sqlite")
    assert ref in batches(srv) and state == "collected"


def _kill_while_polling(srv, cache: Path, wire: str, n: int = 5, steps: int = 50) -> tuple[list[str], str]:
    """Start a batch run of ``n`` requests (its batch ends at the ``steps``-th poll), SIGKILL it
    once its batch is recorded; returns (the command to run it again, polling fast; batch id)."""
    srv.configure(batch_steps=steps)
    cmd = [sys.executable, str(SCRIPT), str(cache), model(srv, wire), str(n)]
    p = subprocess.Popen([*cmd, "0.3"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not any(s == "submitted" for _, s in _store(cache)) and time.time() < deadline and p.poll() is None:
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL, p.stderr.read()
    [(batch_id, _)] = _store(cache)
    return [*cmd, "0.01"], batch_id


@pytest.mark.parametrize("wire", WIRES)
def test_kill_9_while_polling_then_rerun_resumes_the_batch_instead_of_resubmitting(srv, tmp_path, wire):
    cache = tmp_path / "cache.sqlite"
    cmd, batch_id = _kill_while_polling(srv, cache, wire, n=20, steps=6)
    assert list(batches(srv)) == [batch_id] and srv.stats()["requests"] == 0
    listed = subprocess.run(
        [sys.executable, "-m", "cocoeval", "batches", "--cache", str(cache)], capture_output=True, text=True, timeout=60
    )
    assert batch_id in listed.stdout and "submitted" in listed.stdout and "1 not yet collected" in listed.stdout
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["20", "ok", "0", "sent", "20", "batched"], out.stderr
    assert f"resuming batch {batch_id}" in out.stderr
    assert list(batches(srv)) == [batch_id]  # no second batch
    assert sorted(srv.stats()["prompts"]) == sorted(f"request {i}" for i in range(20))
    assert all(v == 1 for v in srv.stats()["prompts"].values())
    assert _store(cache) == [(batch_id, "collected")]
    assert TEST_KEY not in cache.read_bytes().decode("utf-8", "replace")


def test_cocoeval_run_batch_gives_the_same_run_as_live(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    for i in range(2):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    from cocoeval import build

    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    answer = "\n".join(
        f"{s}: point number {i}" for i, s in enumerate(["Project Manager", "Marketing", "User Interface"] * 10)
    )
    fine = json.dumps({"turns": [{"turn": i, "behaviours": []} for i in range(1, 31)]})
    runs = {}
    with FakeServer() as srv:
        answers = [
            {"match": "Continuation to annotate", "text": fine},
            {
                "match": "Continuation to evaluate",
                "text": '{"consistency": 8, "collaborativeness": 7, "rationale": "fine"}',
            },
            {"match": "next 5 turns", "text": "\n".join(answer.splitlines()[:5])},
            {"match": "", "text": answer},
        ]
        srv.configure(answers=answers)
        flags = {
            "live": [],
            "batch": ["--batch"],
            "rounds": ["--batch", "--dependent", "rounds"],
            "workers": ["--processes", "2"],
        }
        for mode in flags:
            p = tmp_path / f"{mode}.yaml"
            p.write_text(
                yaml.safe_dump(
                    {
                        "name": mode,
                        "out": f"runs/{mode}",
                        "bench": "bench",
                        "setups": [
                            {"name": "k30", "model": f"openai/gpt-4.1@{srv.openai_base}"},
                            {"name": "k5", "model": f"openai/gpt-4.1@{srv.openai_base}", "turns_per_call": 5},
                        ],
                        "judges": [{"name": "j", "model": f"openai/o4-mini@{srv.openai_base}"}],
                        "llm": {"cache": f"cache-{mode}.sqlite", "batch_poll_s": 0.01},
                    }
                )
            )
            cmd = [sys.executable, "-m", "cocoeval", "run", str(p), "--no-progress"]
            out = subprocess.run(cmd + flags[mode], capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr
            runs[mode] = (Run.open(tmp_path / "runs" / mode), out, srv.stats())
            srv.reset()
            srv.configure(answers=answers)
    (live, _, _), (batch, out, stats) = runs["live"], runs["batch"]
    n = len(live.instances)

    def strip(groups):
        return {k: [x.model_dump(exclude={"calls"}) for x in v] for k, v in groups.items()}

    assert strip(batch.continuations) == strip(live.continuations)
    assert strip(batch.all_judgments) == strip(live.all_judgments)
    assert all(j.status == "ok" for js in batch.all_judgments.values() for j in js)
    assert batch.manifest.llm_mode == {"batch": True, "batch_dependent": "live", "processes": 1}
    # whole continuations and judgments went through batches; the 5-turn steps ran live
    assert sorted(v["requests"] for v in stats["batches"].values()) == [n, n * 3 * 2]
    usage = json.loads((tmp_path / "runs" / "batch" / "usage.json").read_text())
    assert usage["requests_batched"] == n + n * 3 * 2
    assert usage["requests_sent"] == n * 6  # 30 turns in 5-turn steps
    assert "through batches" in out.stdout
    # --dependent rounds: the 5-turn steps too, one round of batches per step
    rounds, out, stats = runs["rounds"]
    assert strip(rounds.continuations) == strip(live.continuations)
    assert strip(rounds.all_judgments) == strip(live.all_judgments)
    assert sorted(v["requests"] for v in stats["batches"].values()) == sorted([2 * n] + [n] * 5 + [6 * n])
    usage = json.loads((tmp_path / "runs" / "rounds" / "usage.json").read_text())
    assert usage["requests_sent"] == 0 and usage["requests_batched"] == 2 * n + 5 * n + 6 * n
    # --processes 2: every round of the run sent by the same two worker processes, same run
    workers, out, stats = runs["workers"]
    assert strip(workers.continuations) == strip(live.continuations)
    assert strip(workers.all_judgments) == strip(live.all_judgments)
    assert workers.manifest.llm_mode["processes"] == 2
    usage = json.loads((tmp_path / "runs" / "workers" / "usage.json").read_text())
    live_usage = json.loads((tmp_path / "runs" / "live" / "usage.json").read_text())
    assert usage["requests_sent"] == live_usage["requests_sent"] == stats["requests"]
    assert usage["cache"]["writes"] == live_usage["cache"]["writes"] > 0


def test_chunks_respect_the_request_and_byte_limits(srv):
    from cocoeval.llm import get_provider
    from cocoeval.llm.batch import Pending, chunks

    prov = get_provider(model(srv, "openai"))
    assert prov.batch_limits == (50_000, 200 * 1024 * 1024)
    assert get_provider(model(srv, "anthropic")).batch_limits == (100_000, 256 * 1024 * 1024)
    assert get_provider(f"openai-compatible/x@{srv.openai_base}").batch_limits is None

    def pend(i: int, size: int = 10) -> Pending:
        req = GenerateRequest(messages=[Message(role="user", content=f"{i:06d}" + "x" * size)])
        return Pending(str(i), prov, req, [], {})

    small = [pend(i) for i in range(120_001)]
    assert [len(c) for c in chunks(small, 50_000, 200 * 1024 * 1024)] == [50_000, 50_000, 20_001]
    big = [pend(i, 100_000) for i in range(10)]  # ~100 kB each: at most 4 in 500 kB (90% room)
    cut = chunks(big, 50_000, 500_000)
    assert [len(c) for c in cut] == [4, 4, 2] and [p.key for c in cut for p in c] == [str(i) for i in range(10)]


@pytest.mark.parametrize("wire", WIRES)
def test_cancelled_batches_fail_their_calls_and_the_next_run_sends_them_again(srv, tmp_path, wire):
    cache = tmp_path / "cache.sqlite"
    cmd, batch_id = _kill_while_polling(srv, cache, wire)
    out = subprocess.run(
        [sys.executable, "-m", "cocoeval", "batches", "--cache", str(cache), "--cancel", "open"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and f"cancel {batch_id}: cancel" in out.stdout, out.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "cocoeval", "batches", "--cache", str(cache), "--cancel", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "no batch nope" in bad.stderr
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.stdout.split()[:2] == ["0", "ok"], first.stderr  # all five failed: cancelled
    assert _store(cache) == [(batch_id, "collected")]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.stdout.split()[:2] == ["5", "ok"]
    assert len(batches(srv)) == 2 and srv.stats()["prompts"] == {f"request {i}": 1 for i in range(5)}


@pytest.mark.parametrize("wire", WIRES)
def test_a_batch_the_provider_no_longer_knows_fails_its_calls_and_is_sent_again(srv, tmp_path, wire):
    cache = tmp_path / "cache.sqlite"
    cmd, batch_id = _kill_while_polling(srv, cache, wire)
    srv.reset()  # the server forgets every batch: 404 for this one
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split()[:2] == ["0", "ok"], out.stderr
    assert f"does not know batch {batch_id}" in out.stderr and "Traceback" not in out.stderr
    assert _store(cache) == [(batch_id, "collected")]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.stdout.split()[:2] == ["5", "ok"] and len(batches(srv)) == 1


def test_a_cancel_that_fails_says_why_and_forget_stops_tracking(srv, tmp_path):
    cmd2, batch2 = _kill_while_polling(srv, tmp_path / "other.sqlite", "openai")
    srv.configure(faults=[{"match": "/cancel", "path": "/v1/batches", "kind": "500", "times": -1}])
    bad = subprocess.run(
        [sys.executable, "-m", "cocoeval", "batches", "--cache", str(tmp_path / "other.sqlite"), "--cancel", "open"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and f"cancel {batch2}: not cancelled" in bad.stderr and "Traceback" not in bad.stderr
    forget = subprocess.run(
        [sys.executable, "-m", "cocoeval", "batches", "--cache", str(tmp_path / "other.sqlite"), "--forget", batch2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert forget.returncode == 0 and f"forgot {batch2}" in forget.stdout
    assert _store(tmp_path / "other.sqlite") == [(batch2, "collected")]
    srv.configure(faults=[], batch_steps=0)
    out = subprocess.run(cmd2, capture_output=True, text=True, timeout=120)
    assert out.stdout.split()[:2] == ["5", "ok"] and len(batches(srv)) == 2  # sent again


@pytest.mark.parametrize("wire", WIRES)
def test_a_lost_answer_to_creating_a_batch_costs_no_second_batch(srv, tmp_path, wire, caplog):
    path = "/v1/batches" if wire == "openai" else "/v1/messages/batches"
    # the create is answered after the client gave up: the batch exists, the client does not know
    srv.configure(faults=[{"match": path, "path": path, "kind": "timeout", "delay_s": 1.0, "times": 1}])
    with caplog.at_level("WARNING", logger="cocoeval"):
        out = runner(tmp_path, timeout_s=0.5).run(calls(model(srv, wire), ["a", "b", "c"]))
    assert [x.status for x in out] == ["ok"] * 3
    assert "creating a batch from" in caplog.text  # the first answer was lost; the batch was found
    assert len(batches(srv)) == 1 and len({x.response.batch_id for x in out}) == 1


@pytest.mark.parametrize("wire", WIRES)
def test_results_that_cannot_be_read_once_are_read_at_the_next_poll(srv, tmp_path, wire, caplog):
    fault = (
        {"match": "/content", "path": "/v1/files", "kind": "500", "times": 1}
        if wire == "openai"
        else {"match": "/results", "path": "/v1/messages/batches", "kind": "500", "times": 1}
    )
    srv.configure(faults=[fault])
    with caplog.at_level("WARNING", logger="cocoeval"):
        out = runner(tmp_path, max_retries=0).run(calls(model(srv, wire), ["a", "b"]))
    assert "reading the results of batch" in caplog.text
    assert [x.status for x in out] == ["ok", "ok"] and len(batches(srv)) == 1
    assert srv.stats()["prompts"] == {"a": 1, "b": 1}


@pytest.mark.parametrize("wire", WIRES)
def test_two_processes_resuming_one_batch_both_get_every_answer(srv, tmp_path, wire):
    import threading

    srv.configure(batch_steps=8)
    cs = calls(model(srv, wire), [f"q{i}" for i in range(4)])
    out: dict[str, list] = {}

    def run(name: str, poll: float) -> None:
        out[name] = runner(tmp_path, batch_poll_s=poll).run(cs)

    a = threading.Thread(target=run, args=("a", 0.05))
    a.start()
    deadline = time.time() + 30
    while not any(s == "submitted" for _, s in _store(tmp_path / "cache.sqlite")) and time.time() < deadline:
        time.sleep(0.01)
    b = threading.Thread(target=run, args=("b", 0.01))  # resumes the same batch, collects it first
    b.start()
    a.join(60)
    b.join(60)
    for name in "ab":
        assert [x.status for x in out[name]] == ["ok"] * 4, out[name]
    assert len(batches(srv)) == 1 and all(v == 1 for v in srv.stats()["prompts"].values())

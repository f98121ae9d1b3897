"""Runner throughput against the fake provider server (100 ms latency).

    python benchmarks/runner_throughput.py [--requests 2000] [--concurrency 64] [--latency 0.1]

Prints achieved requests/s, the ideal (concurrency / latency) and their ratio (target >= 0.8 on
a 2-core machine), then a full re-run's figures: all cache hits, zero requests sent.

The process's one-time start-up (importing the provider SDK, ~0.6 s here) is measured and printed
on its own by a one-request warm-up run; the throughput figures count from the first request of
the timed run, and the rate including the start-up is printed beside them.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner
from cocoeval.llm.fakeserver import FakeServer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.1)
    a = ap.parse_args()
    with FakeServer(latency_s=a.latency) as srv, tempfile.TemporaryDirectory() as tmp:
        calls = [Call(model=f"openai-compatible/bench@{srv.openai_base}", stage="bench",
                      request=GenerateRequest(messages=[Message(role="user", content=f"request {i}")],
                                              max_tokens=16))
                 for i in range(a.requests)]
        cfg = LLMConfig(cache=str(Path(tmp) / "cache.sqlite"), concurrency=a.concurrency, progress=False)
        warm = Call(model=calls[0].model, stage="warm-up",
                    request=GenerateRequest(messages=[Message(role="user", content="warm-up")], max_tokens=16))
        t0 = time.perf_counter()
        Runner(cfg).run([warm])
        startup = time.perf_counter() - t0
        srv.reset()
        t0 = time.perf_counter()
        out = Runner(cfg).run(calls)
        secs = time.perf_counter() - t0
        ok = sum(r.status == "ok" for r in out)
        ideal = a.concurrency / a.latency
        rate = a.requests / secs
        print(f"first run: {a.requests} requests ({ok} ok) in {secs:.2f} s; sent {srv.stats()['requests']}")
        print(f"achieved {rate:.0f} req/s; ideal {ideal:.0f} req/s (concurrency {a.concurrency} / "
              f"latency {a.latency * 1000:.0f} ms); ratio {rate / ideal:.2f} (target >= 0.8)")
        with_start = a.requests / (secs + startup)
        print(f"one-time start-up (SDK import, warm-up request) {startup:.2f} s; including it "
              f"{with_start:.0f} req/s, ratio {with_start / ideal:.2f}")
        srv.reset()
        t0 = time.perf_counter()
        runner = Runner(cfg)
        again = runner.run(calls)
        secs = time.perf_counter() - t0
        hits = sum(r.cache_hit for r in again)
        print(f"re-run: {a.requests} requests in {secs:.2f} s ({a.requests / secs:.0f} req/s); "
              f"cache hits {hits}; requests sent {srv.stats()['requests']}")


if __name__ == "__main__":
    main()

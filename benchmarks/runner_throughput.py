"""Runner throughput against the fake provider server (100 ms latency).

    python benchmarks/runner_throughput.py [--requests 2000] [--concurrency 64] [--latency 0.1]
                                           [--processes 2]

Prints achieved requests/s, the ideal (concurrency / latency) and their ratio (target >= 0.8 on
a 2-core machine), first with every call sent from the runner's own process (``llm.processes:
1``, the default), then with ``--processes`` worker processes sharing the sending; then a full
re-run's figures: all cache hits, zero requests sent.

At 100 ms the provider SDK's own CPU time per request (about 1.5 ms here: building the request,
its headers and URL, parsing the answer) is what one process runs out of; worker processes
spread it over the cores.

Each configuration's one-time start-up (importing the provider SDK, ~0.6 s here; starting the
worker processes) is measured and printed on its own by a warm-up run of the same ``Runner``; the
throughput figures count from the first request of the timed run, and the rate including the
start-up is printed beside them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: cocoeval and tests.fakes

from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner
from tests.fakes.server import FakeServer


def call(srv: FakeServer, text: str, stage: str = "bench") -> Call:
    return Call(
        model=f"openai-compatible/bench@{srv.openai_base}",
        stage=stage,
        request=GenerateRequest(messages=[Message(role="user", content=text)], max_tokens=16),
    )


def measure(srv: FakeServer, cache: Path, a: argparse.Namespace, processes: int) -> Runner:
    runner = Runner(LLMConfig(cache=str(cache), concurrency=a.concurrency, progress=False, processes=processes))
    t0 = time.perf_counter()
    runner.run([call(srv, f"warm-up {k}", "warm-up") for k in range(processes)])  # one per worker
    startup = time.perf_counter() - t0
    srv.reset()
    t0 = time.perf_counter()
    out = runner.run([call(srv, f"request {i}") for i in range(a.requests)])
    secs = time.perf_counter() - t0
    ok = sum(r.status == "ok" for r in out)
    ideal = a.concurrency / a.latency
    rate = a.requests / secs
    with_start = a.requests / (secs + startup)
    how = "one process" if processes == 1 else f"{processes} worker processes"
    print(
        f"{how} (llm.processes: {processes}): {a.requests} requests ({ok} ok) in {secs:.2f} s; "
        f"sent {srv.stats()['requests']}"
    )
    print(
        f"  achieved {rate:.0f} req/s; ideal {ideal:.0f} req/s (concurrency {a.concurrency} / "
        f"latency {a.latency * 1000:.0f} ms); ratio {rate / ideal:.2f} (target >= 0.8)"
    )
    print(f"  one-time start-up {startup:.2f} s; including it {with_start:.0f} req/s, ratio {with_start / ideal:.2f}")
    return runner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--processes", type=int, default=2, help="worker processes of the second measurement")
    a = ap.parse_args()
    with FakeServer(latency_s=a.latency) as srv, tempfile.TemporaryDirectory() as tmp:
        runner = None
        for processes in dict.fromkeys((1, a.processes)):
            if runner is not None:
                runner.close()
            runner = measure(srv, Path(tmp) / f"cache-{processes}.sqlite", a, processes)
        assert runner is not None
        srv.reset()
        t0 = time.perf_counter()
        again = runner.run([call(srv, f"request {i}") for i in range(a.requests)])
        secs = time.perf_counter() - t0
        hits = sum(r.cache_hit for r in again)
        print(
            f"re-run: {a.requests} requests in {secs:.2f} s ({a.requests / secs:.0f} req/s); "
            f"cache hits {hits}; requests sent {srv.stats()['requests']}"
        )
        runner.close()


if __name__ == "__main__":
    main()
